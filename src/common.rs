//! What the fair lock, the read-write lock, the semaphores and the latch share: wait
//! deadlines, argument checks, the wall clock Redisson's scripts expect, Redisson's
//! TTL-bounded waiting loop, releases under the unlock latch, and the hold state behind
//! every guard.
//!
//! `RLock` (lock.rs) is built from the same pieces.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::Receiver;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::names;
use crate::pubsub::{Subscription, Woken};
use crate::scripts::Released;
use crate::watchdog::{self, Hold, Loss, Renewal};

/// How long an acquisition may wait.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Wait {
    /// One attempt.
    No,
    /// Until this instant.
    Until(Instant),
    /// As long as it takes.
    Forever,
}

impl Wait {
    /// At most `wait` from now; a wait too long to represent is no limit.
    pub(crate) fn from_duration(wait: Duration) -> Self {
        match Instant::now().checked_add(wait) {
            Some(deadline) => Self::Until(deadline),
            None => Self::Forever,
        }
    }

    /// When to give up; `None` for never.
    pub(crate) fn deadline(self) -> Option<Instant> {
        match self {
            Self::No => Some(Instant::now()),
            Self::Until(d) => Some(d),
            Self::Forever => None,
        }
    }
}

/// The longest lease or wait accepted in milliseconds; Redis refuses expiry times that
/// overflow, and fair-lock scores must stay exact in a double.
pub(crate) const MAX_MS: u64 = 1 << 45;

/// A lease in milliseconds, or `Config` for a zero or absurd one.
pub(crate) fn lease_ms(lease: Duration) -> Result<u64> {
    let ms = lease.as_millis();
    if ms == 0 {
        return Err(Error::Config("a lease must be at least 1 ms".into()));
    }
    if ms > u128::from(MAX_MS) {
        return Err(Error::Config(format!(
            "a lease must not exceed {MAX_MS} ms"
        )));
    }
    Ok(ms as u64)
}

/// A duration in milliseconds, capped at [`MAX_MS`].
pub(crate) fn capped_ms(d: Duration) -> u64 {
    d.as_millis().min(u128::from(MAX_MS)) as u64
}

/// The wall clock in epoch milliseconds, which Redisson's fair-lock and permit scripts
/// compare against the scores they store (`System.currentTimeMillis()` on the Java side).
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis().min(u128::from(u64::MAX)) as u64)
}

/// When a retry is due at the latest, `ms` from now; a negative value means never (only
/// a message can help).
pub(crate) fn retry_after(ms: i64) -> Option<Instant> {
    let ms = u64::try_from(ms).ok()?;
    Instant::now().checked_add(Duration::from_millis(ms))
}

/// The earlier of two optional instants; `None` is "never".
pub(crate) fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// What one attempt inside [`wait_turns`] found.
pub(crate) enum Attempt<T> {
    /// Got it.
    Done(T),
    /// Not yet; retry by this instant at the latest even without a message (`None`:
    /// only a message can help).
    RetryBy(Option<Instant>),
}

/// Redisson's waiting loop, after a first failed attempt and with `subscription` already
/// registered: sleep until a signal, `retry_by` or the deadline, then try again, until an
/// attempt succeeds (`Some`) or the deadline passes (`None`).
///
/// The first signal comes when the listener has confirmed the channel's subscription, so
/// the first retry runs after it: any release that Redis runs after that retry publishes
/// a message that reaches us (see pubsub.rs), and a message that arrives between a retry
/// and the next sleep stays buffered. No wake-up is lost.
///
/// A sleep that ends at the deadline gives up without another attempt, as Redisson's
/// `tryLock` does; a fair waiter whose time is up leaves the queue and passes the turn
/// on rather than taking the lock late.
pub(crate) fn wait_turns<T>(
    subscription: &Subscription,
    deadline: Option<Instant>,
    mut retry_by: Option<Instant>,
    mut attempt: impl FnMut() -> Result<Attempt<T>>,
) -> Result<Option<T>> {
    let expired = || deadline.is_some_and(|d| Instant::now() >= d);
    loop {
        if expired() {
            return Ok(None);
        }
        match subscription.wait(earliest(retry_by, deadline)) {
            Woken::Closed => return Err(Error::Shutdown),
            Woken::Timeout if expired() => return Ok(None),
            Woken::Signal | Woken::Timeout => {}
        }
        match attempt()? {
            Attempt::Done(t) => return Ok(Some(t)),
            Attempt::RetryBy(by) => retry_by = by,
        }
    }
}

