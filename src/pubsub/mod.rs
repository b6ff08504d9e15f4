//! The pub/sub listener: dedicated subscriber connections shared by every thread of the
//! client that waits for a lock, a semaphore or a latch.
//!
//! There is one subscriber session per node that owns channels some thread waits on: a
//! single server has one; a cluster has one per master (a channel lives on the master
//! of its slot, as Redisson subscribes it). Each session is a thread `redmutex-pubsub`
//! with its own RESP3 connection ([`session`]); the [`registry`] of channels and
//! waiters is shared by all of them.
//!
//! # How a waiter avoids a lost wake-up
//!
//! A waiter registers in the registry and then waits for a signal before it retries the
//! acquire script. The session sends the first signal only after Redis confirmed the
//! channel's subscription; replies and messages on one connection arrive in the order
//! Redis processed them, so every unlock that Redis runs after that retry is delivered to
//! us. Signals are buffered (a channel of capacity one per waiter), so a message that
//! arrives between the retry and the waiter's sleep is not lost either. If the
//! subscription cannot be made (server down, ACL), waiters still sleep at most the lock's
//! TTL, as Redisson's waiters do, so they make progress without messages. Whenever a
//! subscription may have missed something (its connection broke, the server dropped it,
//! its channel moved to another node), every waiter of the channel is woken to retry.
//!
//! # Which subscriptions
//!
//! On a single server, `SUBSCRIBE`. In a cluster with sharded pub/sub (Redis 7,
//! Redisson's `AUTO`), a channel is subscribed twice on its slot's master, with
//! `SSUBSCRIBE` and `SUBSCRIBE`: a Redisson peer that publishes with `SPUBLISH` (3.23.5,
//! 4.x) and one that publishes with `PUBLISH` (4.x set to `OFF`) both wake us. Forced
//! modes subscribe only their kind.
//!
//! # Session states
//!
//! | mode           | session thread is blocked on           | a new channel is requested by |
//! |----------------|----------------------------------------|-------------------------------|
//! | `Idle`         | the kick channel (no subscriptions)    | a kick                        |
//! | `Listening`    | the socket, with a short read timeout  | `PUBLISH` on its control channel |
//! | `Reconnecting` | the kick channel, with a back-off      | a kick                        |
//!
//! A session's control channel (`redmutex:pubsub:<client-id>:<node>`) is subscribed only
//! while some lock channel is, so an idle client has no subscriptions and sends no
//! commands. The short read timeout in `Listening` is only a local timer: it lets the
//! session drop channels whose last waiter left, notice shutdown and topology changes,
//! and recover if a control message is lost; it never sits on the path of a wake-up or
//! of a new subscription.

mod registry;
mod session;
mod teller;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, bounded};
use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::transport::Routes;
pub(crate) use registry::WakeRule;
use registry::{Channel, ChannelState, Mode, Registry, Shared, Waiter, touch, wake_one};
use session::ensure_session;

/// What a waiter listens for: a channel and the rule its messages follow.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Interest<'a> {
    pub(crate) channel: &'a str,
    pub(crate) rule: WakeRule,
}

/// The listener: the registry and the session threads; owned by the client.
pub(crate) struct Listener {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("client", &self.shared.client_id)
            .finish_non_exhaustive()
    }
}

impl Listener {
    /// Starts the listener. A single server's session thread starts now (it opens its
    /// connection only when the first waiter needs it); a cluster's sessions start when
    /// a channel on their node is first waited on.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the single server's thread cannot be started.
    pub(crate) fn start(client_id: &str, routes: Routes) -> Result<Self> {
        let fixed = routes.fixed_home();
        let shared = Arc::new(Shared {
            registry: Mutex::new(Registry {
                channels: HashMap::new(),
                sessions: HashMap::new(),
                next_waiter: 0,
            }),
            client_id: client_id.to_owned(),
            stop: AtomicBool::new(false),
            routes,
            threads: Mutex::new(Vec::new()),
        });
        if let Some(addr) = fixed {
            let started = ensure_session(&shared, &mut shared.registry.lock(), &addr);
            if !started {
                return Err(Error::Io(std::io::Error::other(
                    "cannot start the pub/sub thread",
                )));
            }
        }
        Ok(Self { shared })
    }

