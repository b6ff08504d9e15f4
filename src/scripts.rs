//! The Lua scripts of `lua/` and one typed call per script.
//!
//! Scripts go out as `EVALSHA`; on `NOSCRIPT` (a `SCRIPT FLUSH`, a restarted or new
//! primary) redis-rs loads the script and sends `EVALSHA` once more, so a flushed script
//! cache costs one extra round trip and is never seen by callers.

use std::sync::LazyLock;

use redis::{Connection, RedisResult, Script};

static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/acquire.lua")));
static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/release.lua")));
static RENEW: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../lua/renew.lua")));
static FORCE_RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/force_release.lua")));

/// Declares one `LazyLock<Script>` per file of `lua/`.
macro_rules! scripts {
    ($($name:ident => $file:literal,)*) => {
        $(static $name: LazyLock<Script> =
            LazyLock::new(|| Script::new(include_str!(concat!("../lua/", $file))));)*

        /// Every script added for the fair lock, read-write lock, semaphores and latch,
        /// with its source, for the contract test below.
        #[cfg(test)]
        fn more_scripts() -> Vec<(&'static str, &'static Script)> {
            vec![$((include_str!(concat!("../lua/", $file)), &*$name),)*]
        }
    };
}

scripts! {
    FAIR_ACQUIRE => "fair_acquire.lua",
    FAIR_TRY_ACQUIRE => "fair_try_acquire.lua",
    FAIR_ACQUIRE_FAILED => "fair_acquire_failed.lua",
    FAIR_RELEASE => "fair_release.lua",
    FAIR_FORCE_RELEASE => "fair_force_release.lua",
    READ_ACQUIRE => "read_acquire.lua",
    READ_RELEASE => "read_release.lua",
    READ_FORCE_RELEASE => "read_force_release.lua",
    READ_IS_LOCKED => "read_is_locked.lua",
    RENEW_READS => "renew_reads.lua",
    WRITE_ACQUIRE => "write_acquire.lua",
    WRITE_RELEASE => "write_release.lua",
    WRITE_FORCE_RELEASE => "write_force_release.lua",
    SEMAPHORE_TRY_ACQUIRE => "semaphore_try_acquire.lua",
    SEMAPHORE_RELEASE => "semaphore_release.lua",
    SEMAPHORE_RELEASE_IF_EXISTS => "semaphore_release_if_exists.lua",
    SEMAPHORE_DRAIN => "semaphore_drain.lua",
    SEMAPHORE_TRY_SET => "semaphore_try_set.lua",
    SEMAPHORE_ADD => "semaphore_add.lua",
    PERMIT_ACQUIRE => "permit_acquire.lua",
    PERMIT_RELEASE => "permit_release.lua",
    PERMIT_RELEASE_MANY => "permit_release_many.lua",
    PERMIT_COUNTS => "permit_counts.lua",
    PERMIT_SET => "permit_set.lua",
    PERMIT_ADD => "permit_add.lua",
    PERMIT_UPDATE_LEASE => "permit_update_lease.lua",
    PERMIT_LEASE_TIME => "permit_lease_time.lua",
    LATCH_TRY_SET => "latch_try_set.lua",
    LATCH_COUNT_DOWN => "latch_count_down.lua",
    LATCH_DELETE => "latch_delete.lua",
}

/// How many times a script call is sent again after `NOSCRIPT`.
const NOSCRIPT_RETRIES: u32 = 5;

/// `invoke` that survives a script cache flushed at any moment.
///
/// redis-rs answers `NOSCRIPT` with `SCRIPT LOAD` and one more `EVALSHA`; a flush that
/// lands between those two would still surface. `NOSCRIPT` means the script did not
/// run, so sending it again can never apply it twice.
trait InvokeSurvivingFlush {
    fn invoke_surviving_flush<T: redis::FromRedisValue>(
        &self,
        conn: &mut dyn redis::ConnectionLike,
    ) -> RedisResult<T>;
}

impl InvokeSurvivingFlush for redis::ScriptInvocation<'_> {
    fn invoke_surviving_flush<T: redis::FromRedisValue>(
        &self,
        conn: &mut dyn redis::ConnectionLike,
    ) -> RedisResult<T> {
        let mut tries = 0;
        loop {
            match self.invoke(conn) {
                Err(e)
                    if tries < NOSCRIPT_RETRIES
                        && e.kind()
                            == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                {
                    tries += 1;
                }
                other => return other,
            }
        }
    }
}

