//! The release phase: one release request under an unlock latch, the sweep of holds
//! nobody knew of, and the books (renewal registry, hold counts, instance lease,
//! courtesy window) brought in step with its outcome.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::Lock;
use crate::clock;
use crate::error::{Error, Result};
use crate::lock::raw::{LockKind, Ownership};
use crate::protocol::hash::ReleaseArgs;
use crate::protocol::names;
use crate::protocol::replies::Released;
use crate::watchdog::hold::{Hold, Loss};

/// At most this many unknown holds are released after a thread's last release (see
/// [`Lock::release_unknown_holds`]); more would need that many lost replies.
const MAX_UNKNOWN_HOLDS: u32 = 64;

impl<K: LockKind> Lock<K> {
    /// After a full release whose message reached `heard` subscribers: opens the
    /// courtesy window when someone besides this client's own subscription heard it, or
    /// a thread of this client waits. The releaser holds no subscription of its own at
    /// this point (it left the waiters when it took the lock), so every waiter counted
    /// is another thread.
    fn offer_courtesy(&self, owner: &str, heard: u32) {
        let core = self.core();
        let Some(window) = core.config().fairness.window() else {
            return;
        };
        if heard == 0 {
            return;
        }
        let channel = self.kind().wait_channel(owner);
        let audience = core.audience(&channel);
        if audience.waiters > 0 || heard > audience.own {
            // A window too long for the clock is no window at all rather than a panic.
            if let Some(until) = Instant::now().checked_add(window) {
                core.courtesy().open(&channel, until);
            }
        }
    }

    /// A guard's release of its hold, taken by `owner`.
    pub(super) fn release_hold(&self, owner: &str, hold: &Hold) -> Result<()> {
        // The verification harness's seeded bug (test-only feature, inert unless its
        // environment variable is set): delete the lock without the owner check, so a
        // holder that overstayed its lease takes the lock from whoever holds it now.
        #[cfg(feature = "verify-broken-no-owner-check")]
        if crate::verify_broken::active("no-owner-check") {
            let _ = self.force_unlock();
        }
        self.release(owner, Some(hold))
    }

    /// The release sequence of every kind: one release request under the unlock latch,
    /// then the renewal registry and the instance lease brought in step with its outcome.
    /// `hold` is the guard's (or the registry's) state when the caller held the lock
    /// through this client.
    pub(super) fn release(&self, owner: &str, hold: Option<&Hold>) -> Result<()> {
        // Every try carries the same latch key, so a retry after a lost reply replays
        // the first outcome instead of releasing a second hold.
        // A token's release is never resent, so it needs no latch (and the empty string
        // allocates nothing).
        let latch = match K::OWNERSHIP {
            Ownership::Thread => self.unlock_latch(),
            Ownership::Token => String::new(),
        };
        let (mut outcome, uncertain) = self.send_release(owner, &latch);
        if K::OWN_PARTLY
            && matches!(outcome, Ok(Released::Partly))
            && self.core().levels().count(self.key(), owner) <= 1
        {
            outcome = self.release_unknown_holds(owner);
        }
        let spent = self.spent_or_kept(latch, uncertain);
        self.settle_release(owner, hold, spent, outcome)
    }

    /// After this thread's last known hold was released but Redis kept the lock for it:
    /// the holds left were taken by acquires nobody knows of (one that ran after its
    /// reply was lost and the caller had given up, see `levels.rs`). No guard would ever
    /// release them, and each later reentrant acquire would renew them, so they are
    /// released now, one at a time as Redisson's unlock does, until the lock is free.
    /// The outcome is that of the last release.
    fn release_unknown_holds(&self, owner: &str) -> Result<Released> {
        let mut released = 0;
        loop {
            let outcome = self.release_with_latch(owner);
            released += 1;
            if !matches!(outcome, Ok(Released::Partly)) || released >= MAX_UNKNOWN_HOLDS {
                log::warn!(
                    "redmutex: released {released} hold(s) of {} {:?} that no guard of \
                     this client held (an acquire ran although its caller saw it fail)",
                    K::LOCK,
                    self.key()
                );
                return outcome;
            }
        }
    }

    /// Sends one release request of `owner` under `latch`, retried under that latch. A
    /// token's release is sent once: a second compare-and-delete after a lost reply would
    /// find the key gone and call the hold lost.
    ///
    /// Also says whether any try's outcome was unknown (its connection failed or timed
    /// out): that try may still reach Redis later, after the ones that answered, and only
    /// the latch, which records every outcome ("held nothing" too), makes it replay
    /// instead of taking off a hold the thread took since. Its latch must then live out
    /// its PX instead of being deleted early.
    fn send_release(&self, owner: &str, latch: &str) -> (Result<Released>, bool) {
        let core = self.core();
        let uncertain = std::cell::Cell::new(false);
        let once = || {
            let args = self.release_args(owner, latch);
            // The transport sends the request again itself after some connection
            // failures (a pooled connection found closed), which cannot tell a request
            // that never left from one that ran: any second send counts as a try whose
            // outcome was unknown, and so does an error that leaves it unknown.
            let sends = std::cell::Cell::new(0u32);
            let outcome = core.run_release(
                self.key(),
                |c| {
                    sends.set(sends.get() + 1);
                    self.kind().release(c, &args)
                },
                |r| matches!(r, Released::Partly | Released::Fully { .. }),
            );
            if sends.get() > 1 || outcome.as_ref().is_err_and(Error::is_transient) {
                uncertain.set(true);
            }
            outcome
        };
        // In the pool's urgent lane: whoever waits for the lock waits for this release,
        // so it must not queue behind other threads' first attempts.
        let outcome = crate::transport::urgent(|| match K::OWNERSHIP {
            Ownership::Thread => core.retrying(once),
            Ownership::Token => once(),
        });
        (outcome, uncertain.get())
    }