/// What a guard knows of its hold: the state it shares with the watchdog, and whether
/// the watchdog renews it.
#[derive(Debug)]
pub(crate) struct HoldState {
    hold: Arc<Hold>,
    renewed: bool,
}

impl HoldState {
    /// The state of a hold just acquired by a command sent at `sent`: under the watchdog
    /// when `lease` is `None`, else a fixed lease that nobody renews.
    pub(crate) fn acquired(
        client: &Client,
        kind: Renewal,
        name: &str,
        owner: &str,
        lease: Option<Duration>,
        sent: Instant,
    ) -> Self {
        match lease {
            Some(lease) => Self {
                hold: Arc::new(Hold::new(sent + lease)),
                renewed: false,
            },
            None => {
                let end = sent + client.config().lock_watchdog_timeout;
                Self {
                    hold: client.inner.watchdog.register(kind, name, owner, end),
                    renewed: true,
                }
            }
        }
    }

    pub(crate) fn hold(&self) -> &Hold {
        &self.hold
    }

    pub(crate) fn renewed(&self) -> bool {
        self.renewed
    }

    /// Why the hold is no longer trusted, if it is not: the watchdog's verdict, or the
    /// lease end known locally (from the acquire, or from the last renewal Redis
    /// confirmed). The local check is what tells a process that was frozen (a GC pause,
    /// SIGSTOP) longer than its lease, the moment it runs again.
    pub(crate) fn loss(&self, client: &Client) -> Option<Loss> {
        if let Some(loss) = self.hold.loss() {
            return Some(loss);
        }
        // The lease end is known locally, from the acquire or from the last renewal Redis
        // confirmed; past it the key may be gone whatever the watchdog has noticed.
        let now = Instant::now();
        if !self.renewed {
            return (now >= self.hold.lease_end()).then_some(Loss::Lost);
        }
        // The watchdog's rule (watchdog::warn_overdue): presumed lost when no renewal
        // has been confirmed `warning_margin` before the end.
        let margin = watchdog::warning_margin(client.config().lock_watchdog_timeout);
        let warn_at = self.hold.lease_end().checked_sub(margin);
        warn_at
            .is_none_or(|at| now >= at)
            .then_some(Loss::PossiblyLost)
    }

    pub(crate) fn loss_signal(&self) -> Receiver<Loss> {
        self.hold.subscribe()
    }
}