    /// Registers the calling thread as a waiter on the interest's channel. The returned
    /// subscription is signalled once the channel is subscribed (at once if it already
    /// is), then on every message its rule says should wake it, and whenever the
    /// subscription may have missed one.
    pub(crate) fn subscribe(&self, interest: Interest<'_>) -> Result<Subscription> {
        self.register(interest, false)
    }

    /// Registers the calling thread as an observer of the interest's channel: signalled
    /// as a waiter is (once subscribed, after a reconnect), and on every message, but
    /// never counted among the waiters a message wakes, so it takes no wake-up from them.
    pub(crate) fn observe(&self, interest: Interest<'_>) -> Result<Subscription> {
        self.register(interest, true)
    }

    fn register(&self, interest: Interest<'_>, observer: bool) -> Result<Subscription> {
        let Interest { channel, rule } = interest;
        if self.shared.stop.load(Ordering::Acquire) {
            return Err(Error::Shutdown);
        }
        let (signal, signals) = bounded(1);
        // Where a new channel lives; no I/O (a map lookup in a cluster).
        let home = self.shared.routes.home(channel);
        let (id, action, kick, control, live) = {
            let mut reg = self.shared.registry.lock();
            let id = reg.next_waiter;
            reg.next_waiter += 1;
            if !reg.channels.contains_key(channel) {
                let (home, state) = match &home {
                    Ok(h) if ensure_session(&self.shared, &mut reg, &h.addr) => {
                        (h.addr.clone(), ChannelState::Wanted)
                    }
                    other => {
                        if let Err(e) = other {
                            log::warn!(
                                "redmutex: no node to subscribe {channel:?} on, waiters fall back to TTL waits: {e}"
                            );
                        }
                        (String::new(), ChannelState::Refused)
                    }
                };
                touch(&mut reg.sessions, &home, channel);
                reg.channels.insert(
                    channel.to_owned(),
                    Channel {
                        rule,
                        state,
                        requested: false,
                        waiters: Vec::new(),
                        home,
                    },
                );
            }
            let Registry {
                channels, sessions, ..
            } = &mut *reg;
            let Some(ch) = channels.get_mut(channel) else {
                return Err(Error::Shutdown);
            };
            let session = sessions.get_mut(&ch.home);
            let (mode, control_live, poked) = session
                .as_ref()
                .map_or((Mode::Reconnecting, false, false), |s| {
                    (s.mode, s.control_live, s.poked)
                });
            let live = ch.state == ChannelState::Subscribed;
            let mut action = action_for(ch.state, ch.requested, mode, control_live);
            match action {
                // Already confirmed (or known to be impossible): retry at once.
                Action::SignalNow => {
                    let _ = signal.try_send(());
                }
                Action::Kick => ch.requested = true,
                Action::Publish => {
                    ch.requested = true;
                    // Another waiter's publish is on its way and the session has not
                    // passed over the registry since: that pass will find this channel
                    // (we registered it under the lock the pass takes), so no wake-up
                    // is lost by not publishing again.
                    if poked {
                        action = Action::None;
                    } else if let Some(s) = session {
                        s.poked = true;
                    }
                }
                Action::None => {}
            }
            let session = sessions.get(&ch.home);
            ch.waiters.push(Waiter {
                id,
                signal,
                observer,
            });
            let kick = session.map(|s| s.kick.clone());
            let control = session.map(|s| (ch.home.clone(), s.control.clone()));
            (id, action, kick, control, live)
        };
        match (action, kick, control) {
            (Action::Kick, Some(kick), _) => {
                let _ = kick.try_send(());
            }
            (Action::Publish, _, Some((addr, control))) => self.publish_control(&addr, &control),
            _ => {}
        }
        Ok(Subscription {
            shared: Arc::clone(&self.shared),
            channel: channel.to_owned(),
            id,
            signals,
            live,
            observer,
        })
    }