/// Redisson's RLock unlock message.
pub(crate) const UNLOCK_MESSAGE: &str = "0";

/// Redisson's message that wakes every waiter: the write lock's unlock
/// (`READ_UNLOCK_MESSAGE`); the read lock's unlock sends [`UNLOCK_MESSAGE`].
pub(crate) const WAKE_ALL_MESSAGE: &str = "1";

/// The count-down latch's messages: the count reached zero, and a new count was set.
pub(crate) const LATCH_ZERO_MESSAGE: &str = "0";
/// See [`LATCH_ZERO_MESSAGE`].
pub(crate) const LATCH_NEW_COUNT_MESSAGE: &str = "1";

/// The command scripts publish with; a single server never uses sharded pub/sub.
const PUBLISH: &str = "PUBLISH";

/// The lease-end score Redisson gives a permit without lease.
pub(crate) const NO_LEASE_SCORE: u64 = 922_337_203_685_477;

/// Runs the acquire script: `None` when the owner now holds the lock, otherwise the
/// lock's remaining TTL in milliseconds (-1: the key has no TTL).
pub(crate) fn acquire(
    conn: &mut Connection,
    key: &str,
    owner: &str,
    lease_ms: u64,
) -> RedisResult<Option<i64>> {
    ACQUIRE
        .key(key)
        .arg(lease_ms)
        .arg(owner)
        .invoke_surviving_flush(conn)
}

/// What one release request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Released {
    /// The caller held no hold.
    NotHeld,
    /// One hold was released; others remain.
    Partly,
    /// The last hold was released and the unlock message published.
    Fully,
}

/// The arguments of one release request; `latch` must stay the same across retries.
#[derive(Debug)]
pub(crate) struct Release<'a> {
    pub(crate) key: &'a str,
    pub(crate) channel: &'a str,
    pub(crate) latch: &'a str,
    pub(crate) owner: &'a str,
    pub(crate) lease_ms: u64,
    pub(crate) latch_ms: u64,
}

/// Runs the release script.
pub(crate) fn release(conn: &mut Connection, r: &Release<'_>) -> RedisResult<Released> {
    let outcome: Option<i64> = RELEASE
        .key(r.key)
        .key(r.channel)
        .key(r.latch)
        .arg(UNLOCK_MESSAGE)
        .arg(r.lease_ms)
        .arg(r.owner)
        .arg("PUBLISH")
        .arg(r.latch_ms)
        .invoke_surviving_flush(conn)?;
    Ok(match outcome {
        None => Released::NotHeld,
        Some(0) => Released::Partly,
        Some(_) => Released::Fully,
    })
}

/// Renews every `(key, owner)` pair with `lease_ms`; element i of the answer says whether
/// pair i was still held.
pub(crate) fn renew(
    conn: &mut Connection,
    holds: &[(&str, &str)],
    lease_ms: u64,
) -> RedisResult<Vec<bool>> {
    let mut call = RENEW.prepare_invoke();
    call.arg(lease_ms);
    for (key, owner) in holds {
        call.key(*key).arg(*owner);
    }
    let answer: Vec<i64> = call.invoke_surviving_flush(conn)?;
    Ok(answer.into_iter().map(|v| v == 1).collect())
}

/// Deletes the lock whoever holds it; true when there was one.
pub(crate) fn force_release(conn: &mut Connection, key: &str, channel: &str) -> RedisResult<bool> {
    FORCE_RELEASE
        .key(key)
        .key(channel)
        .arg(UNLOCK_MESSAGE)
        .arg("PUBLISH")
        .invoke_surviving_flush(conn)
}

// ---- fair lock -------------------------------------------------------------------

/// The three keys of a fair lock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FairKeys<'a> {
    pub(crate) lock: &'a str,
    pub(crate) queue: &'a str,
    pub(crate) timeouts: &'a str,
}

/// One fair acquisition attempt.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FairAcquire<'a> {
    pub(crate) keys: FairKeys<'a>,
    pub(crate) owner: &'a str,
    pub(crate) lease_ms: u64,
    /// The caller's slot length in the queue.
    pub(crate) wait_ms: u64,
    pub(crate) now_ms: u64,
}

