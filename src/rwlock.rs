//! Redisson's `RReadWriteLock`: its read half `RReadLock`, its write half `RWriteLock`,
//! and their guards.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::common::{self, Attempt, HoldState, Wait};
use crate::error::{Error, Result};
use crate::guard::{HeldLock, LockGuard, sealed};
use crate::names;
use crate::owner;
use crate::pubsub::WakeRule;
use crate::scripts::{self, ReadRelease, Released, WriteRelease};
use crate::watchdog::{Hold, Renewal};

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
/// [`RWriteLock::try_lock`] answers `None`, and its [`RWriteLock::lock`] waits until its
/// own reads are gone, as in Redisson.
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
    read: RReadLock,
    write: RWriteLock,
}

impl RReadWriteLock {
    pub(crate) fn new(client: Client, name: String) -> Self {
        let channel = names::rwlock_channel(&name);
        let lease_ms = client.config().lock_watchdog_timeout.as_millis() as u64;
        Self {
            read: RReadLock {
                client: client.clone(),
                inner: Arc::new(ReadInner {
                    key_prefix: names::read_key_prefix(&name),
                    channel: channel.clone(),
                    name: name.clone(),
                }),
            },
            write: RWriteLock {
                client,
                inner: Arc::new(WriteInner {
                    name,
                    channel,
                    lease_ms: AtomicU64::new(lease_ms),
                }),
            },
        }
    }

    /// The lock's name, which is also its Redis key.
    pub fn name(&self) -> &str {
        &self.read.inner.name
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

/// The read half of an [`RReadWriteLock`] (Redisson `RReadLock`): shared with other
/// readers, excluded by a writer of another thread.
///
/// Without a lease a read hold lives under the watchdog, which renews both its timeout
/// keys and the hash (Redisson's `ReadLockTask`); with a lease it lives as long as the
/// lease. Guards are not `Send`: holds belong to the thread that took them.
#[derive(Clone)]
pub struct RReadLock {
    client: Client,
    inner: Arc<ReadInner>,
}

struct ReadInner {
    name: String,
    channel: String,
    /// `{name}`: what precedes `:<owner>:rwlock_timeout:<n>` in timeout keys.
    key_prefix: String,
}

impl std::fmt::Debug for RReadLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RReadLock")
            .field("name", &self.inner.name)
            .field("client", &self.client.id())
            .finish()
    }
}

/// The write half of an [`RReadWriteLock`] (Redisson `RWriteLock`): excludes every
/// reader and writer of other threads.
///
/// Re-entry adds its lease to the remaining TTL, unlike [`RLock`](crate::RLock), as in
/// Redisson. Without a lease the watchdog renews the hold like an `RLock`'s, with owner
/// field `<client-id>:<thread-number>:write`. Guards are not `Send`.
#[derive(Clone)]
pub struct RWriteLock {
    client: Client,
    inner: Arc<WriteInner>,
}

struct WriteInner {
    name: String,
    channel: String,
    /// Redisson's `internalLockLeaseTime`: what a partial release sets the TTL to.
    lease_ms: AtomicU64,
}

impl std::fmt::Debug for RWriteLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RWriteLock")
            .field("name", &self.inner.name)
            .field("client", &self.client.id())
            .finish()
    }
}

fn read_owner(client: &Client) -> String {
    owner::field(client.id(), owner::thread_number())
}

fn write_owner(client: &Client) -> String {
    let mut field = read_owner(client);
    field.push_str(":write");
    field
}

fn lease_or_watchdog(client: &Client, lease: Option<Duration>) -> Result<u64> {
    match lease {
        Some(l) => common::lease_ms(l),
        None => Ok(client.config().lock_watchdog_timeout.as_millis() as u64),
    }
}

fn hold_count(client: &Client, name: &str, field: &str) -> Result<u32> {
    let count: Option<u32> = client
        .inner
        .run(name, |c| redis::cmd("HGET").arg(name).arg(field).query(c))?;
    Ok(count.unwrap_or(0))
}

fn holds(client: &Client, name: &str, field: &str) -> Result<bool> {
    client.inner.run(name, |c| {
        redis::cmd("HEXISTS").arg(name).arg(field).query(c)
    })
}

/// Redisson's waiting loop shared by both halves: `attempt` answers the guard or the
/// hash's PTTL; waiters sleep on the shared channel until a message or that TTL.
fn acquire<'a, G>(
    client: &Client,
    channel: &str,
    wait: Wait,
    mut attempt: impl FnMut() -> Result<Result<G, i64>> + 'a,
) -> Result<Option<G>> {
    let ttl = match attempt()? {
        Ok(guard) => return Ok(Some(guard)),
        Err(ttl) => ttl,
    };
    if matches!(wait, Wait::No) {
        return Ok(None);
    }
    // Subscribed before the next attempt: see the lost-wake-up argument in pubsub.rs.
    let subscription = client.inner.listener.subscribe(channel, WakeRule::Lock)?;
    common::wait_turns(
        &subscription,
        wait.deadline(),
        common::retry_after(ttl),
        || {
            Ok(match attempt()? {
                Ok(guard) => Attempt::Done(guard),
                Err(ttl) => Attempt::RetryBy(common::retry_after(ttl)),
            })
        },
    )
}