/// Runs one release script under Redisson's unlock latch: every try carries the same
/// latch key, so a retry after a lost reply replays the first outcome instead of
/// releasing a second hold. `call` gets the latch key and its lifetime. Connection
/// failures are retried as `RLock` retries them; the spent latch is deleted later by the
/// watchdog thread.
pub(crate) fn release_with_latch<T>(
    client: &Client,
    name: &str,
    mut call: impl FnMut(&mut redis::Connection, &str, u64) -> redis::RedisResult<T>,
) -> Result<T> {
    let inner = &client.inner;
    let request_id = uuid::Uuid::new_v4().simple().to_string();
    let latch = names::unlock_latch(name, &request_id);
    let latch_ms = inner.config.unlock_latch_ms();
    let mut attempt = 0;
    loop {
        match inner.run(name, |c| call(c, &latch, latch_ms)) {
            Ok(outcome) => {
                inner.watchdog.discard_latch(latch);
                return Ok(outcome);
            }
            Err(e) if e.is_transient() && attempt < inner.config.retry_attempts => {
                log::debug!("redmutex: retrying release of {name:?}: {e}");
                std::thread::sleep(inner.config.retry_delay_for(attempt));
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Brings the renewal registry in step with a release's outcome and turns it into the
/// caller's answer. `hold` is the guard's (or the registry's) state when the caller held
/// the lock through this client.
pub(crate) fn settle_release(
    client: &Client,
    kind: Renewal,
    name: &str,
    owner: &str,
    hold: Option<&Hold>,
    outcome: Released,
) -> Result<()> {
    let watchdog = &client.inner.watchdog;
    match outcome {
        Released::NotHeld => {
            watchdog.unregister(kind, name, owner, true);
            let name = name.to_owned();
            Err(match hold {
                // We held it once, so finding no hold now means it was lost.
                Some(hold) => {
                    hold.mark(Loss::Lost);
                    Error::LockLost { name }
                }
                None => Error::NotHeld { name },
            })
        }
        Released::Partly | Released::Fully => {
            watchdog.unregister(kind, name, owner, false);
            Ok(())
        }
    }
}

/// After a release that failed, reads whether `field` still holds `name` and keeps the
/// renewal registry in step (as `RLock` does): the hold is given up either way, and if it
/// is still in Redis it expires after its lease.
pub(crate) fn after_failed_release(
    client: &Client,
    kind: Renewal,
    name: &str,
    field: &str,
    err: &Error,
) {
    let left: Result<bool> = client.inner.run(name, |c| {
        redis::cmd("HEXISTS").arg(name).arg(field).query(c)
    });
    match &left {
        Ok(false) => log::warn!(
            "redmutex: release of {name:?} took effect but failed afterwards (waiters elsewhere \
             fall back to the TTL): {err}"
        ),
        Ok(true) => log::warn!(
            "redmutex: release of {name:?} failed; the hold remains and expires with its \
             lease: {err}"
        ),
        Err(read) => log::warn!(
            "redmutex: release of {name:?} failed and its outcome is unknown ({read}): {err}"
        ),
    }
    client
        .inner
        .watchdog
        .unregister(kind, name, field, matches!(left, Ok(false)));
}

/// Reads a string key as an integer; a missing key is 0.
pub(crate) fn get_count(client: &Client, name: &str) -> Result<i64> {
    let value: Option<i64> = client
        .inner
        .run(name, |c| redis::cmd("GET").arg(name).query(c))?;
    Ok(value.unwrap_or(0))
}

/// `PTTL` as Redisson's `remainTimeToLive`: `None` when the key is absent,
/// `Some(Duration::MAX)` when it has no TTL.
pub(crate) fn remain_time_to_live(client: &Client, key: &str) -> Result<Option<Duration>> {
    let ttl: i64 = client
        .inner
        .run(key, |c| redis::cmd("PTTL").arg(key).query(c))?;
    Ok(match ttl {
        -2 => None,
        -1 => Some(Duration::MAX),
        ms => Some(Duration::from_millis(ms.max(0).unsigned_abs())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_checked() {
        assert!(lease_ms(Duration::ZERO).is_err());
        assert!(lease_ms(Duration::from_micros(999)).is_err());
        assert_eq!(lease_ms(Duration::from_secs(2)).unwrap(), 2000);
        assert!(lease_ms(Duration::MAX).is_err());
        assert_eq!(capped_ms(Duration::MAX), MAX_MS);
    }

    #[test]
    fn retry_bounds() {
        assert!(retry_after(-1).is_none());
        assert!(retry_after(5).is_some());
        let now = Instant::now();
        assert_eq!(earliest(None, Some(now)), Some(now));
        assert_eq!(earliest(Some(now), None), Some(now));
        assert_eq!(
            earliest(Some(now), Some(now + Duration::from_secs(1))),
            Some(now)
        );
        assert!(now_ms() > 1_600_000_000_000);
    }
}
