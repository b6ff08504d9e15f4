//! The acquire phase: Redisson's waiting loop around one attempt, the replica-sync
//! retry, the adoption of a grant whose reply was lost, and the guard a grant becomes.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{Lock, LockGuard, Patience};
use crate::clock;
use crate::error::{Error, Result};
use crate::lock::raw::{self, Answer, Backoff, HeldLock, Leave, LockKind, Owned, Ownership};
use crate::metrics;
use crate::pubsub::{Interest, WakeRule};
use crate::transport::replica_sync::Synced;
use crate::wait::cancel::Cancel;
use crate::wait::{self, Attempt};
use crate::watchdog::hold_state::HoldState;

/// What a granting attempt found: the hold's lease (and its milliseconds; `None`: under
/// the watchdog), when it ends at the latest, and a fenced grant's token.
struct Grant {
    lease: Option<(Duration, u64)>,
    until: Instant,
    token: Option<u64>,
}

/// One acquisition request, the same for every attempt it makes.
struct Request<'a> {
    owner: &'a str,
    lease: Option<Duration>,
    lease_ms: u64,
    patience: Patience,
}

impl<K: LockKind> Lock<K> {
    /// [`acquire`](Self::acquire) without a deadline.
    pub(super) fn acquire_forever(&self, lease: Option<Duration>) -> Result<LockGuard<K>> {
        forever(self.acquire(lease, Patience::Forever))
    }

    /// [`acquire_owned`](Self::acquire_owned) for a new owner of the current thread (the
    /// kind's: its thread field, or a fresh token), without a cancel.
    pub(in crate::lock) fn acquire(
        &self,
        lease: Option<Duration>,
        patience: Patience,
    ) -> Result<Option<LockGuard<K>>> {
        match self.kind().new_owner(self.core().id()) {
            Ok(owned) => self.acquire_owned(owned, lease, patience, None),
            Err(e) => {
                // Refused before any attempt (a second hold of a token lock): still one
                // acquisition, with no attempt, in the metrics.
                let refused = Err(e);
                metrics::acquisition(
                    K::LOCK,
                    self.label(),
                    metrics::Outcome::of(&refused),
                    Duration::ZERO,
                    Some(0),
                );
                refused
            }
        }
    }

    /// Redisson's acquisition loop for the owner field `owner`: try; if held, subscribe,
    /// then alternate sleeping (until a wake-up or the holder's TTL) and trying, until
    /// acquired, out of patience or cancelled. A waiter that gives up, for whatever
    /// reason, leaves the queue of a queueing kind at once: left there, its place would
    /// hold up every waiter behind it until its slot ended.
    pub(in crate::lock) fn acquire_owned(
        &self,
        owned: Owned,
        lease: Option<Duration>,
        patience: Patience,
        cancel: Option<&Cancel>,
    ) -> Result<Option<LockGuard<K>>> {
        let Owned { field, claim } = owned;
        let owner = field.as_str();
        let (deadline, wait) = (patience.start(), patience.limit());
        let request = Request {
            owner,
            lease,
            lease_ms: lease.map_or(Ok(self.core().watchdog_ms()), clock::lease_ms)?,
            patience,
        };
        let channel = self.kind().wait_channel(owner);
        let interest = Interest {
            channel: &channel,
            rule: WakeRule::Lock,
        };
        let mut backoff = Backoff::default();
        let started = Instant::now();
        let mut attempts = 0u32;
        let attempt = || {
            attempts += 1;
            self.attempt(&request, wait, &mut backoff)
        };
        let outcome = match self.kind().polls() {
            // No message ever comes (the spin lock): the waiter paces its own retries.
            Some(pauses) => wait::poll(deadline, pauses.pauses(), cancel, attempt),
            None => match self.courtesy_until(&channel, patience) {
                Some(hold_back) => wait::acquire_after_courtesy(
                    self.core(),
                    interest,
                    deadline,
                    hold_back,
                    cancel,
                    attempt,
                ),
                None => {
                    wait::acquire_or_wait_until(self.core(), interest, deadline, cancel, attempt)
                }
            },
        };
        let ended = metrics::Outcome::of(&outcome);
        metrics::acquisition(
            K::LOCK,
            self.label(),
            ended,
            started.elapsed(),
            Some(attempts),
        );
        let queued = !matches!(patience, Patience::Once);
        // A refused re-entry never queued: the script refuses before it would.
        let gave_up = !matches!(outcome, Ok(Some(_)) | Err(Error::AlreadyHeld { .. }));
        if K::QUEUES && queued && gave_up {
            self.leave_queue(owner, wait);
        }
        // The guard is made here, once the loop is done with the owner field, so that
        // the field moves into it instead of being copied.
        outcome.map(|got| {
            got.map(|g| {
                self.granted_until(field, g.lease, g.until, g.token)
                    .claimed(claim)
            })
        })
    }