/// Runs the queueing acquire: `None` when the caller now holds the lock, otherwise a
/// retry hint in ms (see `lua/fair_acquire.lua`: > 0 sleep at most that long, 0 the
/// lock is free but another waiter is first, -1 only a message can help).
pub(crate) fn fair_acquire(conn: &mut Connection, a: &FairAcquire<'_>) -> RedisResult<Option<i64>> {
    FAIR_ACQUIRE
        .key(a.keys.lock)
        .key(a.keys.queue)
        .key(a.keys.timeouts)
        .arg(a.lease_ms)
        .arg(a.owner)
        .arg(a.wait_ms)
        .arg(a.now_ms)
        .invoke_surviving_flush(conn)
}

/// Runs the non-queueing acquire; true when the caller now holds the lock.
pub(crate) fn fair_try_acquire(conn: &mut Connection, a: &FairAcquire<'_>) -> RedisResult<bool> {
    let answer: Option<i64> = FAIR_TRY_ACQUIRE
        .key(a.keys.lock)
        .key(a.keys.queue)
        .key(a.keys.timeouts)
        .arg(a.lease_ms)
        .arg(a.owner)
        .arg(a.now_ms)
        .arg(a.wait_ms)
        .invoke_surviving_flush(conn)?;
    Ok(answer.is_none())
}

/// Takes a waiter that gives up out of the queue, moving the waiters behind it up.
pub(crate) fn fair_acquire_failed(
    conn: &mut Connection,
    keys: FairKeys<'_>,
    channel: &str,
    owner: &str,
    wait_ms: u64,
) -> RedisResult<()> {
    FAIR_ACQUIRE_FAILED
        .key(keys.queue)
        .key(keys.timeouts)
        .key(keys.lock)
        .key(channel)
        .arg(owner)
        .arg(wait_ms)
        .arg(UNLOCK_MESSAGE)
        .arg(PUBLISH)
        .invoke::<i64>(conn)
        .map(drop)
}

/// What a fair release did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FairReleased {
    /// See [`Released`].
    Released(Released),
    /// There was no lock at all; Redisson counts that as a successful unlock.
    Missing,
}

/// The arguments of one fair release request; `latch` must stay the same across retries.
#[derive(Debug)]
pub(crate) struct FairRelease<'a> {
    pub(crate) keys: FairKeys<'a>,
    pub(crate) channel: &'a str,
    pub(crate) latch: &'a str,
    pub(crate) owner: &'a str,
    pub(crate) lease_ms: u64,
    pub(crate) latch_ms: u64,
}

/// Runs the fair release script with the current wall clock.
pub(crate) fn fair_release(
    conn: &mut Connection,
    r: &FairRelease<'_>,
) -> RedisResult<FairReleased> {
    let outcome: Option<i64> = FAIR_RELEASE
        .key(r.keys.lock)
        .key(r.keys.queue)
        .key(r.keys.timeouts)
        .key(r.channel)
        .key(r.latch)
        .arg(UNLOCK_MESSAGE)
        .arg(r.lease_ms)
        .arg(r.owner)
        .arg(crate::common::now_ms())
        .arg(PUBLISH)
        .arg(r.latch_ms)
        .invoke_surviving_flush(conn)?;
    Ok(match outcome {
        None => FairReleased::Released(Released::NotHeld),
        Some(0) => FairReleased::Released(Released::Partly),
        Some(2) => FairReleased::Missing,
        Some(_) => FairReleased::Released(Released::Fully),
    })
}

/// Deletes the fair lock whoever holds it and tells the next waiter; true when there was
/// a lock.
pub(crate) fn fair_force_release(
    conn: &mut Connection,
    keys: FairKeys<'_>,
    channel: &str,
) -> RedisResult<bool> {
    FAIR_FORCE_RELEASE
        .key(keys.lock)
        .key(keys.queue)
        .key(keys.timeouts)
        .key(channel)
        .arg(UNLOCK_MESSAGE)
        .arg(crate::common::now_ms())
        .arg(PUBLISH)
        .invoke_surviving_flush(conn)
}

// ---- read-write lock ------------------------------------------------------------

/// Runs the read acquire: `None` when the caller now holds one more read hold, otherwise
/// the hash's PTTL in ms.
pub(crate) fn read_acquire(
    conn: &mut Connection,
    hash: &str,
    timeout_prefix: &str,
    read_owner: &str,
    write_owner: &str,
    lease_ms: u64,
) -> RedisResult<Option<i64>> {
    READ_ACQUIRE
        .key(hash)
        .key(timeout_prefix)
        .arg(lease_ms)
        .arg(read_owner)
        .arg(write_owner)
        .invoke_surviving_flush(conn)
}

