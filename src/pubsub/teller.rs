//! Telling waiters that their channel's subscription is confirmed, off the session
//! thread.
//!
//! A confirmation wakes every waiter of the channel, and after a pipeline of hundreds of
//! `SUBSCRIBE`s that is hundreds of threads. Each woken thread tends to preempt the one
//! that woke it, so waking them took the session 10-150 ms in the bench's burst of
//! 10,000 new waiters, and during that time it read no message: the established waiters'
//! wake-ups waited. So the session hands each batch of confirmation signals to a thread
//! of its own, `redmutex-pubsub-tell` (started the first time there is a batch), and goes
//! back to its socket at once. Messages are still delivered by the session itself.
//!
//! No wake-up is lost by telling later: a confirmation announces no release, a waiter
//! registering meanwhile sees the channel subscribed and is signalled at once, and a
//! waiter that left meanwhile needs no confirmation (see `Session::subscribe`).

use std::thread::JoinHandle;

use crossbeam_channel::{Sender, unbounded};

/// One confirmation's worth of waiters' signal senders.
type Batch = Vec<Sender<()>>;

/// The session's teller thread, if started.
#[derive(Default)]
pub(super) struct Teller {
    running: Option<(Sender<Batch>, JoinHandle<()>)>,
}

impl Teller {
    /// Signals each of `signals` once, soon; inline when the thread cannot be started.
    pub(super) fn tell(&mut self, signals: Batch) {
        if signals.is_empty() {
            return;
        }
        if self.running.is_none() {
            let (batches, received) = unbounded::<Batch>();
            let spawned = std::thread::Builder::new()
                .name("redmutex-pubsub-tell".into())
                .spawn(move || {
                    for batch in received {
                        signal_all(batch);
                    }
                });
            match spawned {
                Ok(thread) => self.running = Some((batches, thread)),
                Err(e) => log::debug!("redmutex: no teller thread ({e}), telling inline"),
            }
        }
        match &self.running {
            Some((batches, _)) => {
                if let Err(returned) = batches.send(signals) {
                    // The thread is gone (it panicked): tell them here.
                    signal_all(returned.0);
                }
            }
            None => signal_all(signals),
        }
    }
}

/// Sends one signal on each; a full buffer (a signal already pending) or a gone waiter
/// is fine either way.
fn signal_all(signals: Batch) {
    for signal in signals {
        let _ = signal.try_send(());
    }
}

impl Drop for Teller {
    fn drop(&mut self) {
        if let Some((batches, thread)) = self.running.take() {
            // Closing the channel ends the thread once it has told what it holds.
            drop(batches);
            let _ = thread.join();
        }
    }
}