    /// Whether an acquire that failed with `e` may have run, so that the kind's
    /// adoption check must tell: a closed connection for every kind; for a token, whose
    /// grant is its own beyond doubt, any transient failure (a timeout included).
    fn may_adopt_after(e: &Error) -> bool {
        is_dropped(e) || (K::OWNERSHIP == Ownership::Token && e.is_transient())
    }

    /// Until when this acquisition holds back for the waiters a recent release woke (see
    /// `fairness.rs`); `None` on the uncontended path, which reads one atomic flag here.
    /// A single attempt never holds back: it may not wait.
    fn courtesy_until(&self, channel: &str, patience: Patience) -> Option<Instant> {
        if matches!(patience, Patience::Once) {
            return None;
        }
        self.core().config().fairness.window()?;
        self.core().courtesy().until(channel)
    }

    /// One run of the acquire script: the grant, or when to retry at the latest.
    fn attempt(
        &self,
        r: &Request<'_>,
        wait: Option<Duration>,
        backoff: &mut Backoff,
    ) -> Result<Attempt<Grant>> {
        let mut sent = Instant::now();
        // Set when the grant is a hold adopted after a lost reply: its lease end, which
        // the key's TTL gives, not this request's send.
        let mut adopted_until = None;
        let mut tries = 0;
        let mut dropped = 0;
        let answer = loop {
            let args = raw::Acquire {
                owner: r.owner,
                lease_ms: r.lease_ms,
                wait,
                now_ms: clock::now_ms(),
            };
            let script = |c: &mut redis::Connection| match r.patience {
                Patience::Once => self.kind().try_acquire(c, &args),
                _ => self.kind().acquire(c, &args),
            };
            let ran = match K::OWNERSHIP {
                Ownership::Thread => self
                    .core()
                    .run_acquire(self.key(), script, |a| matches!(a, Answer::Held { .. })),
                // The token lock is the peers' protocol, which has no replica check (and
                // the adopted hold's TTL rewrite reads a hash): its acquire goes out as
                // the plain request it always was.
                Ownership::Token => self
                    .core()
                    .run(self.key(), script)
                    .map(|answer| (answer, Synced::Unchecked)),
            };
            let (answer, synced) = match ran {
                Ok(found) => found,
                Err(e) if Self::may_adopt_after(&e) => match self.check_adoption(r, sent, &e) {
                    // It ran, but the WAIT after it was lost with the connection (or
                    // never sent): without it a failover could hand the hold to someone
                    // else, so it is owed here, and a failure to send it undoes the hold
                    // as an unacknowledged one is undone below.
                    Ok(Some((token, until))) => {
                        let resynced = match K::OWNERSHIP {
                            Ownership::Thread => self.core().resync_adopted(self.key(), r.owner),
                            Ownership::Token => Ok(Synced::Unchecked),
                        };
                        match resynced {
                            Ok(synced) => {
                                adopted_until = Some(until);
                                (Answer::Held { token }, synced)
                            }
                            Err(e) => {
                                self.undo_unsynced(r.owner);
                                return Err(e);
                            }
                        }
                    }
                    // It did not run: the connection was dead before it was sent (an
                    // idle pooled connection after a restart or a reset). The check
                    // just reached the server, so try again at once, at most once per
                    // pooled connection plus one, as the transport resends a request
                    // that certainly did not run.
                    Ok(None) if is_dropped(&e) && dropped < self.core().config().pool_max_size => {
                        dropped += 1;
                        sent = Instant::now();
                        continue;
                    }
                    Ok(None) => return Err(e),
                    // A token's failed check was logged with the acquire's own error,
                    // which is the one to report; a hash kind reports the check's.
                    Err(_) if K::OWNERSHIP == Ownership::Token => return Err(e),
                    Err(check) => return Err(check),
                },
                Err(e) => return Err(e),
            };
            let (Synced::NoneAcked { replicas } | Synced::Demoted { replicas }) = synced else {
                break answer;
            };
            crate::metrics::replica_sync_failed("acquire");
            // No replica has the hold, or the master is being demoted (its replicas are
            // leaving for the new master, which will not have it): a failover now would
            // hand the lock to someone else. Undo exactly what this try took (one level
            // of a reentrant hold) and try again, as Redisson does, up to the retry
            // budget; a demoted master's try has already asked the sentinels again, so
            // the next one goes where they now point.
            tries += 1;
            self.undo_unsynced(r.owner);
            let core = self.core();
            if tries > core.config().retry_attempts || core.is_stopped() {
                return Err(Error::NoSyncedReplicas {
                    name: self.key().to_owned(),
                    replicas,
                    tries,
                });
            }
            std::thread::sleep(core.config().retry_delay_for(tries - 1));
            sent = Instant::now();
            adopted_until = None;
        };
        Ok(match answer {
            Answer::Busy(hint) => Attempt::RetryBy(self.kind().retry_by(hint, backoff)),
            Answer::Held { token } => {
                let lease = r.lease.map(|l| (l, r.lease_ms));
                // The verification harness's second seeded bug (test-only feature, inert
                // unless its environment variable is set): date the lease from the reply,
                // so a slow reply makes the guard trust past Redis's expiry.
                #[cfg(feature = "verify-broken-lease-from-reply")]
                let sent = if crate::verify_broken::active("lease-from-reply") {
                    Instant::now()
                } else {
                    sent
                };
                let until = adopted_until.unwrap_or_else(|| self.lease_end(r.lease, sent));
                Attempt::Done(Grant {
                    lease,
                    until,
                    token,
                })
            }
        })
    }

