//! Leader election over one lock, in the shape of Curator's `LeaderLatch`: of all the
//! processes that ask, one leads at a time; the leader learns at once when its
//! leadership is lost and must step down; when it dies, another takes over within the
//! lease.

pub(crate) mod observer;

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};

use crate::core::Core;
use crate::error::Result;
use crate::lock::{RLock, RLockGuard};
use crate::watchdog::hold::Loss;
use observer::{Leader, LeaderChanges};

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
    core: Arc<Core>,
    lock: RLock,
}

impl LeaderLatch {
    pub(crate) fn new(core: Arc<Core>, lock: RLock) -> Self {
        Self { core, lock }
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
        self.lock.lock().map(|g| self.leadership(g))
    }

    /// Waits at most `wait` to lead (Curator `await(timeout)`); `Ok(None)` when another
    /// candidate still leads.
    ///
    /// # Errors
    ///
    /// As [`RLock::try_lock_for`].
    pub fn await_leadership_for(&self, wait: Duration) -> Result<Option<Leadership>> {
        Ok(self.lock.try_lock_for(wait)?.map(|g| self.leadership(g)))
    }

    /// Leads if nobody does now, without waiting.
    ///
    /// # Errors
    ///
    /// As [`RLock::try_lock`].
    pub fn try_lead(&self) -> Result<Option<Leadership>> {
        Ok(self.lock.try_lock()?.map(|g| self.leadership(g)))
    }

    /// Whether some candidate leads now (Redis's view; it may change at once).
    ///
    /// # Errors
    ///
    /// As [`RLock::is_locked`].
    pub fn has_leader(&self) -> Result<bool> {
        self.lock.is_locked()
    }

    /// Who leads now, as Redis says (Curator `getLeader()`): the holder of the lock
    /// `name`, a redmutex or a Redisson client, with its thread, hold count and what is
    /// left of its lease; `None` when nobody leads. Any client can ask, candidate or
    /// not. Redis keeps no acquisition time: see [`Leader::taken_after`].
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType) when the key is no hash; Redis, pool
    /// and shutdown errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use redmutex::LeaderClient;
    ///
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// match client.leader("leader:billing").current()? {
    ///     Some(l) if l.client == LeaderClient::Redisson => {
    ///         println!("a Java service leads: Redisson client {}, thread {}", l.client_id, l.thread)
    ///     }
    ///     Some(l) => println!("{} leads, {:?} of its lease left", l.owner, l.lease_left),
    ///     None => println!("nobody leads"),
    /// }
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn current(&self) -> Result<Option<Leader>> {
        observer::current(&self.core, self.name())
    }

    /// Every change of leader from now on, on a channel: first who leads now
    /// ([`ChangeCause::Initial`](crate::ChangeCause::Initial)), then each change as it
    /// is seen. A thread of its own (`redmutex-leader`) listens on the lock's unlock
    /// channel, so a leader that steps down (Rust or Java) is seen within one message;
    /// a leader that dies is seen when its TTL ends, which is when the lock is free
    /// again. It reads Redis only after a message or at the TTL, never more often; with
    /// nobody leading, where an acquisition publishes nothing, it reads three times in
    /// the 0.6 s after a release (the woken candidate takes the lock in a few round
    /// trips) and then once per watchdog lease. It works whoever leads: Redisson
    /// publishes the same unlock message.
    ///
    /// Dropping the returned [`LeaderChanges`] stops the thread.
    ///
    /// # Errors
    ///
    /// [`Error::Io`](crate::Error::Io) when the thread cannot start, shutdown errors.
    /// Errors while observing come through the channel.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
    /// let changes = client.leader("leader:billing").changes()?;
    /// loop {
    ///     let change = changes.recv()?;
    ///     let who = change.current.map_or("nobody".to_owned(), |l| l.owner);
    ///     println!("{:?}: {who} leads", change.cause);
    /// }
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn changes(&self) -> Result<LeaderChanges> {
        observer::changes(Arc::clone(&self.core), self.name().to_owned())
    }

    fn leadership(&self, guard: RLockGuard) -> Leadership {
        Leadership {
            latch: self.clone(),
            guard,
        }
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
    latch: LeaderLatch,
    guard: RLockGuard,
}

impl Leadership {
    /// The election this leadership belongs to, for [`current`](LeaderLatch::current)
    /// and [`changes`](LeaderLatch::changes) (a leader watching its own succession).
    pub fn latch(&self) -> &LeaderLatch {
        &self.latch
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
