//! A Rust holder thread that the scenarios start and stop on cue.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use redmutex::RLock;

/// A Rust thread that takes `lock` with `lock()`, reports when it got it, holds it until
/// told to release, and returns the release's result.
pub(crate) struct RustHolder {
    acquired: Receiver<Instant>,
    got: Option<Instant>,
    release: Sender<()>,
    handle: JoinHandle<redmutex::Result<()>>,
}

impl RustHolder {
    pub(crate) fn spawn(lock: RLock) -> Self {
        let (acq_tx, acquired) = mpsc::channel();
        let (release, rel_rx) = mpsc::channel::<()>();
        let handle = thread::spawn(move || {
            let guard = lock.lock()?;
            let _ = acq_tx.send(Instant::now());
            let _ = rel_rx.recv();
            guard.unlock()
        });
        Self {
            acquired,
            got: None,
            release,
            handle,
        }
    }

    /// When the thread acquired, waiting at most `timeout` (panics past it).
    pub(crate) fn acquired_at(&mut self, timeout: Duration) -> Instant {
        if let Some(t) = self.got {
            return t;
        }
        match self.acquired.recv_timeout(timeout) {
            Ok(t) => {
                self.got = Some(t);
                t
            }
            Err(RecvTimeoutError::Timeout) => panic!("rust waiter not acquired within {timeout:?}"),
            Err(RecvTimeoutError::Disconnected) => {
                panic!("rust waiter thread ended without the lock")
            }
        }
    }

    /// Whether it has acquired by now (no waiting).
    pub(crate) fn has_acquired(&mut self) -> bool {
        if self.got.is_none() {
            self.got = self.acquired.try_recv().ok();
        }
        self.got.is_some()
    }

    pub(crate) fn release(self) -> redmutex::Result<()> {
        let _ = self.release.send(());
        self.handle.join().expect("rust holder thread panicked")
    }
}