    /// After an acquire sent at `sent` that failed with `err` and may have run (see
    /// [`may_adopt_after`](Self::may_adopt_after)): the grant's token and lease end if it
    /// ran (`Some`), else `None`. A thread-owned kind asks
    /// [`after_dropped_acquire`](Self::after_dropped_acquire). A token kind needs none of
    /// its care: the token was drawn for this call alone and an attempt that fails ends
    /// the call (or, on a closed connection, retries with the same token only after the
    /// check found the key without it), so a key holding the token is this request's
    /// grant, dated from its own send, and the check (`GET`) is safe to send twice. A
    /// token's failed check is logged here: the acquire's outcome stays unknown, and if it
    /// took effect the key expires with its TTL.
    fn check_adoption(
        &self,
        r: &Request<'_>,
        sent: Instant,
        err: &Error,
    ) -> Result<Option<(Option<u64>, Instant)>> {
        if K::OWNERSHIP == Ownership::Token {
            let check = raw::Adopt {
                owner: r.owner,
                counted: 0,
                renew_ms: 0,
            };
            return match self
                .core()
                .run(self.key(), |c| self.kind().adopt(c, &check))
            {
                Ok(found) => Ok(found.map(|f| (f.token, self.lease_end(r.lease, sent)))),
                Err(check) => {
                    log::warn!(
                        "redmutex: acquire of {} {:?} failed with its outcome unknown; if it \
                         took effect, the key expires with its TTL: {err}",
                        K::LOCK,
                        self.key()
                    );
                    Err(check)
                }
            };
        }
        self.after_dropped_acquire(r, sent)
    }