    /// [`release_with_latch`](Self::release_with_latch) for an acquire whose replication
    /// is unconfirmed; a failure leaves the hold to its lease, with a warning.
    pub(super) fn undo_unsynced(&self, owner: &str) {
        if let Err(e) = self.release_with_latch(owner) {
            log::warn!(
                "redmutex: could not undo an unsynced acquire of {} {:?}; it expires with \
                 its lease: {e}",
                K::LOCK,
                self.key()
            );
        }
    }

    /// Undoes one level of `owner`'s hold that no registry knows yet (an acquire that no
    /// replica acknowledged), under a fresh unlock latch.
    pub(super) fn release_with_latch(&self, owner: &str) -> Result<Released> {
        let latch = self.unlock_latch();
        let (outcome, uncertain) = self.send_release(owner, &latch);
        if let Some(latch) = self.spent_or_kept(latch, uncertain) {
            self.core().watchdog().discard_latch(latch);
        }
        outcome
    }

    /// `latch` back when it is spent (every try answered); `None`, with the latch kept to
    /// its PX, when a try's outcome was unknown (see [`send_release`](Self::send_release)).
    pub(in crate::lock) fn spent_or_kept(&self, latch: String, uncertain: bool) -> Option<String> {
        if !uncertain {
            return Some(latch);
        }
        if !latch.is_empty() {
            self.core().watchdog().keep_latch(latch);
        }
        None
    }

    /// A fresh unlock latch key (Redisson's `redisson_unlock_latch:{name}:<request-id>`)
    /// for one release request.
    pub(in crate::lock) fn unlock_latch(&self) -> String {
        let request_id = uuid::Uuid::new_v4().simple().to_string();
        names::unlock_latch(self.key(), &request_id)
    }

    /// The release script's arguments for one hold of `owner` under `latch`.
    pub(in crate::lock) fn release_args<'a>(
        &self,
        owner: &'a str,
        latch: &'a str,
    ) -> ReleaseArgs<'a> {
        let core = self.core();
        ReleaseArgs {
            owner,
            latch,
            latch_ms: core.config().unlock_latch_ms(),
            lease_ms: self.shared.lease_ms.load(Ordering::Relaxed),
            now_ms: clock::now_ms(),
            publish: core.publish_command(),
        }
    }

    /// Brings the renewal registry, the instance lease and `hold` in step with the
    /// outcome of a release request sent under `latch`, and says how it went. Callers
    /// that send the request themselves (a RedLock releases its members in parallel)
    /// settle it here, so every release ends the same way.
    ///
    /// `latch` is deleted early, as spent; `None` keeps it to its PX (a try whose outcome
    /// was unknown may still arrive, see [`send_release`](Self::send_release)).
    pub(in crate::lock) fn settle_release(
        &self,
        owner: &str,
        hold: Option<&Hold>,
        latch: Option<String>,
        outcome: Result<Released>,
    ) -> Result<()> {
        let levels = self.core().levels();
        let counted = K::OWNERSHIP == Ownership::Thread;
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(e) => {
                if counted {
                    levels.remove(self.key(), owner);
                }
                self.after_failed_release(owner, &e);
                return Err(e);
            }
        };
        // The spent latch is deleted later by the watchdog thread.
        if let Some(latch) = latch.filter(|_| counted) {
            self.core().watchdog().discard_latch(latch);
        }
        if let Released::Fully { heard } = outcome {
            self.offer_courtesy(owner, heard);
        }
        let name = self.key();
        if matches!(outcome, Released::Fully { .. } | Released::Missing) {
            // Redisson resets the instance's lease after the last release.
            let watchdog_ms = self.core().watchdog_ms();
            self.shared.lease_ms.store(watchdog_ms, Ordering::Relaxed);
        }
        let gone = matches!(outcome, Released::NotHeld | Released::Missing);
        if counted {
            if gone {
                levels.forget(name, owner);
            } else {
                levels.remove(name, owner);
            }
        }
        let watchdog = self.core().watchdog();
        watchdog.unregister(K::RENEWAL, name, owner, gone);
        match (outcome, hold) {
            (Released::Partly | Released::Fully { .. }, _) => Ok(()),
            // We held it once, so finding no hold now means it was lost.
            (_, Some(hold)) => {
                hold.mark(Loss::Lost);
                Err(Error::LockLost { name: name.into() })
            }
            // Redisson counts a missing fair lock as a successful unlock.
            (Released::Missing, None) => Ok(()),
            (Released::NotHeld, None) => Err(Error::NotHeld { name: name.into() }),
        }
    }

    /// After a release that failed, reads whether `owner` still holds the lock and keeps
    /// the renewal registry in step: the hold is given up either way, and if it is still
    /// in Redis it expires after its lease.
    fn after_failed_release(&self, owner: &str, err: &Error) {
        let name = self.key();
        let left: Result<bool> = self.core().run(name, |c| self.kind().holds(c, owner));
        let outcome = match &left {
            Ok(false) => "took effect all the same (waiters elsewhere fall back to the TTL)",
            Ok(true) => "did not happen; the hold expires with its lease",
            Err(_) => "is unknown",
        };
        log::warn!("redmutex: release of {name:?} failed and {outcome}: {err}");
        self.core()
            .watchdog()
            .unregister(K::RENEWAL, name, owner, matches!(left, Ok(false)));
    }
}
