//! Leader election over one lock, in the shape of Curator's `LeaderLatch`: of all the
//! processes that ask, one leads at a time; the leader learns at once when its
//! leadership is lost and must step down; when it dies, another takes over within the
//! lease.

use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};

use crate::error::Result;
use crate::hold::Loss;
use crate::lock::{RLock, RLockGuard};

/// One candidate for leadership of `name`; from [`Client::leader`](crate::Client::leader).
///
/// Leadership is a hold of the [`RLock`] `name` taken under the watchdog, so a leader
/// keeps leading while its process runs and renews, and a leader that dies or freezes
/// loses it when its lease (the client's
/// [`lock_watchdog_timeout`](crate::Config::lock_watchdog_timeout)) runs out; then the
/// next candidate takes over. A Redisson service joins the same election with
/// `redisson.getLock(name).lock()`.
///
/// Leadership belongs to the thread that won it, as the lock's holds do, so
/// [`Leadership`] is not `Send`. A thread that leads and asks again holds the lock twice;
/// it leads until both are released.
///
/// ```no_run
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let latch = client.leader("leader:billing");
/// loop {
///     let leadership = latch.await_leadership()?;
///     // Lead until told otherwise; a real leader works here, checking `is_leader()`
///     // before each step that must not run twice.
///     let loss = leadership.lost().recv();
///     eprintln!("leadership lost ({loss:?}); stepping down");
///     drop(leadership);
/// }
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct LeaderLatch {
    lock: RLock,
}

impl LeaderLatch {
    pub(crate) fn new(lock: RLock) -> Self {
        Self { lock }
    }

    /// The election's name: the Redis key of its lock.
    pub fn name(&self) -> &str {
        self.lock.name()
    }

    /// Waits as long as it takes, then leads (Curator `await()`).
    ///
    /// # Errors
    ///
    /// As [`RLock::lock`].
    pub fn await_leadership(&self) -> Result<Leadership> {
        self.lock.lock().map(Leadership::new)
    }

    /// Waits at most `wait` to lead (Curator `await(timeout)`); `Ok(None)` when another
    /// candidate still leads.
    ///
    /// # Errors
    ///
    /// As [`RLock::try_lock_for`].
    pub fn await_leadership_for(&self, wait: Duration) -> Result<Option<Leadership>> {
        Ok(self.lock.try_lock_for(wait)?.map(Leadership::new))
    }

    /// Leads if nobody does now, without waiting.
    ///
    /// # Errors
    ///
    /// As [`RLock::try_lock`].
    pub fn try_lead(&self) -> Result<Option<Leadership>> {
        Ok(self.lock.try_lock()?.map(Leadership::new))
    }

    /// Whether some candidate leads now (Redis's view; it may change at once).
    ///
    /// # Errors
    ///
    /// As [`RLock::is_locked`].
    pub fn has_leader(&self) -> Result<bool> {
        self.lock.is_locked()
    }
}

/// This thread's leadership, given up when dropped (Curator `close()`).
///
/// [`lost`](Self::lost) fires the moment the watchdog finds the lock gone or cannot
/// renew it in time, and [`is_leader`](Self::is_leader) turns false without a round trip
/// even in a process that was frozen past its lease: check it before every action only
/// the leader may take, and step down when it says no.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
///
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let latch = client.leader("leader:billing");
/// if let Some(leadership) = latch.await_leadership_for(Duration::from_secs(10))? {
///     while leadership.is_leader() {
///         // ... one step that only the leader may take ...
///         if leadership.wait_lost(Duration::from_millis(100)).is_some() {
///             break; // renewal failed or the lease ran out: stop at once
///         }
///     }
///     leadership.step_down()?;
/// }
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Debug)]
#[must_use = "dropping the leadership steps down at once"]
pub struct Leadership {
    guard: RLockGuard,
}

impl Leadership {
    fn new(guard: RLockGuard) -> Self {
        Self { guard }
    }

    /// Whether this thread still leads, as far as this process knows: false once the
    /// hold is known or presumed lost (see [`LockGuard::is_lost`](crate::LockGuard::is_lost)).
    pub fn is_leader(&self) -> bool {
        !self.guard.is_lost()
    }

    /// A channel that receives one [`Loss`] when leadership is lost (at once if it is
    /// already).
    pub fn lost(&self) -> Receiver<Loss> {
        self.guard.loss_signal()
    }

    /// Waits at most `timeout` for leadership to be lost: `Some(loss)` when it was, else
    /// `None` (still leading). A leader's main loop can do one step of work per call.
    pub fn wait_lost(&self, timeout: Duration) -> Option<Loss> {
        match self.lost().recv_timeout(timeout) {
            Ok(loss) => Some(loss),
            // The local rule also covers what the watchdog has not said yet (a frozen
            // process that just woke up).
            Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {
                self.guard.loss()
            }
        }
    }

    /// Gives up leadership so that another candidate can take over now.
    ///
    /// # Errors
    ///
    /// [`Error::LockLost`](crate::Error::LockLost) when leadership had been lost already;
    /// Redis, pool and shutdown errors as [`LockGuard::unlock`](crate::LockGuard::unlock).
    pub fn step_down(self) -> Result<()> {
        self.guard.unlock()
    }
}