    /// After an acquire sent at `sent` whose connection closed before its reply came:
    /// whether this thread holds the lock more often than this client counts, with the
    /// grant's token and the hold's lease end (`Some`), or not (`None`: the acquire did
    /// not run). Only this thread adds holds under its owner field (see `levels.rs`), so
    /// one more hold than counted is an acquire of its own that ran unanswered; a closed
    /// connection cannot deliver the request later, so the answer stays true. After a
    /// timeout it could, which is why timeouts are not asked about here (a hold taken that
    /// late is released with the thread's next release of the lock, see
    /// [`release`](Self::release)).
    ///
    /// The count cannot tell which acquire ran: this one, or an older one whose caller saw
    /// a timeout and gave up, whose hold has lived unrenewed since. So the hold is never
    /// dated from `sent`: the check reads the key's TTL with the count, in one script, and
    /// the lease ends no later than the check's own send plus that TTL, which is never
    /// after Redis expires the key (Redis read the TTL after the check was sent). A hold
    /// under the watchdog is renewed by the same script first, as its acquire would have
    /// renewed it. An explicit lease is left as Redis has it, and the guard trusts it no
    /// longer than `lease` after `sent` either: nothing may extend what its acquire
    /// granted.
    ///
    /// Sent twice, the check does no more than sent once (its renewal only raises the
    /// TTL to the watchdog timeout), so the transport may send it again on another
    /// connection.
    fn after_dropped_acquire(
        &self,
        r: &Request<'_>,
        sent: Instant,
    ) -> Result<Option<(Option<u64>, Instant)>> {
        let core = self.core();
        let name = self.key();
        let check = raw::Adopt {
            owner: r.owner,
            counted: core.levels().count(name, r.owner),
            renew_ms: if r.lease.is_none() { r.lease_ms } else { 0 },
        };
        let checked = Instant::now();
        let Some(found) = core.run(name, |c| self.kind().adopt(c, &check))? else {
            return Ok(None);
        };
        // `None`: no key of the hold has a TTL, so only the lease asked for bounds it.
        let lives = found.ttl_ms.map(|ms| checked + Duration::from_millis(ms));
        let asked = match r.lease {
            Some(lease) => sent + lease,
            None => checked + Duration::from_millis(r.lease_ms),
        };
        let until = lives.map_or(asked, |lives| lives.min(asked));
        log::debug!(
            "redmutex: an acquire of {} {name:?} ran although its reply was lost; its hold \
             is trusted for {:?} more",
            K::LOCK,
            until.saturating_duration_since(Instant::now())
        );
        Ok(Some((found.token, until)))
    }

    /// When a hold granted by a request sent at `sent` ends at the latest: `lease` after
    /// it, or the watchdog timeout after it for a hold under the watchdog.
    fn lease_end(&self, lease: Option<Duration>, sent: Instant) -> Instant {
        sent + lease.unwrap_or_else(|| self.core().watchdog_timeout())
    }

    /// The guard of a grant to `owner` whose acquire was sent at `sent`, for `lease`
    /// (the lease and its milliseconds; `None`: under the watchdog, which starts renewing
    /// it here). Also where a RedLock, which sends its members' acquires itself, turns a
    /// member's grant into a guard.
    pub(in crate::lock) fn granted(
        &self,
        owner: &str,
        lease: Option<(Duration, u64)>,
        sent: Instant,
        token: Option<u64>,
    ) -> LockGuard<K> {
        let until = self.lease_end(lease.map(|(l, _)| l), sent);
        self.granted_until(owner.to_owned(), lease, until, token)
    }

