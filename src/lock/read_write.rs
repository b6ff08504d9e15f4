//! Redisson's `RReadWriteLock`: its read half `RReadLock` and its write half
//! `RWriteLock`.

use std::sync::Arc;

use redis::{Connection, RedisResult};

use super::raw::{Acquire, Adopt, Answer, HeldLock, Names, RawLock};
use super::safe::{Lock, LockGuard};
use crate::core::Core;
use crate::protocol::hash::{ReleaseArgs, Uncounted};
use crate::protocol::replies::{Forced, Released, UNLOCK_MESSAGE, WAKE_ALL_MESSAGE};
use crate::protocol::script::invoke;
use crate::protocol::{names, owner};
use crate::watchdog::Renewal;

/// A pair of reentrant locks on one Redis hash, wire-compatible with Redisson's
/// `RReadWriteLock`: any number of readers, or one writer.
///
/// The hash `name` has a field `mode` (`"read"` or `"write"`), a field
/// `<client-id>:<thread-number>` per reader with its read hold count, and a field
/// `<client-id>:<thread-number>:write` for the writer. Every read hold also has its own
/// key `{name}:<client-id>:<thread-number>:rwlock_timeout:<n>` that lives as long as the
/// hold's lease; when a reader releases, the hash keeps only as much TTL as the longest
/// live read hold, so a reader whose client died stops counting once its keys expire.
/// Both halves wait on the channel `redisson_rwlock:{name}`: a read unlock that frees the
/// lock publishes `"0"` (wakes one waiter), a write unlock publishes `"1"` (wakes them
/// all).
///
/// A thread that holds the write lock may also take the read lock (a downgrade); a thread
/// that holds only read holds cannot take the write lock (no upgrade): its
/// [`try_lock`](Lock::try_lock) answers `None`, and its [`lock`](Lock::lock) waits until
/// its own reads are gone, as in Redisson.
///
/// # Examples
///
/// ```no_run
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let rw = client.get_read_write_lock("catalog");
/// {
///     let _read = rw.read_lock().lock()?; // shared with other readers
/// }
/// let write = rw.write_lock().lock()?; // alone
/// write.unlock()?;
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct RReadWriteLock {
    read: Lock<Read>,
    write: Lock<Write>,
}

impl RReadWriteLock {
    pub(crate) fn new(core: &Arc<Core>, name: String) -> Self {
        Self {
            read: Lock::new(Arc::clone(core), Read::new(name.clone())),
            write: Lock::new(Arc::clone(core), Write::new(name)),
        }
    }

    /// The lock's name, which is also its Redis key.
    pub fn name(&self) -> &str {
        self.read.name()
    }

    /// The read half (Redisson `readLock()`).
    pub fn read_lock(&self) -> &RReadLock {
        &self.read
    }

    /// The write half (Redisson `writeLock()`).
    pub fn write_lock(&self) -> &RWriteLock {
        &self.write
    }
}

/// The kind of Redisson's `RReadLock`, the read half of an [`RReadWriteLock`]: shared
/// with other readers, excluded by a writer of another thread.
///
/// Without a lease a read hold lives under the watchdog, which renews both its timeout
/// keys and the hash (Redisson's `ReadLockTask`); with a lease it lives as long as the
/// lease. [`is_locked`](Lock::is_locked) is true when any read hold exists: the lock is
/// in read mode, or in write mode with the writer also reading.
/// [`force_unlock`](Lock::force_unlock) deletes the lock only when it is in read mode
/// (then `"0"` is published); read-hold timeout keys are left to expire.
#[derive(Debug)]
pub struct Read {
    names: Names,
    /// `{name}`: what precedes `:<owner>:rwlock_timeout:<n>` in timeout keys.
    key_prefix: String,
}

impl Read {
    fn new(name: String) -> Self {
        Self {
            key_prefix: names::read_key_prefix(&name),
            names: Names::rwlock(name),
        }
    }

    fn keys<'a>(&'a self, own_timeouts: &'a str) -> ReadKeys<'a> {
        ReadKeys {
            lock: &self.names.name,
            channel: &self.names.channel,
            own_timeouts,
            key_prefix: &self.key_prefix,
        }
    }
}

/// The kind of Redisson's `RWriteLock`, the write half of an [`RReadWriteLock`]:
/// excludes every reader and writer of other threads.
///
/// Re-entry adds its lease to the remaining TTL, unlike [`RLock`](crate::RLock), as in
/// Redisson. Without a lease the watchdog renews the hold like an `RLock`'s, with owner
/// field `<client-id>:<thread-number>:write`. [`is_locked`](Lock::is_locked) is true when
/// the lock is in write mode; [`force_unlock`](Lock::force_unlock) deletes it only then
/// (and publishes `"1"`, waking every waiter).
#[derive(Debug)]
pub struct Write {
    names: Names,
}

