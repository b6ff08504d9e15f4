//! Redisson's counting semaphore `RSemaphore` and the guard of acquired permits.

use std::sync::Arc;
use std::time::Duration;

use crate::client::Client;
use crate::common::{self, Attempt, Wait};
use crate::error::{Error, Result};
use crate::names;
use crate::pubsub::WakeRule;
use crate::scripts;

/// A distributed counting semaphore, wire-compatible with Redisson's `RSemaphore`.
///
/// The semaphore is the Redis string `name` holding the number of available permits;
/// it does not exist (0 permits) until [`try_set_permits`](Self::try_set_permits) or
/// [`add_permits`](Self::add_permits) creates it. A release publishes the new count on
/// `redisson_sc:{name}`, and a count of n wakes as many waiters as n permits can serve,
/// in this process or in any Redisson client. Waiters sleep until such a message or
/// their deadline; like Redisson's, they do not poll.
///
/// Permits are not owned: any thread or process may release them. Acquiring returns an
/// [`RSemaphorePermits`] guard that gives its permits back when dropped, which is what a
/// Rust caller usually wants; [`RSemaphorePermits::forget`] keeps them taken, to be
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
    client: Client,
    inner: Arc<SemaphoreInner>,
}

struct SemaphoreInner {
    name: String,
    channel: String,
}

impl std::fmt::Debug for RSemaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RSemaphore")
            .field("name", &self.inner.name)
            .field("client", &self.client.id())
            .finish()
    }
}

impl RSemaphore {
    pub(crate) fn new(client: Client, name: String) -> Self {
        Self {
            inner: Arc::new(SemaphoreInner {
                channel: names::semaphore_channel(&name),
                name,
            }),
            client,
        }
    }