impl RReadLock {
    /// The lock's name, which is also its Redis key.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Waits as long as it takes, then holds a read hold under the watchdog (Redisson
    /// `readLock().lock()`). A writer wakes every waiting reader when it unlocks.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`] when the key is not a hash.
    pub fn lock(&self) -> Result<RReadLockGuard<'_>> {
        self.acquire(None, Wait::Forever)
            .and_then(|g| g.ok_or(Error::Shutdown))
    }

    /// Waits as long as it takes, then holds a read hold for `lease`, never renewed.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock); [`Error::Config`] for a zero or absurd lease.
    pub fn lock_with_lease(&self, lease: Duration) -> Result<RReadLockGuard<'_>> {
        self.acquire(Some(lease), Wait::Forever)
            .and_then(|g| g.ok_or(Error::Shutdown))
    }

    /// One attempt, no waiting; held under the watchdog on success. `Ok(None)` means
    /// another thread holds the write lock.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn try_lock(&self) -> Result<Option<RReadLockGuard<'_>>> {
        self.acquire(None, Wait::No)
    }

    /// Waits at most `wait`; held under the watchdog on success.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<RReadLockGuard<'_>>> {
        self.acquire(None, Wait::from_duration(wait))
    }

    /// Waits at most `wait`, then holds a read hold for `lease`, never renewed.
    ///
    /// # Errors
    ///
    /// As [`lock_with_lease`](Self::lock_with_lease).
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<RReadLockGuard<'_>>> {
        self.acquire(Some(lease), Wait::from_duration(wait))
    }

    /// Releases one read hold of the current thread (Redisson `unlock()`), for holds
    /// whose guard was [detached](RReadLockGuard::detach).
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`] when the thread holds no read hold; [`Error::LockLost`] when
    /// the watchdog had found it gone; Redis, pool and shutdown errors.
    pub fn unlock(&self) -> Result<()> {
        let owner = read_owner(&self.client);
        let hold = self
            .client
            .inner
            .watchdog
            .hold(Renewal::Read, &self.inner.name, &owner);
        self.release(&owner, hold.as_deref())
    }

    /// Deletes the lock if it is in read mode, whoever reads, and wakes a waiter
    /// (Redisson `forceUnlock()`); a write-mode lock is left alone. Returns whether it
    /// deleted. Read-hold timeout keys are left to expire.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn force_unlock(&self) -> Result<bool> {
        let deleted = self.client.inner.run(&self.inner.name, |c| {
            scripts::read_force_release(c, &self.inner.name, &self.inner.channel)
        })?;
        if deleted {
            self.client.inner.watchdog.forget_lock(&self.inner.name);
        }
        Ok(deleted)
    }

    /// Whether any read hold exists: the lock is in read mode, or in write mode with the
    /// writer also reading (Redisson `RReadLock.isLocked()`).
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn is_locked(&self) -> Result<bool> {
        self.client.inner.run(&self.inner.name, |c| {
            scripts::read_is_locked(c, &self.inner.name)
        })
    }

    /// Whether the current thread has a read hold.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`] when the key is not a hash.
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        holds(&self.client, &self.inner.name, &read_owner(&self.client))
    }

    /// How many read holds the current thread has; 0 when none.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`] when the key is not a hash.
    pub fn hold_count(&self) -> Result<u32> {
        hold_count(&self.client, &self.inner.name, &read_owner(&self.client))
    }

    /// The hash's remaining TTL (`PTTL`): `None` when nobody holds the lock,
    /// `Some(Duration::MAX)` when the key has no TTL.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn remain_time_to_live(&self) -> Result<Option<Duration>> {
        common::remain_time_to_live(&self.client, &self.inner.name)
    }

    fn acquire(&self, lease: Option<Duration>, wait: Wait) -> Result<Option<RReadLockGuard<'_>>> {
        let lease_ms = lease_or_watchdog(&self.client, lease)?;
        let owner = read_owner(&self.client);
        let write = write_owner(&self.client);
        let timeout_prefix = names::read_timeout_prefix(&self.inner.name, &owner);
        acquire(&self.client, &self.inner.channel, wait, || {
            let sent = Instant::now();
            let answer = self.client.inner.run(&self.inner.name, |c| {
                scripts::read_acquire(
                    c,
                    &self.inner.name,
                    &timeout_prefix,
                    &owner,
                    &write,
                    lease_ms,
                )
            })?;
            Ok(match answer {
                Some(ttl) => Err(ttl),
                None => Ok(LockGuard::new(
                    self,
                    HoldState::acquired(
                        &self.client,
                        Renewal::Read,
                        &self.inner.name,
                        &owner,
                        lease,
                        sent,
                    ),
                )),
            })
        })
    }

    fn release(&self, owner: &str, hold: Option<&Hold>) -> Result<()> {
        let name = &self.inner.name;
        let timeout_prefix = names::read_timeout_prefix(name, owner);
        let outcome = common::release_with_latch(&self.client, name, |c, latch, latch_ms| {
            scripts::read_release(
                c,
                &ReadRelease {
                    hash: name,
                    channel: &self.inner.channel,
                    timeout_prefix: &timeout_prefix,
                    key_prefix: &self.inner.key_prefix,
                    latch,
                    owner,
                    latch_ms,
                },
            )
        });
        match outcome {
            Ok(released) => {
                common::settle_release(&self.client, Renewal::Read, name, owner, hold, released)
            }
            Err(e) => {
                common::after_failed_release(&self.client, Renewal::Read, name, owner, &e);
                Err(e)
            }
        }
    }
}