impl Write {
    fn new(name: String) -> Self {
        Self {
            names: Names::rwlock(name),
        }
    }
}

impl Names {
    /// A read-write lock's key and the channel both halves share.
    fn rwlock(name: String) -> Self {
        Self {
            channel: names::rwlock_channel(&name),
            name,
        }
    }

    /// Either half's force release: deletes the lock if it is in `mode`.
    fn force_mode(&self, c: &mut Connection, mode: RwMode, publish: &str) -> RedisResult<Forced> {
        rw_force_release(c, &self.name, &self.channel, mode, publish)
    }
}

/// The read half of an [`RReadWriteLock`] (Redisson `RReadLock`); see [`Read`] for its
/// rules and [`Lock`] for its methods.
///
/// # Examples
///
/// ```no_run
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let rw = client.get_read_write_lock("catalog");
/// let a = rw.read_lock().lock()?;
/// let b = rw.read_lock().lock()?; // readers share it
/// drop((a, b));
/// # Ok::<(), redmutex::Error>(())
/// ```
pub type RReadLock = Lock<Read>;

/// The write half of an [`RReadWriteLock`] (Redisson `RWriteLock`); see [`Write`] for its
/// rules and [`Lock`] for its methods.
///
/// # Examples
///
/// ```no_run
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let rw = client.get_read_write_lock("catalog");
/// let write = rw.write_lock().lock()?; // waits for every reader to leave
/// // The writer may also read (a downgrade), never the other way round.
/// let read = rw.read_lock().lock()?;
/// write.unlock()?;
/// read.unlock()?;
/// # Ok::<(), redmutex::Error>(())
/// ```
pub type RWriteLock = Lock<Write>;

/// One read hold of an [`RReadLock`], released when dropped; see [`LockGuard`].
pub type RReadLockGuard = LockGuard<Read>;

/// One write hold of an [`RWriteLock`], released when dropped; see [`LockGuard`].
pub type RWriteLockGuard = LockGuard<Write>;

impl HeldLock for Read {}

impl RawLock for Read {
    const LOCK: &'static str = "RReadLock";
    const RENEWAL: Renewal = Renewal::Read;
    const OWN_PARTLY: bool = false;

    fn names(&self) -> &Names {
        &self.names
    }

    fn acquire(&self, c: &mut Connection, a: &Acquire<'_>) -> RedisResult<Answer> {
        let own_timeouts = names::read_timeout_prefix(&self.names.name, a.owner);
        // The same thread's write owner: holding the write lock lets it read (downgrade).
        let write_owner = owner::write_field_of(a.owner);
        read_acquire(
            c,
            self.keys(&own_timeouts),
            a.owner,
            &write_owner,
            a.lease_ms,
        )
        .map(Answer::from)
    }

    fn release(&self, c: &mut Connection, r: &ReleaseArgs<'_>) -> RedisResult<Released> {
        let own_timeouts = names::read_timeout_prefix(&self.names.name, r.owner);
        read_release(c, self.keys(&own_timeouts), r)
    }

    fn adopt(&self, c: &mut Connection, a: &Adopt<'_>) -> RedisResult<Option<Uncounted>> {
        let own_timeouts = names::read_timeout_prefix(&self.names.name, a.owner);
        let keys = [self.names.name.as_str(), own_timeouts.as_str()];
        adopt_read(c, keys, a.owner, a.counted, a.renew_ms)
    }

    fn force_release(&self, c: &mut Connection, _now: u64, publish: &str) -> RedisResult<Forced> {
        self.names.force_mode(c, RwMode::Read, publish)
    }

    fn is_locked(&self, c: &mut Connection) -> RedisResult<bool> {
        read_is_locked(c, &self.names.name)
    }
}

impl HeldLock for Write {}

impl RawLock for Write {
    const LOCK: &'static str = "RWriteLock";
    const RENEWAL: Renewal = Renewal::Lock;
    const OWN_PARTLY: bool = false;

    fn names(&self) -> &Names {
        &self.names
    }

    fn owner(client_id: &str, thread: u64) -> String {
        owner::write_field(client_id, thread)
    }

    fn acquire(&self, c: &mut Connection, a: &Acquire<'_>) -> RedisResult<Answer> {
        write_acquire(c, &self.names.name, a.owner, a.lease_ms).map(Answer::from)
    }

    fn release(&self, c: &mut Connection, r: &ReleaseArgs<'_>) -> RedisResult<Released> {
        write_release(c, &self.names.name, &self.names.channel, r)
    }

    fn force_release(&self, c: &mut Connection, _now: u64, publish: &str) -> RedisResult<Forced> {
        self.names.force_mode(c, RwMode::Write, publish)
    }

    fn is_locked(&self, c: &mut Connection) -> RedisResult<bool> {
        let mode: Option<String> = redis::cmd("HGET")
            .arg(&self.names.name)
            .arg("mode")
            .query(c)?;
        Ok(mode.as_deref() == Some("write"))
    }
}