/// The arguments of one read release request; `latch` must stay the same across retries.
#[derive(Debug)]
pub(crate) struct ReadRelease<'a> {
    pub(crate) hash: &'a str,
    pub(crate) channel: &'a str,
    pub(crate) timeout_prefix: &'a str,
    pub(crate) key_prefix: &'a str,
    pub(crate) latch: &'a str,
    pub(crate) owner: &'a str,
    pub(crate) latch_ms: u64,
}

fn released(outcome: Option<i64>) -> Released {
    match outcome {
        None => Released::NotHeld,
        Some(0) => Released::Partly,
        Some(_) => Released::Fully,
    }
}

/// Runs the read release script. `Fully` means the hash was deleted.
pub(crate) fn read_release(conn: &mut Connection, r: &ReadRelease<'_>) -> RedisResult<Released> {
    let outcome: Option<i64> = READ_RELEASE
        .key(r.hash)
        .key(r.channel)
        .key(r.timeout_prefix)
        .key(r.key_prefix)
        .key(r.latch)
        .arg(UNLOCK_MESSAGE)
        .arg(r.owner)
        .arg(PUBLISH)
        .arg(r.latch_ms)
        .invoke_surviving_flush(conn)?;
    Ok(released(outcome))
}

/// Deletes the lock if it is in read mode; true when it was.
pub(crate) fn read_force_release(
    conn: &mut Connection,
    hash: &str,
    channel: &str,
) -> RedisResult<bool> {
    READ_FORCE_RELEASE
        .key(hash)
        .key(channel)
        .arg(UNLOCK_MESSAGE)
        .arg(PUBLISH)
        .invoke_surviving_flush(conn)
}

/// Whether anyone holds a read hold (Redisson's `RReadLock.isLocked` rule).
pub(crate) fn read_is_locked(conn: &mut Connection, hash: &str) -> RedisResult<bool> {
    READ_IS_LOCKED.key(hash).invoke_surviving_flush(conn)
}

/// Renews the read holds `(lock name, read owner)`; element i of the answer says
/// whether owner i still held reads. Runs of the same lock share one key pair.
pub(crate) fn renew_reads(
    conn: &mut Connection,
    holds: &[(&str, &str)],
    lease_ms: u64,
) -> RedisResult<Vec<bool>> {
    let mut call = RENEW_READS.prepare_invoke();
    call.arg(lease_ms);
    for run in holds.chunk_by(|a, b| a.0 == b.0) {
        let name = run.first().map_or("", |h| h.0);
        call.key(name).key(crate::names::read_key_prefix(name));
        call.arg(run.len());
        for (_, owner) in run {
            call.arg(*owner);
        }
    }
    let answer: Vec<i64> = call.invoke_surviving_flush(conn)?;
    Ok(answer.into_iter().map(|v| v == 1).collect())
}

/// Runs the write acquire: `None` when the caller now holds one more write hold,
/// otherwise the hash's PTTL in ms.
pub(crate) fn write_acquire(
    conn: &mut Connection,
    hash: &str,
    write_owner: &str,
    lease_ms: u64,
) -> RedisResult<Option<i64>> {
    WRITE_ACQUIRE
        .key(hash)
        .arg(lease_ms)
        .arg(write_owner)
        .invoke_surviving_flush(conn)
}

/// The arguments of one write release request; `latch` must stay the same across
/// retries.
#[derive(Debug)]
pub(crate) struct WriteRelease<'a> {
    pub(crate) hash: &'a str,
    pub(crate) channel: &'a str,
    pub(crate) latch: &'a str,
    pub(crate) owner: &'a str,
    pub(crate) lease_ms: u64,
    pub(crate) latch_ms: u64,
}

/// Runs the write release script. `Fully` means the last write hold went.
pub(crate) fn write_release(conn: &mut Connection, r: &WriteRelease<'_>) -> RedisResult<Released> {
    let outcome: Option<i64> = WRITE_RELEASE
        .key(r.hash)
        .key(r.channel)
        .key(r.latch)
        .arg(WAKE_ALL_MESSAGE)
        .arg(r.lease_ms)
        .arg(r.owner)
        .arg(PUBLISH)
        .arg(r.latch_ms)
        .invoke_surviving_flush(conn)?;
    Ok(released(outcome))
}