    /// Who of this client was listening on `channel` as an unlock was published there:
    /// how many of the subscribers Redis counted are this client's own (`kinds`
    /// subscriptions per channel: `SUBSCRIBE`, and `SSUBSCRIBE` too in sharded mode), and
    /// how many of its threads wait on it. Read just after the release's reply, so it can
    /// be off by a subscription in flux: a channel being subscribed is counted as not yet
    /// ours (its waiters exist, and they alone call for courtesy), one being left as
    /// still ours (it may already be gone, hiding one remote subscriber until the next
    /// release).
    pub(crate) fn audience(&self, channel: &str, kinds: u32) -> Audience {
        let reg = self.shared.registry.lock();
        reg.channels
            .get(channel)
            .map_or(Audience::default(), |ch| Audience {
                own: match ch.state {
                    ChannelState::Subscribed | ChannelState::Leaving => kinds,
                    _ => 0,
                },
                waiters: ch.waiters.iter().filter(|w| !w.observer).count(),
            })
    }

    /// Wakes a listening session out of its socket read. Best effort: if it fails, the
    /// session still re-plans after its read timeout.
    fn publish_control(&self, addr: &str, control: &str) {
        // Urgent: every new waiter of this pass waits on it, and it must not queue for a
        // pooled connection behind their own first attempts.
        let published = crate::transport::urgent(|| self.shared.routes.publish(addr, control, "0"));
        if let Err(e) = published {
            log::debug!("redmutex: control publish failed, listener re-plans on its timer: {e}");
        }
    }

    /// Stops the session threads and waits for them. Waiters still registered are woken
    /// and then see [`Error::Shutdown`].
    pub(crate) fn shutdown(&self) {
        self.shared.stop.store(true, Ordering::Release);
        let kicks: Vec<Sender<()>> = self
            .shared
            .registry
            .lock()
            .sessions
            .values()
            .map(|s| s.kick.clone())
            .collect();
        for kick in kicks {
            let _ = kick.try_send(());
        }
        let threads = std::mem::take(&mut *self.shared.threads.lock());
        for thread in threads {
            let _ = thread.join();
        }
        // Dropping every waiter's sender tells waiters still sleeping that we are gone.
        let mut reg = self.shared.registry.lock();
        reg.channels.clear();
        reg.sessions.clear();
    }
}

/// This client's share of a channel's listeners; see [`Listener::audience`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Audience {
    /// Subscriptions of this client's session on the channel.
    pub(crate) own: u32,
    /// This client's threads waiting on the channel.
    pub(crate) waiters: usize,
}

/// What a new waiter must do so that its channel gets subscribed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// Nothing: the subscription is on its way, or someone already asked for it.
    None,
    /// The channel is subscribed (or refused): signal the waiter at once.
    SignalNow,
    /// Wake an idle or reconnecting listener through its kick channel.
    Kick,
    /// End a listening listener's socket read with a control-channel publish.
    Publish,
}

/// The decision of [`Listener::subscribe`] for a channel in `state`.
fn action_for(state: ChannelState, requested: bool, mode: Mode, control_live: bool) -> Action {
    match state {
        ChannelState::Subscribed | ChannelState::Refused => Action::SignalNow,
        // A reply is on its way; the listener re-plans when it arrives.
        ChannelState::Subscribing | ChannelState::Leaving => Action::None,
        ChannelState::Wanted if requested => Action::None,
        ChannelState::Wanted => match mode {
            Mode::Idle | Mode::Reconnecting => Action::Kick,
            Mode::Listening if control_live => Action::Publish,
            // The control subscription is being made or dropped: its reply makes the
            // listener re-plan.
            Mode::Listening => Action::None,
        },
    }
}

/// One waiter's registration on a channel; dropping it deregisters the waiter.
pub(crate) struct Subscription {
    shared: Arc<Shared>,
    channel: String,
    id: u64,
    signals: Receiver<()>,
    /// The channel was already subscribed when this waiter registered.
    live: bool,
    /// Registered with [`Listener::observe`].
    observer: bool,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("channel", &self.channel)
            .field("id", &self.id)
            .finish()
    }
}

/// Why [`Subscription::wait`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Woken {
    /// A signal: subscription confirmed, a message, or a reconnect.
    Signal,
    /// The deadline passed.
    Timeout,
    /// The listener stopped.
    Closed,
}

