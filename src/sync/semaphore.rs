//! Redisson's counting semaphore `RSemaphore` and the guard of acquired permits.

use std::sync::Arc;
use std::time::Duration;

use redis::{Connection, RedisResult};

use crate::clock::{self, Wait};
use crate::core::Core;
use crate::error::Result;
use crate::protocol::names;
use crate::protocol::script::invoke;
use crate::pubsub::{Interest, WakeRule};
use crate::sync::object::{Object, java_int};
use crate::wait::{self, Attempt};

/// A distributed counting semaphore, wire-compatible with Redisson's `RSemaphore`.
///
/// The semaphore is the Redis string `name` holding the number of available permits;
/// it does not exist (0 permits) until [`try_set_permits`](Self::try_set_permits) or
/// [`add_permits`](Self::add_permits) creates it. A release publishes the new count on
/// `redisson_sc:{name}`, which wakes waiters in this process and in every Redisson
/// client. Here a message wakes every waiting thread of the client, and each retries
/// once: the number in a message is not what is free when the waiter retries, so a
/// waiter is never left asleep with enough permits for it free. Waiters sleep until a
/// message or their deadline; like Redisson's, they do not poll.
///
/// Permits are not owned: any thread or process may release them. Acquiring returns an
/// [`RSemaphorePermits`] guard that gives its permits back when dropped, which is what a
/// Rust caller usually wants; [`RSemaphorePermits::detach`] keeps them taken, to be
/// returned later with [`release`](Self::release) by anyone, as in Redisson.
///
/// # Examples
///
/// ```no_run
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let slots = client.get_semaphore("render-slots");
/// slots.try_set_permits(4)?; // no-op if it exists already
/// let permit = slots.acquire()?;
/// // ... at most four of these run at once, across all processes ...
/// permit.release()?; // or drop it
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Clone)]
pub struct RSemaphore {
    object: Arc<Object>,
}

impl std::fmt::Debug for RSemaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.object.debug("RSemaphore", f)
    }
}

impl RSemaphore {
    pub(crate) fn new(core: Arc<Core>, name: String) -> Self {
        let channel = names::semaphore_channel(&name);
        Self {
            object: Arc::new(Object::new(core, name, channel)),
        }
    }

    /// The semaphore's name, which is also its Redis key.
    pub fn name(&self) -> &str {
        self.object.name()
    }