    /// The semaphore's name, which is also its Redis key.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Waits as long as it takes for one permit (Redisson `acquire()`).
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`] when the key is not a
    /// number.
    pub fn acquire(&self) -> Result<RSemaphorePermits<'_>> {
        self.acquire_many(1)
    }

    /// Waits as long as it takes for `permits` permits, taken all at once (Redisson
    /// `acquire(permits)`). Zero permits succeed at once without asking Redis.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub fn acquire_many(&self, permits: u32) -> Result<RSemaphorePermits<'_>> {
        self.take(permits, Wait::Forever)
            .and_then(|p| p.ok_or(Error::Shutdown))
    }

    /// One attempt at one permit (Redisson `tryAcquire()`); `Ok(None)` when none is
    /// available.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub fn try_acquire(&self) -> Result<Option<RSemaphorePermits<'_>>> {
        self.take(1, Wait::No)
    }

    /// One attempt at `permits` permits (Redisson `tryAcquire(permits)`).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub fn try_acquire_many(&self, permits: u32) -> Result<Option<RSemaphorePermits<'_>>> {
        self.take(permits, Wait::No)
    }

    /// Waits at most `wait` for one permit (Redisson `tryAcquire(waitTime, unit)`).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub fn try_acquire_for(&self, wait: Duration) -> Result<Option<RSemaphorePermits<'_>>> {
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
    ) -> Result<Option<RSemaphorePermits<'_>>> {
        self.take(permits, Wait::from_duration(wait))
    }

    /// Returns one permit (Redisson `release()`), whoever took it; for permits whose guard
    /// was [forgotten](RSemaphorePermits::forget), or that another process took.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`] when the key is not a
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
    /// As [`release`](Self::release).
    pub fn release_many(&self, permits: u32) -> Result<()> {
        if permits == 0 {
            return Ok(());
        }
        // Not retried: a release whose reply was lost may have happened, and a second one
        // would add permits that never existed (Redisson does not retry it either).
        self.client.inner.run(&self.inner.name, |c| {
            scripts::semaphore_release(c, &self.inner.name, &self.inner.channel, u64::from(permits))
                .map(drop)
        })
    }

    /// Returns `permits` permits only if the semaphore exists (Redisson
    /// `releaseIfExists`); true when it did.
    ///
    /// # Errors
    ///
    /// As [`release`](Self::release).
    pub fn release_if_exists(&self, permits: u32) -> Result<bool> {
        self.client.inner.run(&self.inner.name, |c| {
            scripts::semaphore_release_if_exists(
                c,
                &self.inner.name,
                &self.inner.channel,
                u64::from(permits),
            )
        })
    }

    /// The number of available permits (`GET`; 0 when the semaphore does not exist). It
    /// can be negative after [`add_permits`](Self::add_permits) with a negative number.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`] when the key is not a
    /// number.
    pub fn available_permits(&self) -> Result<i64> {
        common::get_count(&self.client, &self.inner.name)
    }

    /// Takes every available permit and returns how many there were (Redisson
    /// `drainPermits()`).
    ///
    /// # Errors
    ///
    /// As [`available_permits`](Self::available_permits).
    pub fn drain_permits(&self) -> Result<i64> {
        self.client.inner.run(&self.inner.name, |c| {
            scripts::semaphore_drain(c, &self.inner.name)
        })
    }

    /// Creates the semaphore with `permits` permits unless it exists (Redisson
    /// `trySetPermits`); true when it was created. The count is published, so waiters
    /// wake.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.try_set(permits, None)
    }

    /// As [`try_set_permits`](Self::try_set_permits), with the semaphore deleted after
    /// `ttl` (Redisson `trySetPermits(permits, timeToLive)`).
    ///
    /// # Errors
    ///
    /// As [`try_set_permits`](Self::try_set_permits); [`Error::Config`] for a zero or
    /// absurd time to live.
    pub fn try_set_permits_with_ttl(&self, permits: u32, ttl: Duration) -> Result<bool> {
        let ttl_ms = common::lease_ms(ttl)?;
        self.try_set(permits, Some(ttl_ms))
    }

    /// Adds `permits` permits, or takes them away when negative, and publishes the new
    /// count (Redisson `addPermits`). A missing semaphore counts as 0. This rewrites the
    /// key, which drops any time to live it had, as in Redisson.
    ///
    /// # Errors
    ///
    /// As [`available_permits`](Self::available_permits).
    pub fn add_permits(&self, permits: i64) -> Result<()> {
        self.client.inner.run(&self.inner.name, |c| {
            scripts::semaphore_add(c, &self.inner.name, &self.inner.channel, permits).map(drop)
        })
    }

    /// Takes `permits` permits away, possibly below zero (Redisson `reducePermits`).
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
        self.client.inner.run(&self.inner.name, |c| {
            redis::cmd("DEL").arg(&self.inner.name).query(c)
        })
    }

    fn try_set(&self, permits: u32, ttl_ms: Option<u64>) -> Result<bool> {
        self.client.inner.run(&self.inner.name, |c| {
            scripts::semaphore_try_set(
                c,
                &self.inner.name,
                &self.inner.channel,
                u64::from(permits),
                ttl_ms,
            )
        })
    }

    fn guard(&self, permits: u32) -> RSemaphorePermits<'_> {
        RSemaphorePermits {
            semaphore: self,
            permits,
            done: false,
        }
    }

    fn attempt(&self, permits: u32) -> Result<bool> {
        self.client.inner.run(&self.inner.name, |c| {
            scripts::semaphore_try_acquire(c, &self.inner.name, u64::from(permits))
        })
    }

    /// Redisson's semaphore waiting loop: try; if short, subscribe, then sleep until a
    /// release message or the deadline and try again. No TTL bounds the sleep: a
    /// semaphore has no holder whose lease could end.
    fn take(&self, permits: u32, wait: Wait) -> Result<Option<RSemaphorePermits<'_>>> {
        if permits == 0 || self.attempt(permits)? {
            return Ok(Some(self.guard(permits)));
        }
        if matches!(wait, Wait::No) {
            return Ok(None);
        }
        // Subscribed before the next attempt, so no release after that attempt can be
        // missed (pubsub.rs); the waiter needs `permits`, so a count too small to serve it
        // wakes others instead.
        let subscription = self.client.inner.listener.subscribe_needing(
            &self.inner.channel,
            WakeRule::Semaphore,
            u64::from(permits),
        )?;
        common::wait_turns(&subscription, wait.deadline(), None, || {
            Ok(if self.attempt(permits)? {
                Attempt::Done(self.guard(permits))
            } else {
                Attempt::RetryBy(None)
            })
        })
    }
}

/// Permits taken from an [`RSemaphore`], given back when dropped.
///
/// Dropping the guard releases its permits and logs a failure at `warn` (the permits are
/// then lost to the semaphore until someone adds them back: semaphore permits never
/// expire). Call [`release`](Self::release) to see the `Result`, or
/// [`forget`](Self::forget) to keep the permits taken. Permits belong to nobody, so the
/// guard may move to another thread.
#[must_use = "if unused the permits are released immediately"]
#[clippy::has_significant_drop]
pub struct RSemaphorePermits<'a> {
    semaphore: &'a RSemaphore,
    permits: u32,
    /// Released or forgotten already.
    done: bool,
}

impl std::fmt::Debug for RSemaphorePermits<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RSemaphorePermits")
            .field("semaphore", &self.semaphore.name())
            .field("permits", &self.permits)
            .finish()
    }
}

impl RSemaphorePermits<'_> {
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
    /// [`RSemaphore::release_many`], from any thread or process.
    pub fn forget(mut self) {
        self.done = true;
    }

    /// The semaphore the permits came from.
    pub fn semaphore(&self) -> &RSemaphore {
        self.semaphore
    }
}

impl Drop for RSemaphorePermits<'_> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn _assert_send_sync() {
        fn assert<T: Send + Sync>() {}
        assert::<RSemaphore>();
        assert::<RSemaphorePermits<'static>>();
    }
}
