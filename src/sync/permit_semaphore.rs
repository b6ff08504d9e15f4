//! Redisson's `RPermitExpirableSemaphore`: a semaphore whose permits have ids and may
//! expire, and the `PermitId` type.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use redis::{Connection, RedisResult};

use crate::clock::{self, Wait};
use crate::core::Core;
use crate::error::{Error, Result};
use crate::protocol::names;
use crate::protocol::script::invoke;
use crate::pubsub::{Interest, WakeRule};
use crate::sync::object::{Object, java_int};
use crate::sync::semaphore;
use crate::wait::{self, Attempt};

/// The id of one permit of an [`RPermitExpirableSemaphore`].
///
/// On the wire it is 16 raw bytes (the member of the semaphore's sorted set); people and
/// Redisson's API see it as 32 lowercase hex characters, which is what `Display` prints
/// and [`FromStr`] parses (upper case accepted). An id printed by a Redisson client parses
/// here and releases the same permit.
///
/// ```
/// let id: redmutex::PermitId = "00112233445566778899aabbccddeeff".parse()?;
/// assert_eq!(id.to_string(), "00112233445566778899aabbccddeeff");
/// assert_eq!(id.as_bytes()[15], 0xff);
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PermitId([u8; 16]);

impl PermitId {
    /// The id made of these 16 bytes.
    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(bytes)
    }

    /// The 16 bytes stored in Redis.
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// A fresh random id, as Redisson's `generateId()` (16 random bytes).
    fn random() -> Self {
        Self(*uuid::Uuid::new_v4().as_bytes())
    }

    /// `n` fresh random ids.
    fn fresh(n: u32) -> Vec<Self> {
        (0..n).map(|_| Self::random()).collect()
    }
}

impl fmt::Display for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PermitId({self})")
    }
}

impl FromStr for PermitId {
    type Err = Error;

    /// Parses 32 hex characters.
    fn from_str(s: &str) -> Result<Self> {
        let bad = || Error::Config(format!("a permit id is 32 hex characters, not {s:?}"));
        // Hex digits only: `from_str_radix` alone would also take a sign.
        if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        let mut bytes = [0u8; 16];
        for (byte, pair) in bytes.iter_mut().zip(s.as_bytes().chunks(2)) {
            let text = std::str::from_utf8(pair).map_err(|_| bad())?;
            *byte = u8::from_str_radix(text, 16).map_err(|_| bad())?;
        }
        Ok(Self(bytes))
    }
}

/// A distributed semaphore whose permits carry ids and optional leases, wire-compatible
/// with Redisson's `RPermitExpirableSemaphore`.
///
/// The string `name` holds the number of available permits; the sorted set
/// `{name}:timeout` holds every acquired permit's 16-byte id, scored by the epoch
/// millisecond its lease ends (or a far-future score for "no lease"). A permit whose lease
/// ended is reclaimed (returned to the available count, which is published) by the next
/// script that looks: acquisitions, counts, releases. Releases publish on
/// `redisson_sc:{name}`, shared with [`RSemaphore`](crate::RSemaphore).
///
/// Acquisitions return [`PermitId`]s rather than guards: the id is the permit, it may be
/// released by any thread or process, and a leased permit comes back on its own. Release
/// one with [`release`](Self::release).
///
/// A waiter sleeps until a release message, until the earliest leased permit would
/// expire (a retry then reclaims it), or until its deadline.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
///
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let tokens = client.get_permit_expirable_semaphore("api-tokens");
/// tokens.try_set_permits(10)?;
/// // Comes back by itself after a minute if this process dies.
/// let id = tokens.acquire_with_lease(Duration::from_secs(60))?;
/// println!("holding permit {id}");
/// tokens.release(id)?;
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Clone)]
pub struct RPermitExpirableSemaphore {
    inner: Arc<PermitInner>,
}

struct PermitInner {
    object: Object,
    /// `{name}:timeout`, the sorted set of acquired permits.
    timeouts: String,
}

impl fmt::Debug for RPermitExpirableSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.object.debug("RPermitExpirableSemaphore", f)
    }
}