    /// Waits as long as it takes for one permit (Redisson `acquire()`).
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`](crate::Error::WrongType) when the key is not a
    /// number.
    pub fn acquire(&self) -> Result<RSemaphorePermits> {
        self.acquire_many(1)
    }

    /// Waits as long as it takes for `permits` permits, taken all at once (Redisson
    /// `acquire(permits)`). Zero permits succeed at once without asking Redis.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub fn acquire_many(&self, permits: u32) -> Result<RSemaphorePermits> {
        if permits == 0 {
            return Ok(self.guard(0));
        }
        wait::acquire_forever(self.object.core(), self.interest(), || {
            self.attempt(permits)
        })
    }

    /// One attempt at one permit (Redisson `tryAcquire()`); `Ok(None)` when none is
    /// available.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub fn try_acquire(&self) -> Result<Option<RSemaphorePermits>> {
        self.take(1, Wait::No)
    }

    /// One attempt at `permits` permits (Redisson `tryAcquire(permits)`).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub fn try_acquire_many(&self, permits: u32) -> Result<Option<RSemaphorePermits>> {
        self.take(permits, Wait::No)
    }

    /// Waits at most `wait` for one permit (Redisson `tryAcquire(waitTime, unit)`).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub fn try_acquire_for(&self, wait: Duration) -> Result<Option<RSemaphorePermits>> {
        self.take(1, Wait::from_duration(wait))
    }

    /// Waits at most `wait` for `permits` permits (Redisson
    /// `tryAcquire(permits, waitTime, unit)`).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub fn try_acquire_many_for(
        &self,
        permits: u32,
        wait: Duration,
    ) -> Result<Option<RSemaphorePermits>> {
        self.take(permits, Wait::from_duration(wait))
    }

    /// Returns one permit (Redisson `release()`), whoever took it; for permits whose guard
    /// was [forgotten](RSemaphorePermits::forget), or that another process took.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`](crate::Error::WrongType) when the key is not a
    /// number.
    pub fn release(&self) -> Result<()> {
        self.release_many(1)
    }

    /// Returns `permits` permits (Redisson `release(permits)`) and publishes the new
    /// count. Nothing checks that they were taken: releasing more than was acquired
    /// raises the count, as in Redisson. Zero permits do nothing.
    ///
    /// # Errors
    ///
    /// As [`release`](Self::release); [`Error::Config`](crate::Error::Config), with
    /// nothing changed, when the count would pass 2³¹−1, which Redisson clients (Java
    /// `int`) cannot read.
    pub fn release_many(&self, permits: u32) -> Result<()> {
        if permits == 0 {
            return Ok(());
        }
        // The verification harness's seeded bug (test-only feature, inert unless its
        // environment variable is set): every release gives back twice its permits, so
        // the semaphore comes to let more holders in than it has permits.
        #[cfg(feature = "verify-broken-semaphore-double-release")]
        let permits = if crate::verify_broken::active("semaphore-double-release") {
            permits.saturating_mul(2)
        } else {
            permits
        };
        // Not retried: a release whose reply was lost may have happened, and a second one
        // would add permits that never existed (Redisson does not retry it either).
        self.object.run(|c, name, channel, publish| {
            semaphore_release(c, name, channel, u64::from(permits), publish, false).map(drop)
        })
    }

    /// Returns `permits` permits only if the semaphore exists (Redisson
    /// `releaseIfExists`); true when it did.
    ///
    /// # Errors
    ///
    /// As [`release_many`](Self::release_many).
    pub fn release_if_exists(&self, permits: u32) -> Result<bool> {
        let released = self.object.run(|c, name, channel, publish| {
            semaphore_release(c, name, channel, u64::from(permits), publish, true)
        })?;
        Ok(released.is_some())
    }

    /// The number of available permits (`GET`; 0 when the semaphore does not exist). It
    /// can be negative after [`add_permits`](Self::add_permits) with a negative number.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`](crate::Error::WrongType) when the key is not a
    /// number.
    pub fn available_permits(&self) -> Result<i64> {
        self.object.count()
    }

    /// Takes every available permit and returns how many there were (Redisson
    /// `drainPermits()`).
    ///
    /// # Errors
    ///
    /// As [`available_permits`](Self::available_permits).
    pub fn drain_permits(&self) -> Result<i64> {
        self.object.run(|c, name, _, _| semaphore_drain(c, name))
    }

    /// Creates the semaphore with `permits` permits unless it exists (Redisson
    /// `trySetPermits`); true when it was created. The count is published, so waiters
    /// wake.
    ///
    /// # Errors
    ///
    /// [`Error::Config`](crate::Error::Config) for more than 2³¹−1 permits (a Java
    /// `int`, which is what Redisson clients read); Redis, pool and shutdown errors.
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.try_set(permits, None)
    }

    /// As [`try_set_permits`](Self::try_set_permits), with the semaphore deleted after
    /// `ttl` (Redisson `trySetPermits(permits, timeToLive)`).
    ///
    /// # Errors
    ///
    /// As [`try_set_permits`](Self::try_set_permits); [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a zero
    /// or absurd time to live.
    pub fn try_set_permits_with_ttl(&self, permits: u32, ttl: Duration) -> Result<bool> {
        let ttl_ms = clock::duration_ms("ttl", ttl)?;
        self.try_set(permits, Some(ttl_ms))
    }

    /// Adds `permits` permits, or takes them away when negative (Redisson
    /// `addPermits`), and publishes the new count when it is positive. A missing
    /// semaphore counts as 0. This rewrites the key, which drops any time to live it had,
    /// as in Redisson. Redisson also publishes a count of 0 or less, which wakes nobody
    /// and makes its own listener throw on a negative one; redmutex does not.
    ///
    /// # Errors
    ///
    /// As [`available_permits`](Self::available_permits);
    /// [`Error::Config`](crate::Error::Config), with nothing changed, when the count would
    /// leave Java's `int` range (−2³¹ to 2³¹−1), which Redisson clients cannot read.
    pub fn add_permits(&self, permits: i64) -> Result<()> {
        self.object.run(|c, name, channel, publish| {
            semaphore_add(c, name, channel, permits, publish).map(drop)
        })
    }

    /// Takes `permits` permits away, possibly below zero. Redisson has no
    /// `reducePermits`: its clients call `addPermits(-n)`, which is what this does.
    ///
    /// # Errors
    ///
    /// As [`add_permits`](Self::add_permits).
    pub fn reduce_permits(&self, permits: u32) -> Result<()> {
        self.add_permits(-i64::from(permits))
    }

    /// Deletes the semaphore (`DEL`); true when it existed. Waiters are not told.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn delete(&self) -> Result<bool> {
        self.object
            .run(|c, name, _, _| redis::cmd("DEL").arg(name).query(c))
    }

    fn try_set(&self, permits: u32, ttl_ms: Option<u64>) -> Result<bool> {
        let permits = java_int(permits)?;
        self.object.run(|c, name, channel, publish| {
            semaphore_try_set(c, name, channel, permits, ttl_ms, publish)
        })
    }

    fn guard(&self, permits: u32) -> RSemaphorePermits {
        RSemaphorePermits {
            semaphore: self.clone(),
            permits,
            done: false,
        }
    }

    /// Where a waiter sleeps: the semaphore's channel, where every release wakes every
    /// waiter of this client to retry, whatever it needs.
    fn interest(&self) -> Interest<'_> {
        Interest {
            channel: self.object.channel(),
            rule: WakeRule::Semaphore,
        }
    }

    /// One try. A failure waits for a release message only: a semaphore has no holder
    /// whose lease could end, so nothing bounds the sleep but the deadline.
    fn attempt(&self, permits: u32) -> Result<Attempt<RSemaphorePermits>> {
        let taken = self
            .object
            .run(|c, name, _, _| semaphore_try_acquire(c, name, u64::from(permits)))?;
        Ok(if taken {
            Attempt::Done(self.guard(permits))
        } else {
            Attempt::RetryBy(None)
        })
    }

    /// Redisson's semaphore waiting loop; see [`wait::acquire_or_wait`].
    fn take(&self, permits: u32, wait: Wait) -> Result<Option<RSemaphorePermits>> {
        if permits == 0 {
            return Ok(Some(self.guard(0)));
        }
        wait::acquire_or_wait(self.object.core(), self.interest(), wait, || {
            self.attempt(permits)
        })
    }
}