/// Deletes the lock if it is in write mode; true when it was.
pub(crate) fn write_force_release(
    conn: &mut Connection,
    hash: &str,
    channel: &str,
) -> RedisResult<bool> {
    WRITE_FORCE_RELEASE
        .key(hash)
        .key(channel)
        .arg(WAKE_ALL_MESSAGE)
        .arg(PUBLISH)
        .invoke_surviving_flush(conn)
}

// ---- semaphore ------------------------------------------------------------------

/// Takes `permits` if available; true when taken.
pub(crate) fn semaphore_try_acquire(
    conn: &mut Connection,
    name: &str,
    permits: u64,
) -> RedisResult<bool> {
    SEMAPHORE_TRY_ACQUIRE
        .key(name)
        .arg(permits)
        .invoke_surviving_flush(conn)
}

/// Returns `permits` and publishes the new count, which it returns.
pub(crate) fn semaphore_release(
    conn: &mut Connection,
    name: &str,
    channel: &str,
    permits: u64,
) -> RedisResult<i64> {
    SEMAPHORE_RELEASE
        .key(name)
        .key(channel)
        .arg(permits)
        .arg(PUBLISH)
        .invoke_surviving_flush(conn)
}

/// Returns `permits` if the semaphore exists; true when it did.
pub(crate) fn semaphore_release_if_exists(
    conn: &mut Connection,
    name: &str,
    channel: &str,
    permits: u64,
) -> RedisResult<bool> {
    SEMAPHORE_RELEASE_IF_EXISTS
        .key(name)
        .key(channel)
        .arg(permits)
        .arg(PUBLISH)
        .invoke_surviving_flush(conn)
}

/// Takes every available permit; returns how many there were.
pub(crate) fn semaphore_drain(conn: &mut Connection, name: &str) -> RedisResult<i64> {
    SEMAPHORE_DRAIN.key(name).invoke_surviving_flush(conn)
}

/// Creates the semaphore with `permits` unless it exists; true when created.
pub(crate) fn semaphore_try_set(
    conn: &mut Connection,
    name: &str,
    channel: &str,
    permits: u64,
    ttl_ms: Option<u64>,
) -> RedisResult<bool> {
    SEMAPHORE_TRY_SET
        .key(name)
        .key(channel)
        .arg(permits)
        .arg(PUBLISH)
        .arg(ttl_ms.unwrap_or(0))
        .invoke_surviving_flush(conn)
}

/// Adds `delta` permits (negative: takes them); returns the new count.
pub(crate) fn semaphore_add(
    conn: &mut Connection,
    name: &str,
    channel: &str,
    delta: i64,
) -> RedisResult<i64> {
    SEMAPHORE_ADD
        .key(name)
        .key(channel)
        .arg(delta)
        .arg(PUBLISH)
        .invoke_surviving_flush(conn)
}

// ---- permit-expirable semaphore ---------------------------------------------------

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
) -> RedisResult<PermitAttempt> {
    let mut call = PERMIT_ACQUIRE.prepare_invoke();
    call.key(k.name).key(k.timeouts).key(k.channel);
    call.arg(ids.len())
        .arg(expires_at_ms)
        .arg(crate::common::now_ms())
        .arg(NO_LEASE_SCORE)
        .arg(PUBLISH);
    for id in ids {
        call.arg(&id[..]);
    }
    let answer: i64 = call.invoke_surviving_flush(conn)?;
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
) -> RedisResult<bool> {
    PERMIT_RELEASE
        .key(k.name)
        .key(k.channel)
        .key(k.timeouts)
        .arg(&id[..])
        .arg(1)
        .arg(crate::common::now_ms())
        .arg(PUBLISH)
        .invoke_surviving_flush(conn)
}

/// Releases every permit of `ids`, or none when one of them is not live; returns how
/// many were released.
pub(crate) fn permit_release_many(
    conn: &mut Connection,
    k: PermitKeys<'_>,
    ids: &[[u8; 16]],
) -> RedisResult<u64> {
    let mut call = PERMIT_RELEASE_MANY.prepare_invoke();
    call.key(k.name).key(k.channel).key(k.timeouts);
    call.arg(ids.len())
        .arg(crate::common::now_ms())
        .arg(PUBLISH);
    for id in ids {
        call.arg(&id[..]);
    }
    call.invoke_surviving_flush(conn)
}