impl RPermitExpirableSemaphore {
    pub(crate) fn new(core: Arc<Core>, name: String) -> Self {
        let timeouts = names::permit_timeouts(&name);
        let channel = names::semaphore_channel(&name);
        Self {
            inner: Arc::new(PermitInner {
                object: Object::new(core, name, channel),
                timeouts,
            }),
        }
    }

    fn core(&self) -> &Core {
        self.inner.object.core()
    }

    /// Runs `f` on the semaphore's node with its keys and publish command.
    fn run<T>(
        &self,
        mut f: impl FnMut(&mut redis::Connection, PermitKeys<'_>, &str) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let timeouts = &self.inner.timeouts;
        self.inner.object.run(|c, name, channel, publish| {
            let keys = PermitKeys {
                name,
                timeouts,
                channel,
            };
            f(c, keys, publish)
        })
    }

    /// The semaphore's name, which is also the key of its available count.
    pub fn name(&self) -> &str {
        self.inner.object.name()
    }

    /// Waits as long as it takes for one permit without lease (Redisson `acquire()`).
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`] when a key has another type.
    pub fn acquire(&self) -> Result<PermitId> {
        let id = PermitId::random();
        self.take_forever(vec![id], None).map(|_| id)
    }

    /// Waits as long as it takes for one permit that expires after `lease` (Redisson
    /// `acquire(leaseTime, unit)`).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire); [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a zero or absurd lease.
    pub fn acquire_with_lease(&self, lease: Duration) -> Result<PermitId> {
        let id = PermitId::random();
        self.take_forever(vec![id], Some(lease)).map(|_| id)
    }

    /// Waits as long as it takes for `permits` permits without lease, taken at once
    /// (Redisson `acquire(permits)`). Zero permits give an empty list without asking
    /// Redis.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub fn acquire_many(&self, permits: u32) -> Result<Vec<PermitId>> {
        self.take_forever(PermitId::fresh(permits), None)
    }

    /// Waits as long as it takes for `permits` permits that expire after `lease`
    /// (Redisson `acquire(permits, leaseTime, unit)`).
    ///
    /// # Errors
    ///
    /// As [`acquire_with_lease`](Self::acquire_with_lease).
    pub fn acquire_many_with_lease(&self, permits: u32, lease: Duration) -> Result<Vec<PermitId>> {
        self.take_forever(PermitId::fresh(permits), Some(lease))
    }

    /// One attempt at one permit without lease (Redisson `tryAcquire()`).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub fn try_acquire(&self) -> Result<Option<PermitId>> {
        let id = PermitId::random();
        Ok(self.take(vec![id], None, Wait::No)?.map(|_| id))
    }

    /// Waits at most `wait` for one permit without lease (Redisson
    /// `tryAcquire(waitTime, unit)`).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub fn try_acquire_for(&self, wait: Duration) -> Result<Option<PermitId>> {
        let id = PermitId::random();
        Ok(self
            .take(vec![id], None, Wait::from_duration(wait))?
            .map(|_| id))
    }

    /// Waits at most `wait` for one permit that expires after `lease` (Redisson
    /// `tryAcquire(waitTime, leaseTime, unit)`).
    ///
    /// # Errors
    ///
    /// As [`acquire_with_lease`](Self::acquire_with_lease).
    pub fn try_acquire_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<PermitId>> {
        let id = PermitId::random();
        Ok(self
            .take(vec![id], Some(lease), Wait::from_duration(wait))?
            .map(|_| id))
    }

    /// Waits at most `wait` for `permits` permits without lease, taken at once.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub fn try_acquire_many_for(
        &self,
        permits: u32,
        wait: Duration,
    ) -> Result<Option<Vec<PermitId>>> {
        self.take(PermitId::fresh(permits), None, Wait::from_duration(wait))
    }

    /// Waits at most `wait` for `permits` permits that expire after `lease` (Redisson
    /// `tryAcquire(permits, waitTime, leaseTime, unit)`).
    ///
    /// # Errors
    ///
    /// As [`acquire_with_lease`](Self::acquire_with_lease).
    pub fn try_acquire_many_with_lease(
        &self,
        permits: u32,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<Vec<PermitId>>> {
        self.take(
            PermitId::fresh(permits),
            Some(lease),
            Wait::from_duration(wait),
        )
    }

    /// Releases the permit `id` (Redisson `release(id)`).
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`] when the permit is not acquired: never was, released already,
    /// or its lease ended (an expired permit that was not yet reclaimed is returned to the
    /// semaphore all the same, and still reported). Redisson throws
    /// `IllegalArgumentException` here. Redis, pool and shutdown errors otherwise.
    pub fn release(&self, id: PermitId) -> Result<()> {
        if self.try_release(id)? {
            Ok(())
        } else {
            Err(Error::NotHeld {
                name: self.inner.object.name().to_owned(),
            })
        }
    }