impl Subscription {
    /// Sleeps until a signal or `deadline` (`None`: no deadline).
    pub(crate) fn wait(&self, deadline: Option<Instant>) -> Woken {
        let got = match deadline {
            Some(d) => self.signals.recv_deadline(d).map_err(|e| e.is_timeout()),
            None => self.signals.recv().map_err(|_| false),
        };
        match got {
            Ok(()) => Woken::Signal,
            Err(true) => Woken::Timeout,
            Err(false) => Woken::Closed,
        }
    }
}

impl Subscription {
    /// [`wait`](Self::wait) that `stop` also ends, with `None`, once it is ready (it
    /// carries no message: it is ready when disconnected, as a tripped
    /// [`Cancel`](crate::Cancel) is). Both channels are one `select`, so `stop` wakes the
    /// sleeper at once. A signal ready at the same moment stays buffered, for the drop to
    /// hand on.
    pub(crate) fn wait_or_stop(
        &self,
        deadline: Option<Instant>,
        stop: &Receiver<std::convert::Infallible>,
    ) -> Option<Woken> {
        let mut select = crossbeam_channel::Select::new();
        let signals = select.recv(&self.signals);
        select.recv(stop);
        let operation = match deadline {
            Some(d) => match select.select_deadline(d) {
                Ok(operation) => operation,
                Err(_) => return Some(Woken::Timeout),
            },
            None => select.select(),
        };
        if operation.index() == signals {
            return Some(match operation.recv(&self.signals) {
                Ok(()) => Woken::Signal,
                Err(_) => Woken::Closed,
            });
        }
        // Ready only when disconnected: the receive completes the operation.
        let _ = operation.recv(stop);
        None
    }

    /// Whether the channel was already subscribed (and so hearing every message) when
    /// this waiter registered: then its first signal came at once, and every message
    /// published since its registration reaches it or a waiter before it.
    pub(crate) fn was_live(&self) -> bool {
        self.live
    }

    /// Takes a buffered signal, if there is one, without waiting: for a waiter that is
    /// about to retry anyway (the retry reads what the signal announced), so that the
    /// signal does not bring it back for a second, pointless retry.
    pub(crate) fn clear(&self) {
        let _ = self.signals.try_recv();
    }
}

/// Sleeps until any of `subscriptions` is signalled or `deadline` passes (`None`: no
/// deadline): how a waiter on several channels at once (a RedLock waiting for any of
/// its busy members, each on its own server) sleeps. Only the signal that woke it is
/// taken; the others stay buffered.
pub(crate) fn wait_any(subscriptions: &[&Subscription], deadline: Option<Instant>) -> Woken {
    if let [one] = subscriptions {
        return one.wait(deadline);
    }
    if subscriptions.is_empty() {
        // Nothing to hear: only the deadline can end the sleep.
        return match deadline {
            Some(d) => {
                std::thread::sleep(d.saturating_duration_since(Instant::now()));
                Woken::Timeout
            }
            None => Woken::Closed,
        };
    }
    let mut select = crossbeam_channel::Select::new();
    for s in subscriptions {
        select.recv(&s.signals);
    }
    let operation = match deadline {
        Some(d) => match select.select_deadline(d) {
            Ok(operation) => operation,
            Err(_) => return Woken::Timeout,
        },
        None => select.select(),
    };
    let index = operation.index();
    match operation.recv(&subscriptions[index].signals) {
        Ok(()) => Woken::Signal,
        Err(_) => Woken::Closed,
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut reg = self.shared.registry.lock();
        let Registry {
            channels, sessions, ..
        } = &mut *reg;
        if let Some(ch) = channels.get_mut(&self.channel) {
            ch.waiters.retain(|w| w.id != self.id);
            // A wake-up this waiter never used goes to the next waiter, so a release is
            // not swallowed by a waiter that gave up or got the lock another way. An
            // observer's signals were never taken from a waiter.
            if self.signals.try_recv().is_ok() && !self.observer {
                wake_one(&ch.waiters);
            }
            if ch.waiters.is_empty() {
                // The session unsubscribes it (or forgets it) in its next pass.
                touch(sessions, &ch.home, &self.channel);
            }
        }
        // The session unsubscribes an empty channel on its next pass (within its read
        // timeout).
    }
}

#[cfg(test)]
mod tests {
    use super::registry::Wakes;
    use super::*;