impl RWriteLock {
    /// The lock's name, which is also its Redis key.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Waits as long as it takes, then holds the write lock under the watchdog (Redisson
    /// `writeLock().lock()`).
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`] when the key is not a hash.
    pub fn lock(&self) -> Result<RWriteLockGuard<'_>> {
        self.acquire(None, Wait::Forever)
            .and_then(|g| g.ok_or(Error::Shutdown))
    }

    /// Waits as long as it takes, then holds the write lock for `lease`, never renewed. A
    /// re-entry adds its lease to the remaining TTL.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock); [`Error::Config`] for a zero or absurd lease.
    pub fn lock_with_lease(&self, lease: Duration) -> Result<RWriteLockGuard<'_>> {
        self.acquire(Some(lease), Wait::Forever)
            .and_then(|g| g.ok_or(Error::Shutdown))
    }

    /// One attempt, no waiting; held under the watchdog on success. `Ok(None)` means
    /// someone else, or the current thread as a reader, holds the lock.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn try_lock(&self) -> Result<Option<RWriteLockGuard<'_>>> {
        self.acquire(None, Wait::No)
    }

    /// Waits at most `wait`; held under the watchdog on success.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<RWriteLockGuard<'_>>> {
        self.acquire(None, Wait::from_duration(wait))
    }

    /// Waits at most `wait`, then holds the write lock for `lease`, never renewed.
    ///
    /// # Errors
    ///
    /// As [`lock_with_lease`](Self::lock_with_lease).
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<RWriteLockGuard<'_>>> {
        self.acquire(Some(lease), Wait::from_duration(wait))
    }

    /// Releases one write hold of the current thread (Redisson `unlock()`), for holds
    /// whose guard was [detached](RWriteLockGuard::detach).
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`] when the thread holds no write hold; [`Error::LockLost`] when
    /// the watchdog had found it gone; Redis, pool and shutdown errors.
    pub fn unlock(&self) -> Result<()> {
        let owner = write_owner(&self.client);
        let hold = self
            .client
            .inner
            .watchdog
            .hold(Renewal::Lock, &self.inner.name, &owner);
        self.release(&owner, hold.as_deref())
    }

    /// Deletes the lock if it is in write mode, whoever writes, and wakes every waiter
    /// (Redisson `forceUnlock()`); a read-mode lock is left alone. Returns whether it
    /// deleted.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn force_unlock(&self) -> Result<bool> {
        let deleted = self.client.inner.run(&self.inner.name, |c| {
            scripts::write_force_release(c, &self.inner.name, &self.inner.channel)
        })?;
        if deleted {
            self.client.inner.watchdog.forget_lock(&self.inner.name);
        }
        Ok(deleted)
    }

    /// Whether the lock is in write mode (Redisson `RWriteLock.isLocked()`).
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`] when the key is not a hash.
    pub fn is_locked(&self) -> Result<bool> {
        let mode: Option<String> = self.client.inner.run(&self.inner.name, |c| {
            redis::cmd("HGET")
                .arg(&self.inner.name)
                .arg("mode")
                .query(c)
        })?;
        Ok(mode.as_deref() == Some("write"))
    }

    /// Whether the current thread holds the write lock.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`] when the key is not a hash.
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        holds(&self.client, &self.inner.name, &write_owner(&self.client))
    }

    /// How many write holds the current thread has; 0 when none.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`] when the key is not a hash.
    pub fn hold_count(&self) -> Result<u32> {
        hold_count(&self.client, &self.inner.name, &write_owner(&self.client))
    }

    /// The hash's remaining TTL (`PTTL`): `None` when nobody holds the lock,
    /// `Some(Duration::MAX)` when the key has no TTL.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn remain_time_to_live(&self) -> Result<Option<Duration>> {
        common::remain_time_to_live(&self.client, &self.inner.name)
    }

    fn acquire(&self, lease: Option<Duration>, wait: Wait) -> Result<Option<RWriteLockGuard<'_>>> {
        let lease_ms = lease_or_watchdog(&self.client, lease)?;
        let owner = write_owner(&self.client);
        acquire(&self.client, &self.inner.channel, wait, || {
            let sent = Instant::now();
            let answer = self.client.inner.run(&self.inner.name, |c| {
                scripts::write_acquire(c, &self.inner.name, &owner, lease_ms)
            })?;
            let Some(ttl) = answer else {
                if lease.is_some() {
                    self.inner.lease_ms.store(lease_ms, Ordering::Relaxed);
                }
                return Ok(Ok(LockGuard::new(
                    self,
                    HoldState::acquired(
                        &self.client,
                        Renewal::Lock,
                        &self.inner.name,
                        &owner,
                        lease,
                        sent,
                    ),
                )));
            };
            Ok(Err(ttl))
        })
    }

    fn release(&self, owner: &str, hold: Option<&Hold>) -> Result<()> {
        let name = &self.inner.name;
        let outcome = common::release_with_latch(&self.client, name, |c, latch, latch_ms| {
            scripts::write_release(
                c,
                &WriteRelease {
                    hash: name,
                    channel: &self.inner.channel,
                    latch,
                    owner,
                    lease_ms: self.inner.lease_ms.load(Ordering::Relaxed),
                    latch_ms,
                },
            )
        });
        match outcome {
            Ok(released) => {
                if released == Released::Fully {
                    let watchdog_ms = self.client.config().lock_watchdog_timeout.as_millis();
                    self.inner
                        .lease_ms
                        .store(watchdog_ms as u64, Ordering::Relaxed);
                }
                common::settle_release(&self.client, Renewal::Lock, name, owner, hold, released)
            }
            Err(e) => {
                common::after_failed_release(&self.client, Renewal::Lock, name, owner, &e);
                Err(e)
            }
        }
    }
}