// ---- Redis scripts ------------------------------------------------------------

crate::protocol::script::scripts! {
    ADOPT_READ => "rw/adopt_read.lua" after ["uncounted.lua"],
    READ_ACQUIRE => "rw/read_acquire.lua",
    READ_RELEASE => "rw/read_release.lua" after ["latch.lua", "rwlock.lua"],
    READ_IS_LOCKED => "rw/read_is_locked.lua",
    WRITE_ACQUIRE => "rw/write_acquire.lua",
    WRITE_RELEASE => "rw/write_release.lua" after ["latch.lua", "rwlock.lua"],
    RW_FORCE_RELEASE => "rw/rw_force_release.lua",
}

/// [`adopt`] for a read hold, whose timeout keys `{own_timeouts}:1..n` bound its life as
/// much as the hash's TTL does.
pub(crate) fn adopt_read(
    conn: &mut Connection,
    [key, own_timeouts]: [&str; 2],
    owner: &str,
    counted: u32,
    renew_ms: u64,
) -> RedisResult<Option<Uncounted>> {
    let found: Option<i64> = invoke(
        ADOPT_READ
            .key(key)
            .key(own_timeouts)
            .arg(owner)
            .arg(counted)
            .arg(renew_ms),
        conn,
    )?;
    Ok(found.map(|pttl| Uncounted::new(pttl, None)))
}

/// The keys of a read-write lock, as its read half sees them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadKeys<'a> {
    pub(crate) lock: &'a str,
    pub(crate) channel: &'a str,
    /// The caller's timeout-key prefix, `{name}:<owner>:rwlock_timeout`.
    pub(crate) own_timeouts: &'a str,
    /// `{name}`: what precedes `:<owner>:rwlock_timeout:<n>` in every timeout key.
    pub(crate) key_prefix: &'a str,
}

/// Runs the read acquire: `None` when the caller now holds one more read hold, otherwise
/// the hash's PTTL in ms.
pub(crate) fn read_acquire(
    conn: &mut Connection,
    k: ReadKeys<'_>,
    read_owner: &str,
    write_owner: &str,
    lease_ms: u64,
) -> RedisResult<Option<i64>> {
    invoke(
        READ_ACQUIRE
            .key(k.lock)
            .key(k.own_timeouts)
            .arg(lease_ms)
            .arg(read_owner)
            .arg(write_owner),
        conn,
    )
}

/// Runs the read release script. `Fully` means the hash was deleted.
pub(crate) fn read_release(
    conn: &mut Connection,
    k: ReadKeys<'_>,
    r: &ReleaseArgs<'_>,
) -> RedisResult<Released> {
    invoke(
        READ_RELEASE
            .key(k.lock)
            .key(k.channel)
            .key(k.own_timeouts)
            .key(k.key_prefix)
            .key(r.latch)
            .arg(UNLOCK_MESSAGE)
            .arg(r.owner)
            .arg(r.publish)
            .arg(r.latch_ms),
        conn,
    )
    .and_then(Released::from_value)
}

/// Whether anyone holds a read hold (Redisson's `RReadLock.isLocked` rule).
pub(crate) fn read_is_locked(conn: &mut Connection, hash: &str) -> RedisResult<bool> {
    invoke(&READ_IS_LOCKED.key(hash), conn)
}

/// Runs the write acquire: `None` when the caller now holds one more write hold,
/// otherwise the hash's PTTL in ms.
pub(crate) fn write_acquire(
    conn: &mut Connection,
    hash: &str,
    write_owner: &str,
    lease_ms: u64,
) -> RedisResult<Option<i64>> {
    invoke(WRITE_ACQUIRE.key(hash).arg(lease_ms).arg(write_owner), conn)
}

/// Runs the write release script. `Fully` means the last write hold went.
pub(crate) fn write_release(
    conn: &mut Connection,
    hash: &str,
    channel: &str,
    r: &ReleaseArgs<'_>,
) -> RedisResult<Released> {
    crate::protocol::hash::hash_release(&WRITE_RELEASE, conn, [hash, channel], WAKE_ALL_MESSAGE, r)
}

/// The two modes of a read-write lock, for [`rw_force_release`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RwMode {
    Read,
    Write,
}

/// Deletes the lock if it is in `mode`, whoever holds it.
pub(crate) fn rw_force_release(
    conn: &mut Connection,
    hash: &str,
    channel: &str,
    mode: RwMode,
    publish: &str,
) -> RedisResult<Forced> {
    let (message, mode) = match mode {
        RwMode::Read => (UNLOCK_MESSAGE, "read"),
        RwMode::Write => (WAKE_ALL_MESSAGE, "write"),
    };
    invoke::<i64>(
        RW_FORCE_RELEASE
            .key(hash)
            .key(channel)
            .arg(message)
            .arg(publish)
            .arg(mode),
        conn,
    )
    .map(Forced::from_reply)
}
