//! Redisson's `RCountDownLatch`.

use std::sync::Arc;
use std::time::Duration;

use redis::{Connection, RedisResult};

use crate::clock::Wait;
use crate::core::Core;
use crate::error::{Error, Result};
use crate::protocol::replies::Forced;
use crate::protocol::script::invoke;
use crate::protocol::{hash, names};
use crate::pubsub::{Interest, WakeRule};
use crate::sync::object::Object;
use crate::wait::{self, Attempt};

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
    object: Arc<Object>,
}

impl std::fmt::Debug for RCountDownLatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.object.debug("RCountDownLatch", f)
    }
}

impl RCountDownLatch {
    pub(crate) fn new(core: Arc<Core>, name: String) -> Self {
        let channel = names::latch_channel(&name);
        Self {
            object: Arc::new(Object::new(core, name, channel)),
        }
    }

    /// The latch's name, which is also its Redis key.
    pub fn name(&self) -> &str {
        self.object.name()
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
        self.object
            .run(|c, name, channel, publish| latch_try_set(c, name, channel, count, publish))
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
        self.object
            .run(|c, name, channel, publish| latch_count_down(c, name, channel, publish).map(drop))
    }

    /// The current count (Redisson `getCount()`); 0 when the latch is not counting.
    ///
    /// # Errors
    ///
    /// As [`count_down`](Self::count_down).
    pub fn get_count(&self) -> Result<u64> {
        // Redisson never stores a count below 1; a foreign one counts as open.
        Ok(self.object.count()?.max(0).unsigned_abs())
    }

    /// Waits until the count is zero (Redisson `await()`); returns at once when it is.
    ///
    /// # Errors
    ///
    /// As [`count_down`](Self::count_down); [`Error::Shutdown`] when the client shuts
    /// down meanwhile.
    pub fn wait(&self) -> Result<()> {
        wait::acquire_forever(self.object.core(), self.interest(), || self.open())
    }

    /// Waits at most `timeout` for the count to reach zero (Redisson
    /// `await(timeout, unit)`); true when it did.
    ///
    /// # Errors
    ///
    /// As [`wait`](Self::wait).
    pub fn wait_for(&self, timeout: Duration) -> Result<bool> {
        let wait = Wait::from_duration(timeout);
        let opened =
            wait::acquire_or_wait(self.object.core(), self.interest(), wait, || self.open())?;
        Ok(opened.is_some())
    }

    /// Deletes the latch and publishes `"1"` (Redisson `delete()`), which wakes nobody:
    /// waiters keep waiting for a count that reaches zero. True when there was one.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn delete(&self) -> Result<bool> {
        let deleted = self.object.run(|c, name, channel, publish| {
            hash::delete_and_publish(c, [name, channel], LATCH_NEW_COUNT_MESSAGE, publish)
        })?;
        Ok(deleted == Forced::Deleted)
    }

    /// Where a waiter sleeps: the latch's channel, opened by its "0".
    fn interest(&self) -> Interest<'_> {
        Interest {
            channel: self.object.channel(),
            rule: WakeRule::Latch,
        }
    }

    /// One look at the count, Redisson's await step. After the first look the waiter is
    /// subscribed, and the count is read again only after the subscription is confirmed,
    /// so a "0" published after that read cannot be missed (pubsub.rs).
    fn open(&self) -> Result<Attempt<()>> {
        Ok(if self.get_count()? == 0 {
            Attempt::Done(())
        } else {
            Attempt::RetryBy(None)
        })
    }
}
impl crate::sync::expiry::sealed::Keys for RCountDownLatch {
    fn expiry_target(&self) -> crate::sync::expiry::sealed::Target<'_> {
        crate::sync::expiry::sealed::Target {
            core: self.object.core(),
            keys: vec![self.object.name()],
        }
    }
}

// ---- Redis scripts ------------------------------------------------------------

crate::protocol::script::scripts! {
    LATCH_TRY_SET => "latch/latch_try_set.lua",
    LATCH_COUNT_DOWN => "latch/latch_count_down.lua",
}

/// The count-down latch's messages: the count reached zero, and a new count was set.
pub(crate) const LATCH_ZERO_MESSAGE: &str = "0";
/// See [`LATCH_ZERO_MESSAGE`].
pub(crate) const LATCH_NEW_COUNT_MESSAGE: &str = "1";

/// Sets the count unless one is set; true when it was set.
pub(crate) fn latch_try_set(
    conn: &mut Connection,
    name: &str,
    channel: &str,
    count: u64,
    publish: &str,
) -> RedisResult<bool> {
    invoke(
        LATCH_TRY_SET
            .key(name)
            .key(channel)
            .arg(LATCH_NEW_COUNT_MESSAGE)
            .arg(count)
            .arg(publish),
        conn,
    )
}

/// Counts down by one; returns the count afterwards.
pub(crate) fn latch_count_down(
    conn: &mut Connection,
    name: &str,
    channel: &str,
    publish: &str,
) -> RedisResult<i64> {
    invoke(
        LATCH_COUNT_DOWN
            .key(name)
            .key(channel)
            .arg(LATCH_ZERO_MESSAGE)
            .arg(publish),
        conn,
    )
}