/// Reclaims expired permits, then returns `(available, acquired)`.
pub(crate) fn permit_counts(conn: &mut Connection, k: PermitKeys<'_>) -> RedisResult<(i64, i64)> {
    PERMIT_COUNTS
        .key(k.name)
        .key(k.channel)
        .key(k.timeouts)
        .arg(crate::common::now_ms())
        .arg(PUBLISH)
        .invoke_surviving_flush(conn)
}

/// Makes the total of available and acquired permits `permits`.
pub(crate) fn permit_set(
    conn: &mut Connection,
    k: PermitKeys<'_>,
    permits: u64,
) -> RedisResult<i64> {
    PERMIT_SET
        .key(k.name)
        .key(k.channel)
        .key(k.timeouts)
        .arg(permits)
        .arg(PUBLISH)
        .invoke_surviving_flush(conn)
}

/// Adds `delta` available permits (negative: takes them); returns the new count.
pub(crate) fn permit_add(conn: &mut Connection, k: PermitKeys<'_>, delta: i64) -> RedisResult<i64> {
    PERMIT_ADD
        .key(k.name)
        .key(k.channel)
        .arg(delta)
        .arg(PUBLISH)
        .invoke_surviving_flush(conn)
}

/// Gives an acquired permit the lease end `expires_at_ms`; true when it was acquired.
pub(crate) fn permit_update_lease(
    conn: &mut Connection,
    k: PermitKeys<'_>,
    id: &[u8; 16],
    expires_at_ms: u64,
) -> RedisResult<bool> {
    PERMIT_UPDATE_LEASE
        .key(k.name)
        .key(k.channel)
        .key(k.timeouts)
        .arg(&id[..])
        .arg(expires_at_ms)
        .arg(crate::common::now_ms())
        .arg(PUBLISH)
        .invoke_surviving_flush(conn)
}

/// The remaining lease of a permit in ms: -1 without lease, -2 when not acquired.
pub(crate) fn permit_lease_time(
    conn: &mut Connection,
    k: PermitKeys<'_>,
    id: &[u8; 16],
) -> RedisResult<i64> {
    PERMIT_LEASE_TIME
        .key(k.name)
        .key(k.channel)
        .key(k.timeouts)
        .arg(&id[..])
        .arg(crate::common::now_ms())
        .arg(PUBLISH)
        .arg(NO_LEASE_SCORE)
        .invoke_surviving_flush(conn)
}

// ---- count-down latch -------------------------------------------------------------

/// Sets the count unless one is set; true when it was set.
pub(crate) fn latch_try_set(
    conn: &mut Connection,
    name: &str,
    channel: &str,
    count: u64,
) -> RedisResult<bool> {
    LATCH_TRY_SET
        .key(name)
        .key(channel)
        .arg(LATCH_NEW_COUNT_MESSAGE)
        .arg(count)
        .arg(PUBLISH)
        .invoke_surviving_flush(conn)
}

/// Counts down by one; returns the count afterwards.
pub(crate) fn latch_count_down(
    conn: &mut Connection,
    name: &str,
    channel: &str,
) -> RedisResult<i64> {
    LATCH_COUNT_DOWN
        .key(name)
        .key(channel)
        .arg(LATCH_ZERO_MESSAGE)
        .arg(PUBLISH)
        .invoke_surviving_flush(conn)
}

/// Deletes the latch; true when there was one.
pub(crate) fn latch_delete(conn: &mut Connection, name: &str, channel: &str) -> RedisResult<bool> {
    LATCH_DELETE
        .key(name)
        .key(channel)
        .arg(LATCH_NEW_COUNT_MESSAGE)
        .arg(PUBLISH)
        .invoke_surviving_flush(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_script_documents_its_contract_and_hashes_stably() {
        for (src, script) in [
            (include_str!("../lua/acquire.lua"), &*ACQUIRE),
            (include_str!("../lua/release.lua"), &*RELEASE),
            (include_str!("../lua/renew.lua"), &*RENEW),
            (include_str!("../lua/force_release.lua"), &*FORCE_RELEASE),
        ]
        .into_iter()
        .chain(more_scripts())
        {
            assert!(
                src.contains("KEYS[") && src.contains("ARGV[") && src.contains("Returns"),
                "{src}"
            );
            assert_eq!(script.get_hash().len(), 40);
            assert_eq!(script.get_hash(), Script::new(src).get_hash());
        }
    }
}