    #[test]
    fn rules_read_redissons_payloads() {
        assert_eq!(WakeRule::Lock.wakes(b"0"), Wakes::One);
        assert_eq!(WakeRule::Lock.wakes(b"1"), Wakes::All);
        assert_eq!(WakeRule::Lock.wakes(b"2"), Wakes::None);
        assert_eq!(WakeRule::Latch.wakes(b"0"), Wakes::All);
        assert_eq!(WakeRule::Latch.wakes(b"1"), Wakes::None);
        assert_eq!(WakeRule::Semaphore.wakes(b"3"), Wakes::All);
        assert_eq!(WakeRule::Semaphore.wakes(b"1"), Wakes::All);
        assert_eq!(WakeRule::Semaphore.wakes(b"0"), Wakes::None);
        assert_eq!(WakeRule::Semaphore.wakes(b"-2"), Wakes::None);
        assert_eq!(WakeRule::Semaphore.wakes(b"x"), Wakes::None);
    }

    #[test]
    fn a_new_waiter_asks_for_its_channel_once_and_the_right_way() {
        use ChannelState::*;
        assert_eq!(
            action_for(Subscribed, true, Mode::Listening, true),
            Action::SignalNow
        );
        assert_eq!(
            action_for(Refused, true, Mode::Idle, false),
            Action::SignalNow
        );
        assert_eq!(
            action_for(Subscribing, true, Mode::Listening, true),
            Action::None
        );
        assert_eq!(
            action_for(Leaving, true, Mode::Listening, true),
            Action::None
        );
        assert_eq!(action_for(Wanted, true, Mode::Idle, false), Action::None);
        assert_eq!(action_for(Wanted, false, Mode::Idle, false), Action::Kick);
        assert_eq!(
            action_for(Wanted, false, Mode::Reconnecting, false),
            Action::Kick
        );
        assert_eq!(
            action_for(Wanted, false, Mode::Listening, true),
            Action::Publish
        );
        assert_eq!(
            action_for(Wanted, false, Mode::Listening, false),
            Action::None
        );
    }

    #[test]
    fn an_observer_hears_every_message_and_takes_no_waiters_wake_up() {
        let (waiter, woken) = bounded(1);
        let (observer, told) = bounded(1);
        let mut channels = HashMap::new();
        channels.insert(
            "c".to_owned(),
            Channel {
                rule: WakeRule::Lock,
                state: ChannelState::Subscribed,
                requested: true,
                // The observer first: a "0" still wakes the waiter behind it.
                waiters: vec![
                    Waiter {
                        id: 0,
                        signal: observer,
                        observer: true,
                    },
                    Waiter {
                        id: 1,
                        signal: waiter,
                        observer: false,
                    },
                ],
                home: "n:1".to_owned(),
            },
        );
        let reg = Registry {
            channels,
            sessions: HashMap::new(),
            next_waiter: 2,
        };
        reg.deliver("c", b"0");
        assert!(woken.try_recv().is_ok(), "the waiter got the wake-up");
        assert!(told.try_recv().is_ok(), "the observer heard the message");
        reg.deliver("c", b"2");
        assert!(woken.try_recv().is_err(), "a payload that wakes nobody");
        assert!(told.try_recv().is_ok(), "is still heard by the observer");
    }

    #[test]
    fn a_permit_message_wakes_every_waiter_whatever_it_needs() {
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..3).map(|_| bounded(1)).unzip();
        let waiters: Vec<Waiter> = senders
            .into_iter()
            .enumerate()
            .map(|(i, signal)| Waiter {
                id: i as u64,
                signal,
                observer: false,
            })
            .collect();
        let mut channels = HashMap::new();
        channels.insert(
            "c".to_owned(),
            Channel {
                rule: WakeRule::Semaphore,
                state: ChannelState::Subscribed,
                requested: true,
                waiters,
                home: "n:1".to_owned(),
            },
        );
        let reg = Registry {
            channels,
            sessions: HashMap::new(),
            next_waiter: 3,
        };
        reg.deliver("c", b"0");
        assert!(receivers.iter().all(|r| r.try_recv().is_err()));
        reg.deliver("c", b"1");
        assert!(receivers.iter().all(|r| r.try_recv().is_ok()));
    }
}
