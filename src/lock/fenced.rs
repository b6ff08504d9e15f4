//! Redisson's `RFencedLock`: an `RLock` whose every grant draws a fencing token.

use redis::{Connection, RedisResult};

use super::raw::{Acquire, Adopt, Answer, HeldLock, Names, RawLock};
use super::safe::{Lock, LockGuard};
use crate::error::Result;
use crate::protocol::hash::{self, ReleaseArgs, Uncounted};
use crate::protocol::names;
use crate::protocol::replies::{Forced, Released, UNLOCK_MESSAGE};
use crate::protocol::script::invoke;
use crate::watchdog::Renewal;

/// The kind of Redisson's `RFencedLock` (3.19+): a reentrant lock that hands out a
/// fencing token with every grant.
///
/// The lock is the hash of [`Reentrant`](super::Reentrant), with the same owner field,
/// lease, watchdog, channel and unlock message, so fenced and plain waiters wake each
/// other. Beside it, the string counter `redisson_lock_token:{name}` (same slot, no TTL)
/// goes up by one inside the acquire script on every grant, re-entry included; the new
/// value is the grant's token, carried by its guard ([`LockGuard::token`]). Tokens of
/// one name therefore increase strictly across every process, Java or Rust, that takes
/// the lock as a fenced lock.
///
/// A token is only worth something where it is checked. Inside Redis,
/// [`LockGuard::fenced`] runs writes only while the guard's token is the newest. For a
/// resource outside Redis, send [`token`](LockGuard::token) along with every write and
/// have the resource keep the highest token it has accepted, refusing any request that
/// carries a lower one (an equal one is the same grant writing again):
///
/// ```no_run
/// # fn send_to_storage(_: u64, _: &str) -> bool { true }
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let guard = client.get_fenced_lock("report").lock_and_get_token()?;
/// // The storage service does, atomically on its side:
/// //     if token < highest_seen { reject } else { highest_seen = token; write }
/// let accepted = send_to_storage(guard.token(), "monthly report");
/// # Ok::<(), redmutex::Error>(())
/// ```
///
/// A holder frozen past its lease (a GC pause, SIGSTOP) then finds its late write refused,
/// because whoever took the lock meanwhile wrote with a higher token.
///
/// What differs from `RLock`:
/// - A plain [`RLock`](crate::RLock) on the same name takes and re-enters the hash
///   without touching the counter, exactly as Redisson's `RLock` does there: such a
///   holder has no token, and a resource that checks tokens cannot see it. Take a name
///   that is fenced anywhere only as a fenced lock.
/// - [`Lock::delete`] removes the lock and the counter (tokens start again at 1), without
///   a message, as Redisson's `delete()`; [`Lock::force_unlock`] removes only the lock.
/// - The expiry family ([`RExpirable`](crate::RExpirable)) covers the counter too, as
///   Redisson's does; a counter that expires restarts the tokens at 1.
/// - Redisson's `tryLockAndGetToken()` waits without limit and its
///   `lockAndGetToken(lease)` ignores the lease; here every form does what its name and
///   arguments say.
#[derive(Debug)]
pub struct Fenced {
    names: Names,
    token: String,
}

impl Fenced {
    pub(crate) fn new(name: String) -> Self {
        Self {
            token: names::fenced_token(&name),
            names: Names::lock(name),
        }
    }
}

/// A reentrant lock with fencing tokens, wire-compatible with Redisson's `RFencedLock`;
/// see [`Fenced`] for its rules and [`Lock`] for its methods.
pub type RFencedLock = Lock<Fenced>;

/// One hold of an [`RFencedLock`] with its token, released when dropped; see
/// [`LockGuard`].
pub type RFencedLockGuard = LockGuard<Fenced>;