impl crate::sync::expiry::sealed::Keys for RSemaphore {
    fn expiry_target(&self) -> crate::sync::expiry::sealed::Target<'_> {
        crate::sync::expiry::sealed::Target {
            core: self.object.core(),
            keys: vec![self.object.name()],
        }
    }
}

/// Permits taken from an [`RSemaphore`], given back when dropped.
///
/// Dropping the guard releases its permits and logs a failure at `warn` (the permits are
/// then lost to the semaphore until someone adds them back: semaphore permits never
/// expire). Call [`release`](Self::release) to see the `Result`, or
/// [`detach`](Self::detach) to keep the permits taken. Permits belong to nobody, so the
/// guard may move to another thread. It owns a handle to its semaphore (a cheap clone).
///
/// # Examples
///
/// ```no_run
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let pool = client.get_semaphore("db-connections");
/// pool.try_set_permits(10)?;
/// let permits = pool.acquire_many(3)?; // waits until 3 are free
/// assert_eq!(permits.permits(), 3);
/// // Permits belong to nobody: the guard may move to another thread.
/// std::thread::spawn(move || permits.release()).join().unwrap()?;
/// # Ok::<(), redmutex::Error>(())
/// ```
#[must_use = "dropping the guard returns the permits at once: bind it (`let permits = semaphore.acquire()?;`) while they are used"]
#[clippy::has_significant_drop]
pub struct RSemaphorePermits {
    semaphore: RSemaphore,
    permits: u32,
    /// Released or forgotten already.
    done: bool,
}

impl std::fmt::Debug for RSemaphorePermits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RSemaphorePermits")
            .field("semaphore", &self.semaphore.name())
            .field("permits", &self.permits)
            .finish()
    }
}