    /// Releases the permit `id` if it is acquired and live (Redisson `tryRelease(id)`);
    /// false otherwise (see [`release`](Self::release)).
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn try_release(&self, id: PermitId) -> Result<bool> {
        // Not retried: a lost reply may hide a release that happened.
        self.run(|c, keys, publish| {
            permit_release(c, keys, id.as_bytes(), clock::now_ms(), publish)
        })
    }

    /// Releases every permit of `ids`, or none when one of them is not acquired and live
    /// (Redisson `tryRelease(ids)`); returns how many were released.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn try_release_many(&self, ids: &[PermitId]) -> Result<u32> {
        if ids.is_empty() {
            return Ok(0);
        }
        let bytes: Vec<[u8; 16]> = ids.iter().map(|id| id.0).collect();
        let released = self.run(|c, keys, publish| {
            permit_release_many(c, keys, &bytes, clock::now_ms(), publish)
        })?;
        Ok(u32::try_from(released).unwrap_or(u32::MAX))
    }

    /// Releases every permit of `ids` (Redisson `release(ids)`).
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`] when one of them is not acquired and live (then none was
    /// released); Redis, pool and shutdown errors.
    pub fn release_many(&self, ids: &[PermitId]) -> Result<()> {
        if self.try_release_many(ids)? as usize == ids.len() {
            Ok(())
        } else {
            Err(Error::NotHeld {
                name: self.inner.object.name().to_owned(),
            })
        }
    }

    /// The number of available permits, after reclaiming expired ones (Redisson
    /// `availablePermits()`).
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn available_permits(&self) -> Result<i64> {
        Ok(self.counts()?.0)
    }

    /// Available plus acquired permits, after reclaiming expired ones (Redisson
    /// `getPermits()`).
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn permits(&self) -> Result<i64> {
        let (available, acquired) = self.counts()?;
        Ok(available + acquired)
    }

    /// The number of acquired permits, after reclaiming expired ones (Redisson
    /// `acquiredPermits()`).
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn acquired_permits(&self) -> Result<i64> {
        Ok(self.counts()?.1)
    }

    /// Creates the semaphore with `permits` available permits unless it exists (Redisson
    /// `trySetPermits`); true when it was created.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for more than 2³¹−1 permits (a Java `int`, which is what
    /// Redisson clients read); Redis, pool and shutdown errors.
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        let permits = java_int(permits)?;
        self.run(|c, keys, publish| {
            semaphore::semaphore_try_set(c, keys.name, keys.channel, permits, None, publish)
        })
    }

    /// Makes the total of available and acquired permits `permits` (Redisson
    /// `setPermits`): acquired permits count against it, so the available count may drop,
    /// even below zero. Publishes `permits`.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for a total above 2³¹−1 (see
    /// [`try_set_permits`](Self::try_set_permits)); Redis, pool and shutdown errors.
    pub fn set_permits(&self, permits: u32) -> Result<()> {
        let permits = java_int(permits)?;
        self.run(|c, keys, publish| permit_set(c, keys, permits, publish).map(drop))
    }

    /// Adds `permits` available permits, or takes them away when negative (Redisson
    /// `addPermits`). Only an addition is published, and with the number added.
    ///
    /// # Errors
    ///
    /// [`Error::Config`], with nothing changed, when the available count or the total
    /// (available plus acquired, which releases can bring the available count to) would
    /// leave Java's `int` range, which Redisson clients cannot read; Redis, pool and
    /// shutdown errors.
    pub fn add_permits(&self, permits: i64) -> Result<()> {
        self.run(|c, keys, publish| permit_add(c, keys, permits, publish).map(drop))
    }

    /// Gives the acquired permit `id` a new lease of `lease` from now (Redisson
    /// `updateLeaseTime`); false when the permit is not acquired (an expired one is
    /// reclaimed first and cannot be revived).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a zero or absurd lease; Redis, pool and shutdown errors.
    pub fn update_lease_time(&self, id: PermitId, lease: Duration) -> Result<bool> {
        let lease_ms = clock::lease_ms(lease)?;
        self.run(|c, keys, publish| {
            let now = clock::now_ms();
            permit_update_lease(c, keys, id.as_bytes(), now + lease_ms, now, publish)
        })
    }

    /// The remaining lease of the permit `id` (Redisson `getLeaseTime`): `None` when it
    /// is not acquired (Redisson throws there), `Some(Duration::MAX)` for a permit without
    /// lease.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn lease_time(&self, id: PermitId) -> Result<Option<Duration>> {
        let ms = self.run(|c, keys, publish| {
            permit_lease_time(c, keys, id.as_bytes(), clock::now_ms(), publish)
        })?;
        Ok(match ms {
            -1 => Some(Duration::MAX),
            ms if ms < 0 => None,
            ms => Some(Duration::from_millis(ms.unsigned_abs())),
        })
    }

    /// Deletes the semaphore and its acquired permits; true when either existed.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn delete(&self) -> Result<bool> {
        let deleted: i64 =
            self.run(|c, keys, _| redis::cmd("DEL").arg(keys.name).arg(keys.timeouts).query(c))?;
        Ok(deleted > 0)
    }

    fn counts(&self) -> Result<(i64, i64)> {
        self.run(|c, keys, publish| permit_counts(c, keys, clock::now_ms(), publish))
    }

    /// Where a waiter sleeps: the semaphore's channel, where every release wakes every
    /// waiter of this client to retry, whatever it needs.
    fn interest(&self) -> Interest<'_> {
        Interest {
            channel: self.inner.object.channel(),
            rule: WakeRule::Semaphore,
        }
    }

    /// One attempt to take permits under `ids`: done, or when to retry at the latest
    /// (when the earliest leased permit expires: a retry then reclaims it). A failed
    /// attempt stored nothing, so the next one reuses the ids.
    fn attempt(&self, ids: &[PermitId], lease_ms: Option<u64>) -> Result<Attempt<()>> {
        let bytes: Vec<[u8; 16]> = ids.iter().map(|id| id.0).collect();
        let answer = self.run(|c, keys, publish| {
            let now = clock::now_ms();
            let expires_at = lease_ms.map_or(NO_LEASE_SCORE, |ms| now + ms);
            permit_acquire(c, keys, &bytes, expires_at, now, publish)
        })?;
        Ok(match answer {
            PermitAttempt::Acquired => Attempt::Done(()),
            PermitAttempt::RetryIn(ms) => {
                Attempt::RetryBy(clock::retry_after(i64::try_from(ms).unwrap_or(i64::MAX)))
            }
            PermitAttempt::WaitForRelease => Attempt::RetryBy(None),
        })
    }

    /// Redisson's loop (see [`wait::acquire_or_wait`]): try; if short, subscribe, then
    /// sleep until a release message, the earliest lease end or the deadline.
    fn take(
        &self,
        ids: Vec<PermitId>,
        lease: Option<Duration>,
        wait: Wait,
    ) -> Result<Option<Vec<PermitId>>> {
        let lease_ms = lease.map(clock::lease_ms).transpose()?;
        if ids.is_empty() {
            return Ok(Some(ids));
        }
        let taken = wait::acquire_or_wait(self.core(), self.interest(), wait, || {
            self.attempt(&ids, lease_ms)
        })?;
        Ok(taken.map(|()| ids))
    }

    /// [`take`](Self::take) without a deadline.
    fn take_forever(&self, ids: Vec<PermitId>, lease: Option<Duration>) -> Result<Vec<PermitId>> {
        let lease_ms = lease.map(clock::lease_ms).transpose()?;
        if ids.is_empty() {
            return Ok(ids);
        }
        wait::acquire_forever(self.core(), self.interest(), || {
            self.attempt(&ids, lease_ms)
        })?;
        Ok(ids)
    }
}

impl crate::sync::expiry::sealed::Keys for RPermitExpirableSemaphore {
    fn expiry_target(&self) -> crate::sync::expiry::sealed::Target<'_> {
        crate::sync::expiry::sealed::Target {
            core: self.core(),
            keys: vec![self.inner.object.name(), &self.inner.timeouts],
        }
    }
}

// ---- Redis scripts ------------------------------------------------------------

crate::protocol::script::scripts! {
    PERMIT_ACQUIRE => "permit/permit_acquire.lua" after ["permits.lua"],
    PERMIT_RELEASE => "permit/permit_release.lua",
    PERMIT_RELEASE_MANY => "permit/permit_release_many.lua" after ["permits.lua"],
    PERMIT_COUNTS => "permit/permit_counts.lua" after ["permits.lua"],
    PERMIT_SET => "permit/permit_set.lua",
    PERMIT_ADD => "permit/permit_add.lua",
    PERMIT_UPDATE_LEASE => "permit/permit_update_lease.lua" after ["permits.lua"],
    PERMIT_LEASE_TIME => "permit/permit_lease_time.lua" after ["permits.lua"],
}

/// The lease-end score Redisson gives a permit without lease.
pub(crate) const NO_LEASE_SCORE: u64 = 922_337_203_685_477;

/// The three keys of a permit-expirable semaphore.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PermitKeys<'a> {
    pub(crate) name: &'a str,
    pub(crate) timeouts: &'a str,
    pub(crate) channel: &'a str,
}

/// What one permit acquisition attempt found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PermitAttempt {
    /// The permits were taken under the given ids.
    Acquired,
    /// Not enough permits; the earliest acquired permit's lease ends in this many ms.
    RetryIn(u64),
    /// Not enough permits, and none acquired has a lease.
    WaitForRelease,
}

/// Takes `ids.len()` permits under `ids`, each with lease end `expires_at_ms` (epoch ms,
/// [`NO_LEASE_SCORE`] for none).
pub(crate) fn permit_acquire(
    conn: &mut Connection,
    k: PermitKeys<'_>,
    ids: &[[u8; 16]],
    expires_at_ms: u64,
    now_ms: u64,
    publish: &str,
) -> RedisResult<PermitAttempt> {
    let mut call = PERMIT_ACQUIRE.prepare_invoke();
    call.key(k.name).key(k.timeouts).key(k.channel);
    call.arg(ids.len())
        .arg(expires_at_ms)
        .arg(now_ms)
        .arg(NO_LEASE_SCORE)
        .arg(publish);
    for id in ids {
        call.arg(&id[..]);
    }
    let answer: i64 = invoke(&call, conn)?;
    Ok(match answer {
        0 => PermitAttempt::Acquired,
        ms if ms > 0 => PermitAttempt::RetryIn(ms.unsigned_abs()),
        _ => PermitAttempt::WaitForRelease,
    })
}

/// Releases one permit by id; true when it was acquired and its lease had not ended.
pub(crate) fn permit_release(
    conn: &mut Connection,
    k: PermitKeys<'_>,
    id: &[u8; 16],
    now_ms: u64,
    publish: &str,
) -> RedisResult<bool> {
    invoke(
        PERMIT_RELEASE
            .key(k.name)
            .key(k.channel)
            .key(k.timeouts)
            .arg(&id[..])
            .arg(1)
            .arg(now_ms)
            .arg(publish),
        conn,
    )
}

/// Releases every permit of `ids`, or none when one of them is not live; returns how
/// many were released.
pub(crate) fn permit_release_many(
    conn: &mut Connection,
    k: PermitKeys<'_>,
    ids: &[[u8; 16]],
    now_ms: u64,
    publish: &str,
) -> RedisResult<u64> {
    let mut call = PERMIT_RELEASE_MANY.prepare_invoke();
    call.key(k.name).key(k.channel).key(k.timeouts);
    call.arg(ids.len()).arg(now_ms).arg(publish);
    for id in ids {
        call.arg(&id[..]);
    }
    invoke(&call, conn)
}

/// Reclaims expired permits, then returns `(available, acquired)`.
pub(crate) fn permit_counts(
    conn: &mut Connection,
    k: PermitKeys<'_>,
    now_ms: u64,
    publish: &str,
) -> RedisResult<(i64, i64)> {
    invoke(
        PERMIT_COUNTS
            .key(k.name)
            .key(k.channel)
            .key(k.timeouts)
            .arg(now_ms)
            .arg(publish),
        conn,
    )
}

/// Makes the total of available and acquired permits `permits`.
pub(crate) fn permit_set(
    conn: &mut Connection,
    k: PermitKeys<'_>,
    permits: u64,
    publish: &str,
) -> RedisResult<i64> {
    invoke(
        PERMIT_SET
            .key(k.name)
            .key(k.channel)
            .key(k.timeouts)
            .arg(permits)
            .arg(publish),
        conn,
    )
}

/// Adds `delta` available permits (negative: takes them); returns the new count. A
/// count or total outside Java's `int` is refused (`PERMITS_OUT_OF_RANGE`).
pub(crate) fn permit_add(
    conn: &mut Connection,
    k: PermitKeys<'_>,
    delta: i64,
    publish: &str,
) -> RedisResult<i64> {
    invoke(
        PERMIT_ADD
            .key(k.name)
            .key(k.channel)
            .key(k.timeouts)
            .arg(delta)
            .arg(publish),
        conn,
    )
}

/// Gives an acquired permit the lease end `expires_at_ms`; true when it was acquired.
pub(crate) fn permit_update_lease(
    conn: &mut Connection,
    k: PermitKeys<'_>,
    id: &[u8; 16],
    expires_at_ms: u64,
    now_ms: u64,
    publish: &str,
) -> RedisResult<bool> {
    invoke(
        PERMIT_UPDATE_LEASE
            .key(k.name)
            .key(k.channel)
            .key(k.timeouts)
            .arg(&id[..])
            .arg(expires_at_ms)
            .arg(now_ms)
            .arg(publish),
        conn,
    )
}

/// The remaining lease of a permit in ms: -1 without lease, -2 when not acquired.
pub(crate) fn permit_lease_time(
    conn: &mut Connection,
    k: PermitKeys<'_>,
    id: &[u8; 16],
    now_ms: u64,
    publish: &str,
) -> RedisResult<i64> {
    invoke(
        PERMIT_LEASE_TIME
            .key(k.name)
            .key(k.channel)
            .key(k.timeouts)
            .arg(&id[..])
            .arg(now_ms)
            .arg(publish)
            .arg(NO_LEASE_SCORE),
        conn,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_print_and_parse_as_32_lowercase_hex() {
        let id = PermitId::random();
        let text = id.to_string();
        assert_eq!(text.len(), 32);
        assert!(
            text.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_eq!(text.parse::<PermitId>().unwrap(), id);
        assert_eq!(text.to_uppercase().parse::<PermitId>().unwrap(), id);
        assert_eq!(format!("{id:?}"), format!("PermitId({text})"));
        for bad in [
            "",
            "00",
            &"g".repeat(32),
            &"0".repeat(33),
            &"+0".repeat(16),
            "é000000000000000000000000000000",
        ] {
            assert!(
                matches!(bad.parse::<PermitId>(), Err(Error::Config(_))),
                "{bad}"
            );
        }
        assert_ne!(PermitId::random(), PermitId::random());
    }
}