/// One read hold of an [`RReadLock`], released when dropped.
///
/// Dropping the guard releases the hold and logs a failure at `warn`; call
/// [`unlock`](LockGuard::unlock) to see the `Result`. Not `Send`: the hold belongs to the
/// thread that took it.
///
/// ```compile_fail
/// fn assert_send<T: Send>(_: T) {}
/// let client = redmutex::Client::open("redis://127.0.0.1/").unwrap();
/// let rw = client.get_read_write_lock("x");
/// assert_send(rw.read_lock().lock().unwrap());
/// ```
pub type RReadLockGuard<'a> = LockGuard<'a, RReadLock>;

impl HeldLock for RReadLock {}

// The sealed trait is unnameable outside the crate; its crate-private types are too.
#[allow(private_interfaces)]
impl sealed::Release for RReadLock {
    const GUARD: &'static str = "RReadLockGuard";

    fn release_hold(&self, hold: &Hold) -> Result<()> {
        self.release(&read_owner(&self.client), Some(hold))
    }

    fn lock_name(&self) -> &str {
        &self.inner.name
    }

    fn lock_client(&self) -> &Client {
        &self.client
    }
}

/// One write hold of an [`RWriteLock`], released when dropped.
///
/// Dropping the guard releases the hold and logs a failure at `warn`; call
/// [`unlock`](LockGuard::unlock) to see the `Result`. Not `Send`.
///
/// ```compile_fail
/// fn assert_send<T: Send>(_: T) {}
/// let client = redmutex::Client::open("redis://127.0.0.1/").unwrap();
/// let rw = client.get_read_write_lock("x");
/// assert_send(rw.write_lock().lock().unwrap());
/// ```
pub type RWriteLockGuard<'a> = LockGuard<'a, RWriteLock>;

impl HeldLock for RWriteLock {}

// The sealed trait is unnameable outside the crate; its crate-private types are too.
#[allow(private_interfaces)]
impl sealed::Release for RWriteLock {
    const GUARD: &'static str = "RWriteLockGuard";

    fn release_hold(&self, hold: &Hold) -> Result<()> {
        self.release(&write_owner(&self.client), Some(hold))
    }

    fn lock_name(&self) -> &str {
        &self.inner.name
    }

    fn lock_client(&self) -> &Client {
        &self.client
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn _assert_send_sync() {
        fn assert<T: Send + Sync>() {}
        assert::<RReadWriteLock>();
        assert::<RReadLock>();
        assert::<RWriteLock>();
        fn assert_sync<T: Sync>() {}
        assert_sync::<RReadLockGuard<'static>>();
        assert_sync::<RWriteLockGuard<'static>>();
    }
}