    /// [`granted`](Self::granted) for a hold whose lease ends at `until` at the latest.
    fn granted_until(
        &self,
        owner: String,
        lease: Option<(Duration, u64)>,
        until: Instant,
        token: Option<u64>,
    ) -> LockGuard<K> {
        if let Some((_, ms)) = lease {
            self.shared.lease_ms.store(ms, Ordering::Relaxed);
        }
        let core = self.core();
        if K::OWNERSHIP == Ownership::Thread {
            core.levels().add(self.key(), &owner);
        }
        let state = HoldState::until(
            core.watchdog(),
            (K::RENEWAL, self.key(), &owner),
            lease.is_none(),
            until,
        );
        LockGuard::new(self.clone(), owner, state, token)
    }

    /// Leaves the queue after giving up. Safe to repeat (once out, it changes nothing),
    /// so it is retried on connection failures; it also runs while the client shuts down
    /// (a waiter woken by the shutdown still owns its place).
    fn leave_queue(&self, owner: &str, wait: Option<Duration>) {
        let core = self.core();
        let leave = Leave {
            owner,
            wait,
            publish: core.publish_command(),
        };
        let left = core
            .retrying(|| core.run_even_if_stopped(self.key(), |c| self.kind().leave(c, &leave)));
        if let Err(e) = left {
            log::warn!(
                "redmutex: could not leave the queue of {} {:?}; the place is purged when its \
                 slot ends: {e}",
                K::LOCK,
                self.key()
            );
        }
    }
}

/// The acquisitions of the thread-owned kinds for an owner field of their own.
impl<K: HeldLock> Lock<K> {
    /// After an acquire of the current thread whose reply timed out: releases the hold
    /// it took, if it ran, which is when Redis shows the thread more holds than this
    /// client counts (see `levels.rs`). Releasing "one hold" without that check would,
    /// when the acquire never ran, release a hold that one of the thread's guards still
    /// trusts. The released hold was never counted, so nothing counted changes. An
    /// acquire that runs after the check leaves a hold that goes with the thread's last
    /// known release (see [`release`](Self::release)).
    pub(in crate::lock) fn take_back_uncounted(&self) -> Result<()> {
        if self.uncounted_holds()? > 0 {
            self.release_with_latch(&self.owner())?;
        }
        Ok(())
    }

    /// How many holds Redis shows the current thread beyond those this client counts.
    pub(in crate::lock) fn uncounted_holds(&self) -> Result<u32> {
        let owner = self.owner();
        let counted = self.core().levels().count(self.key(), &owner);
        Ok(self.hold_count()?.saturating_sub(counted))
    }

    /// [`acquire_as`](Self::acquire_as) without a deadline.
    pub(in crate::lock) fn acquire_forever_as(
        &self,
        owner: String,
        lease: Option<Duration>,
        cancel: Option<&Cancel>,
    ) -> Result<LockGuard<K>> {
        forever(self.acquire_as(owner, lease, Patience::Forever, cancel))
    }

    /// The acquisition loop for the owner field `owner` (the current thread's, or an
    /// explicit [`Owner`](crate::Owner)'s).
    pub(in crate::lock) fn acquire_as(
        &self,
        owner: String,
        lease: Option<Duration>,
        patience: Patience,
        cancel: Option<&Cancel>,
    ) -> Result<Option<LockGuard<K>>> {
        let owned = Owned {
            field: owner,
            claim: None,
        };
        self.acquire_owned(owned, lease, patience, cancel)
    }
}

/// An acquisition without a deadline: only a success or an error ends its wait (shutdown
/// and a cancel come as errors), so `None` cannot come back; it maps to `Shutdown` rather
/// than a panic.
fn forever<T>(acquired: Result<Option<T>>) -> Result<T> {
    acquired?.ok_or(Error::Shutdown)
}

/// Whether `e` says the connection closed under a request (not a timeout): the request
/// ran or did not, and nothing can run it later.
fn is_dropped(e: &Error) -> bool {
    matches!(e, Error::Redis(r) if r.is_connection_dropped() && !r.is_timeout())
}