impl Lock<Fenced> {
    /// Waits as long as it takes, then holds the lock under the watchdog; the guard
    /// carries the grant's token (Redisson `lockAndGetToken()`). The same as
    /// [`lock`](Self::lock), named after Redisson's call.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn lock_and_get_token(&self) -> Result<RFencedLockGuard> {
        self.lock()
    }

    /// Waits at most `wait`, then holds the lock for `lease`, never renewed; the guard
    /// carries the grant's token (Redisson `tryLockAndGetToken(wait, lease, unit)`).
    /// `Ok(None)` means the wait ran out.
    ///
    /// # Errors
    ///
    /// As [`try_lock_with_lease`](Self::try_lock_with_lease).
    pub fn try_lock_and_get_token(
        &self,
        wait: std::time::Duration,
        lease: std::time::Duration,
    ) -> Result<Option<RFencedLockGuard>> {
        self.try_lock_with_lease(wait, lease)
    }

    /// The newest token drawn on this lock by anyone (Redisson `getToken()`): 0 before
    /// the first grant.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`](crate::Error::WrongType)
    /// when the counter is not a number.
    pub fn get_token(&self) -> Result<u64> {
        let token = self.core().get_count(&self.kind().token)?;
        Ok(token.max(0).unsigned_abs())
    }

    /// Deletes the lock and its token counter (Redisson `delete()`); nobody is told, so
    /// waiters retry at their TTL bound, and tokens start again at 1. Returns whether
    /// either existed. Holds of this client on the lock are reported lost.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn delete(&self) -> Result<bool> {
        self.delete_keys()
    }
}

impl LockGuard<Fenced> {
    /// The fencing token of this grant: higher than every token drawn on the lock before
    /// it.
    pub fn token(&self) -> u64 {
        // Every fenced grant carries its token (see `Fenced::acquire`).
        self.fencing_token().unwrap_or_default()
    }
}

impl HeldLock for Fenced {}

impl RawLock for Fenced {
    const LOCK: &'static str = "RFencedLock";
    const RENEWAL: Renewal = Renewal::Lock;

    fn names(&self) -> &Names {
        &self.names
    }

    fn keys(&self) -> Vec<&str> {
        vec![&self.names.name, &self.token]
    }

    fn token_key(&self) -> &str {
        &self.token
    }

    fn adopt(&self, c: &mut Connection, a: &Adopt<'_>) -> RedisResult<Option<Uncounted>> {
        // While this thread holds the lock nobody else is granted it, so the counter
        // still has the value its own last grant drew.
        let token = Some(self.token.as_str());
        hash::adopt(c, &self.names.name, token, a.owner, a.counted, a.renew_ms)
    }

    fn acquire(&self, c: &mut Connection, a: &Acquire<'_>) -> RedisResult<Answer> {
        let fencing = fenced_acquire(c, [&self.names.name, &self.token], a.owner, a.lease_ms)?;
        Ok(match fencing {
            Fencing::Granted(token) => Answer::Held { token: Some(token) },
            Fencing::Busy(hint) => Answer::Busy(hint),
        })
    }

    fn release(&self, c: &mut Connection, r: &ReleaseArgs<'_>) -> RedisResult<Released> {
        self.names.release_hold(c, r, UNLOCK_MESSAGE)
    }

    fn force_release(&self, c: &mut Connection, _now: u64, publish: &str) -> RedisResult<Forced> {
        self.names.force_delete(c, publish)
    }
}

// ---- Redis scripts ------------------------------------------------------------

crate::protocol::script::scripts! {
    FENCED_ACQUIRE => "fenced/fenced_acquire.lua",
}

/// What a fenced acquisition found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fencing {
    /// The caller holds the lock now, under this new token.
    Granted(u64),
    /// Held by another; the lock's PTTL in ms (-1: no TTL).
    Busy(i64),
}

/// Runs the fenced acquire: on every grant, re-entry included, the token counter goes
/// up by one and its new value is the grant's token.
pub(crate) fn fenced_acquire(
    conn: &mut Connection,
    [key, counter]: [&str; 2],
    owner: &str,
    lease_ms: u64,
) -> RedisResult<Fencing> {
    let (granted, value): (i64, i64) = invoke(
        FENCED_ACQUIRE
            .key(key)
            .key(counter)
            .arg(lease_ms)
            .arg(owner),
        conn,
    )?;
    Ok(if granted == 1 {
        Fencing::Granted(value.max(0).unsigned_abs())
    } else {
        Fencing::Busy(value)
    })
}
