//! The client facade: connects, hands out the lock-family objects, shuts down.

use std::sync::Arc;

use crate::config::Config;
use crate::core::Core;
use crate::error::{Error, Result};
use crate::leader::LeaderLatch;
use crate::lock::{
    AnyLock, Fair, Fenced, Lock, MultiLock, NonReentrant, NonReentrantFair, RFairLock, RFencedLock,
    RLock, RNonReentrantFairLock, RNonReentrantLock, RReadWriteLock, RSpinLock, RedLock, Reentrant,
    Spin,
};
use crate::sync::latch::RCountDownLatch;
use crate::sync::permit_semaphore::RPermitExpirableSemaphore;
use crate::sync::semaphore::RSemaphore;
use crate::task_lock::TaskLock;
use crate::token_lock::{QuorumTokenLock, Token, TokenLock, TokenLockOptions};
use crate::wait::backoff::BackOff;

/// A connection to one Redis server and the factory of its locks.
///
/// A `Client` plays the part of one `RedissonClient`: it has its own UUID, which goes into
/// the owner field of every lock its threads take, a pool of command connections, one
/// dedicated pub/sub connection for waiters and one watchdog thread.
///
/// # About threads and cloning
///
/// Cloning is cheap (an `Arc`), and clones share everything: the id, the pool and the
/// threads. The client runs two named threads: `redmutex-pubsub`, which owns the pub/sub
/// connection and wakes waiting threads, and `redmutex-watchdog`, which renews leases and
/// deletes spent unlock latches over a connection of its own (so an exhausted pool cannot
/// starve renewals). r2d2 adds its own maintenance threads to the pool, and once threads
/// have waited, `redmutex-pubsub-tell` signals waiters whose subscription was confirmed.
///
/// Locks and guards hold a clone, so the client lives as long as they do. When the last
/// clone is dropped, or at [`shutdown`](Self::shutdown), both threads are stopped and
/// joined; leases are no longer renewed, so locks still held expire after their lease,
/// like those of a Redisson client that shut down.
///
/// # Examples
///
/// ```no_run
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client.get_lock("orders:42");
/// let guard = lock.lock()?;
/// // ... work that must not run twice at once ...
/// guard.unlock()?;
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Clone)]
pub struct Client {
    core: Arc<Core>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.core.id())
            .field("config", self.core.config())
            .field("shut_down", &self.is_shut_down())
            .finish()
    }
}

impl Client {
    /// Connects with the default [`Config`] and the given URL.
    ///
    /// # Errors
    ///
    /// As [`Client::new`].
    pub fn open(url: &str) -> Result<Self> {
        Self::new(Config::builder().address(url).build())
    }

    /// Connects with `config`: checks it, opens the first connection and checks the
    /// login and the database on it (one `PING` after `AUTH`, so a wrong or missing
    /// password fails here, not at the first lock), fills the pool and starts the
    /// background threads. A server that accepts but never answers fails within the
    /// [connection timeout](Config::connection_timeout).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for an invalid configuration, an address that does not parse or
    /// a database the server does not have; [`Error::Auth`] when the server refuses the
    /// login (a wrong password or user, or no password where it needs one);
    /// [`Error::Connect`] when Redis cannot be reached in time or refuses the TLS
    /// handshake; [`Error::Io`] when a thread cannot be started. Each names the address
    /// (never its password) and says what to check.
    pub fn new(config: Config) -> Result<Self> {
        config.validate().map_err(Error::Config)?;
        Ok(Self {
            core: Arc::new(Core::start(config)?),
        })
    }

    /// This client's id: a fresh random UUID, lowercase and hyphenated, written into the
    /// owner field `<id>:<thread-number>` of every lock its threads hold.
    pub fn id(&self) -> &str {
        self.core.id()
    }

    /// The configuration the client was built with.
    pub fn config(&self) -> &Config {
        self.core.config()
    }

