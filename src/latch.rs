//! Redisson's `RCountDownLatch`.

use std::sync::Arc;
use std::time::Duration;

use crate::client::Client;
use crate::common::{self, Attempt, Wait};
use crate::error::{Error, Result};
use crate::names;
use crate::pubsub::WakeRule;
use crate::scripts;

/// A distributed count-down latch, wire-compatible with Redisson's `RCountDownLatch`.
///
/// The latch is the Redis string `name` holding the count. [`try_set_count`] sets it
/// once; each [`count_down`] takes one off, and the one that reaches zero deletes the key
/// and publishes `"0"` on `redisson_countdownlatch__channel__{name}`, which opens every
/// waiter at once, in this process or in any Redisson client. Setting a new count
/// publishes `"1"`, which wakes nobody. Redisson always wraps the name in braces in that
/// channel, even a name that has some, and so does redmutex.
///
/// Redisson's `await()` is [`wait`](Self::wait) here (`await` is a Rust keyword) and
/// `await(timeout, unit)` is [`wait_for`](Self::wait_for). Waiters sleep until the open
/// message or their deadline; like Redisson's, they do not poll.
///
/// [`try_set_count`]: Self::try_set_count
/// [`count_down`]: Self::count_down
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
///
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let ready = client.get_count_down_latch("workers-ready");
/// ready.try_set_count(3)?;
/// // ... in each of three workers: ready.count_down()?;
/// if ready.wait_for(Duration::from_secs(30))? {
///     // all three reported
/// }
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Clone)]
pub struct RCountDownLatch {
    client: Client,
    inner: Arc<LatchInner>,
}

struct LatchInner {
    name: String,
    channel: String,
}

impl std::fmt::Debug for RCountDownLatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RCountDownLatch")
            .field("name", &self.inner.name)
            .field("client", &self.client.id())
            .finish()
    }
}

impl RCountDownLatch {
    pub(crate) fn new(client: Client, name: String) -> Self {
        Self {
            inner: Arc::new(LatchInner {
                channel: names::latch_channel(&name),
                name,
            }),
            client,
        }
    }

    /// The latch's name, which is also its Redis key.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Sets the count unless the latch is already counting (Redisson `trySetCount`);
    /// true when it was set. A count of 0 sets nothing that anyone waits for.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for a count above `i64::MAX`; Redis, pool and shutdown errors.
    pub fn try_set_count(&self, count: u64) -> Result<bool> {
        if i64::try_from(count).is_err() {
            return Err(Error::Config(format!(
                "a latch count must not exceed {}",
                i64::MAX
            )));
        }
        self.client.inner.run(&self.inner.name, |c| {
            scripts::latch_try_set(c, &self.inner.name, &self.inner.channel, count)
        })
    }

    /// Takes one off the count (Redisson `countDown()`). The count-down that reaches zero
    /// deletes the latch and opens every waiter; on a latch that is not counting it does
    /// nothing.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors; [`Error::WrongType`] when the key is not a
    /// number.
    pub fn count_down(&self) -> Result<()> {
        // Not retried: a count-down whose reply was lost may have happened.
        self.client.inner.run(&self.inner.name, |c| {
            scripts::latch_count_down(c, &self.inner.name, &self.inner.channel).map(drop)
        })
    }

    /// The current count (Redisson `getCount()`); 0 when the latch is not counting.
    ///
    /// # Errors
    ///
    /// As [`count_down`](Self::count_down).
    pub fn get_count(&self) -> Result<u64> {
        // Redisson never stores a count below 1; a foreign one counts as open.
        Ok(common::get_count(&self.client, &self.inner.name)?
            .max(0)
            .unsigned_abs())
    }

    /// Waits until the count is zero (Redisson `await()`); returns at once when it is.
    ///
    /// # Errors
    ///
    /// As [`count_down`](Self::count_down); [`Error::Shutdown`] when the client shuts
    /// down meanwhile.
    pub fn wait(&self) -> Result<()> {
        self.wait_until(Wait::Forever)?;
        Ok(())
    }

    /// Waits at most `timeout` for the count to reach zero (Redisson
    /// `await(timeout, unit)`); true when it did.
    ///
    /// # Errors
    ///
    /// As [`wait`](Self::wait).
    pub fn wait_for(&self, timeout: Duration) -> Result<bool> {
        self.wait_until(Wait::from_duration(timeout))
    }

    /// Deletes the latch and publishes `"1"` (Redisson `delete()`), which wakes nobody:
    /// waiters keep waiting for a count that reaches zero. True when there was one.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn delete(&self) -> Result<bool> {
        self.client.inner.run(&self.inner.name, |c| {
            scripts::latch_delete(c, &self.inner.name, &self.inner.channel)
        })
    }

    /// Redisson's await loop: open already? Else subscribe, and after each signal (the
    /// subscription's confirmation first) read the count again.
    fn wait_until(&self, wait: Wait) -> Result<bool> {
        if self.get_count()? == 0 {
            return Ok(true);
        }
        // The count is read again only after the subscription is confirmed, so a "0"
        // published after that read cannot be missed (pubsub.rs).
        let subscription = self
            .client
            .inner
            .listener
            .subscribe(&self.inner.channel, WakeRule::Latch)?;
        let opened = common::wait_turns(&subscription, wait.deadline(), None, || {
            Ok(if self.get_count()? == 0 {
                Attempt::Done(())
            } else {
                Attempt::RetryBy(None)
            })
        })?;
        Ok(opened.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn _assert_send_sync() {
        fn assert<T: Send + Sync>() {}
        assert::<RCountDownLatch>();
    }
}