impl RSemaphorePermits {
    /// How many permits this guard holds.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// Gives the permits back and publishes the new count.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; the permits may or may not have been returned
    /// when the reply was lost.
    pub fn release(mut self) -> Result<()> {
        self.done = true;
        self.semaphore.release_many(self.permits)
    }

    /// Keeps the permits taken and gives up the guard; return them later with
    /// [`RSemaphore::release_many`], from any thread or process. The same verb as
    /// [`LockGuard::detach`](crate::LockGuard::detach).
    pub fn detach(mut self) {
        self.done = true;
    }

    /// The old name of [`detach`](Self::detach).
    #[deprecated(since = "0.1.0", note = "use `detach`, the verb every guard uses")]
    pub fn forget(self) {
        self.detach();
    }

    /// The semaphore the permits came from.
    pub fn semaphore(&self) -> &RSemaphore {
        &self.semaphore
    }
}

impl Drop for RSemaphorePermits {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Err(e) = self.semaphore.release_many(self.permits) {
            log::warn!(
                "redmutex: returning {} permit(s) to semaphore {:?} on drop failed: {e}",
                self.permits,
                self.semaphore.name()
            );
        }
    }
}

// ---- Redis scripts ------------------------------------------------------------

crate::protocol::script::scripts! {
    SEMAPHORE_TRY_ACQUIRE => "semaphore/semaphore_try_acquire.lua",
    SEMAPHORE_RELEASE => "semaphore/semaphore_release.lua",
    SEMAPHORE_DRAIN => "semaphore/semaphore_drain.lua",
    SEMAPHORE_TRY_SET => "semaphore/semaphore_try_set.lua",
    SEMAPHORE_ADD => "semaphore/semaphore_add.lua",
}

/// Takes `permits` if available; true when taken.
pub(crate) fn semaphore_try_acquire(
    conn: &mut Connection,
    name: &str,
    permits: u64,
) -> RedisResult<bool> {
    invoke(SEMAPHORE_TRY_ACQUIRE.key(name).arg(permits), conn)
}

/// Returns `permits` and publishes the new count, which it returns; `None` when
/// `only_existing` and there is no semaphore. A count beyond Java's `int` is refused
/// (`PERMITS_OUT_OF_RANGE`).
pub(crate) fn semaphore_release(
    conn: &mut Connection,
    name: &str,
    channel: &str,
    permits: u64,
    publish: &str,
    only_existing: bool,
) -> RedisResult<Option<i64>> {
    invoke(
        SEMAPHORE_RELEASE
            .key(name)
            .key(channel)
            .arg(permits)
            .arg(publish)
            .arg(if only_existing { "1" } else { "0" }),
        conn,
    )
}

/// Takes every available permit; returns how many there were.
pub(crate) fn semaphore_drain(conn: &mut Connection, name: &str) -> RedisResult<i64> {
    invoke(&SEMAPHORE_DRAIN.key(name), conn)
}

/// Creates the semaphore with `permits` unless it exists; true when created.
pub(crate) fn semaphore_try_set(
    conn: &mut Connection,
    name: &str,
    channel: &str,
    permits: u64,
    ttl_ms: Option<u64>,
    publish: &str,
) -> RedisResult<bool> {
    invoke(
        SEMAPHORE_TRY_SET
            .key(name)
            .key(channel)
            .arg(permits)
            .arg(publish)
            .arg(ttl_ms.unwrap_or(0)),
        conn,
    )
}

/// Adds `delta` permits (negative: takes them); returns the new count. A count outside
/// Java's `int` is refused (`PERMITS_OUT_OF_RANGE`).
pub(crate) fn semaphore_add(
    conn: &mut Connection,
    name: &str,
    channel: &str,
    delta: i64,
    publish: &str,
) -> RedisResult<i64> {
    invoke(
        SEMAPHORE_ADD.key(name).key(channel).arg(delta).arg(publish),
        conn,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn _assert_send_sync() {
        fn assert<T: Send + Sync>() {}
        assert::<RSemaphore>();
        assert::<RSemaphorePermits>();
    }
}