    /// The Redisson `RLock` called `name`. Does no I/O.
    pub fn get_lock(&self, name: impl Into<String>) -> RLock {
        Lock::new(Arc::clone(&self.core), Reentrant::new(name.into()))
    }

    /// The Redisson `RFairLock` called `name`: a reentrant lock granted in request order.
    /// Does no I/O.
    pub fn get_fair_lock(&self, name: impl Into<String>) -> RFairLock {
        let wait = self.config().fair_lock_wait_timeout();
        Lock::new(Arc::clone(&self.core), Fair::new(name.into(), wait))
    }

    /// The Redisson `RFencedLock` called `name`: an `RLock` whose every grant draws a
    /// fencing token from `redisson_lock_token:{name}`. Does no I/O.
    pub fn get_fenced_lock(&self, name: impl Into<String>) -> RFencedLock {
        Lock::new(Arc::clone(&self.core), Fenced::new(name.into()))
    }

    /// The Redisson `RSpinLock` called `name`: an `RLock` without unlock messages, whose
    /// waiters retry with Redisson's default back-off (change it with
    /// [`with_backoff`](RSpinLock::with_backoff)). Does no I/O.
    pub fn get_spin_lock(&self, name: impl Into<String>) -> RSpinLock {
        Lock::new(
            Arc::clone(&self.core),
            Spin::new(name.into(), BackOff::default()),
        )
    }

    /// Redisson 4.4+'s non-reentrant lock called `name`
    /// (`getNonReentrantLock`): the holder's second acquisition is refused. Does no I/O.
    pub fn get_non_reentrant_lock(&self, name: impl Into<String>) -> RNonReentrantLock {
        Lock::new(Arc::clone(&self.core), NonReentrant::new(name.into()))
    }

    /// Redisson 4.4+'s non-reentrant fair lock called `name`
    /// (`getNonReentrantFairLock`). Does no I/O.
    pub fn get_non_reentrant_fair_lock(&self, name: impl Into<String>) -> RNonReentrantFairLock {
        let wait = self.config().fair_lock_wait_timeout();
        Lock::new(
            Arc::clone(&self.core),
            NonReentrantFair::new(name.into(), wait),
        )
    }

    /// Redisson's `RedissonMultiLock` over `locks` (`getMultiLock`): all of them held
    /// together. The members may be locks of any kinds and of any clients (this one is
    /// only where the method lives, as in Redisson); list them with `.into()`. Does no
    /// I/O.
    pub fn get_multi_lock(&self, locks: impl IntoIterator<Item = AnyLock>) -> MultiLock {
        MultiLock::new(locks)
    }

    /// Redisson's `RedissonRedLock` over `locks` (`getRedLock`): held when a majority of
    /// them (`n / 2 + 1`) granted it, for RLocks on independent servers (one client per
    /// server). Deprecated, as Redisson deprecated it: read [`RedLock`] for why, and for
    /// the restart rule it needs. The members are asked in parallel. This client is only
    /// where the method lives, as in Redisson. Does no I/O.
    pub fn get_red_lock(&self, locks: impl IntoIterator<Item = RLock>) -> RedLock {
        RedLock::new(locks)
    }

    /// The Redisson `RReadWriteLock` called `name`; take its halves with
    /// [`read_lock`](RReadWriteLock::read_lock) and
    /// [`write_lock`](RReadWriteLock::write_lock). Does no I/O.
    pub fn get_read_write_lock(&self, name: impl Into<String>) -> RReadWriteLock {
        RReadWriteLock::new(&self.core, name.into())
    }

    /// The Redisson `RSemaphore` called `name`. Does no I/O; the semaphore has no permits
    /// until someone sets or adds some.
    pub fn get_semaphore(&self, name: impl Into<String>) -> RSemaphore {
        RSemaphore::new(Arc::clone(&self.core), name.into())
    }

    /// The Redisson `RPermitExpirableSemaphore` called `name`: permits with ids and
    /// optional leases. Does no I/O.
    pub fn get_permit_expirable_semaphore(
        &self,
        name: impl Into<String>,
    ) -> RPermitExpirableSemaphore {
        RPermitExpirableSemaphore::new(Arc::clone(&self.core), name.into())
    }

    /// The Redisson `RCountDownLatch` called `name`. Does no I/O.
    pub fn get_count_down_latch(&self, name: impl Into<String>) -> RCountDownLatch {
        RCountDownLatch::new(Arc::clone(&self.core), name.into())
    }

    /// The plain string-token lock called `name`, with the default options (go-redsync's:
    /// random base64 tokens, extend resets the TTL, no key prefix). Its key is a string
    /// holding the holder's token, shared with go-redsync, redis-py and the `SET NX PX`
    /// recipe; see [`TokenLock`]. Does no I/O.
    pub fn get_token_lock(&self, name: impl Into<String>) -> TokenLock {
        Lock::new(
            Arc::clone(&self.core),
            Token::new(name.into(), TokenLockOptions::default()),
        )
    }

    /// [`get_token_lock`](Self::get_token_lock) with `options` (token format, extend
    /// mode, key prefix, retry pacing). Does no I/O.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for options out of range.
    pub fn get_token_lock_with(
        &self,
        name: impl Into<String>,
        options: TokenLockOptions,
    ) -> Result<TokenLock> {
        options.validate().map_err(Error::Config)?;
        Ok(Lock::new(
            Arc::clone(&self.core),
            Token::new(name.into(), options),
        ))
    }

    /// The string-token lock called `name` over independent servers, one client per
    /// server: held when a majority of `members` granted it (RedLock, as go-redsync runs
    /// it over several pools); see [`QuorumTokenLock`]. Default options. Does no I/O.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] when `members` is empty.
    pub fn get_quorum_token_lock(
        members: &[Client],
        name: impl Into<String>,
    ) -> Result<QuorumTokenLock> {
        Self::get_quorum_token_lock_with(members, name, TokenLockOptions::default())
    }

    /// [`get_quorum_token_lock`](Self::get_quorum_token_lock) with `options`.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] when `members` is empty or the options are out of range.
    pub fn get_quorum_token_lock_with(
        members: &[Client],
        name: impl Into<String>,
        options: TokenLockOptions,
    ) -> Result<QuorumTokenLock> {
        let cores = members.iter().map(|c| Arc::clone(&c.core)).collect();
        QuorumTokenLock::new(cores, name.into(), options)
    }

    /// The ShedLock-compatible lock of the scheduled job `name`: the string key
    /// `job-lock:default:<name>` that ShedLock's Redis providers use (change the parts
    /// with [`environment`](TaskLock::environment) and
    /// [`key_prefix`](TaskLock::key_prefix)); see [`TaskLock`]. Does no I/O.
    pub fn get_task_lock(&self, name: impl Into<String>) -> TaskLock {
        TaskLock::new(Arc::clone(&self.core), name.into())
    }

    /// A candidate in the leader election `name` (Curator's `LeaderLatch`): whoever
    /// holds the lock `name` leads. Does no I/O.
    pub fn leader(&self, name: impl Into<String>) -> LeaderLatch {
        LeaderLatch::new(Arc::clone(&self.core), self.get_lock(name))
    }

    /// Stops and joins the background threads. Later calls on this client, its locks and
    /// its guards return [`Error::Shutdown`]; waiting threads wake up with it. Locks still
    /// held are no longer renewed and expire after their lease. Calling it twice is fine.
    pub fn shutdown(&self) {
        self.core.shutdown();
    }

    /// True after [`shutdown`](Self::shutdown).
    pub fn is_shut_down(&self) -> bool {
        self.core.is_stopped()
    }

    /// A diagnostic: how many holds the watchdog is renewing now (one per lock and owner
    /// thread taken without a lease). Meant for tests and metrics, not for decisions: the
    /// number can change as soon as it is read.
    pub fn renewing_count(&self) -> usize {
        self.core.watchdog().len()
    }
}
