//! The client: connection pool, identity and the two background threads.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::config::Config;
use crate::connection::{self, Connector, Pool};
use crate::error::{Error, Result, is_connection_error};
use crate::fair_lock::RFairLock;
use crate::latch::RCountDownLatch;
use crate::lock::RLock;
use crate::permit_semaphore::RPermitExpirableSemaphore;
use crate::pubsub::Listener;
use crate::rwlock::RReadWriteLock;
use crate::semaphore::RSemaphore;
use crate::watchdog::{self, Watchdog};

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
/// starve renewals). r2d2 adds its own maintenance threads to the pool.
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
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) id: String,
    pub(crate) config: Config,
    pub(crate) pool: Pool,
    pub(crate) listener: Listener,
    pub(crate) watchdog: Watchdog,
    stopped: AtomicBool,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.inner.id)
            .field("config", &self.inner.config)
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

    /// Connects with `config`: checks it, opens the pool's first connections (so a wrong
    /// address or password fails here) and starts the background threads.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for an invalid configuration, [`Error::Permission`] or
    /// [`Error::Redis`] when Redis cannot be reached or refuses the credentials,
    /// [`Error::Io`] when a thread cannot be started.
    pub fn new(config: Config) -> Result<Self> {
        config.validate().map_err(Error::Config)?;
        let connector =
            Connector::new(&config, config.connection_timeout, config.response_timeout)?;
        // One direct connection first: it reports the real cause (refused, auth, ACL),
        // which the pool would hide behind a timeout.
        drop(connector.connect().map_err(|e| Error::from_redis("", e))?);
        let pool = connection::build_pool(connector.clone(), &config)?;
        let id = uuid::Uuid::new_v4().hyphenated().to_string();
        let listener = Listener::start(&id, connector.clone(), pool.clone())?;
        // The watchdog must give up on a dead server quickly, or it could not warn a
        // holder before its lease ends.
        let cap = watchdog::attempt_cap(config.lock_watchdog_timeout);
        let watchdog_connector = Connector::new(
            &config,
            config.connection_timeout.min(cap),
            config.response_timeout.min(cap),
        )?;
        drop(connector);
        let watchdog = match Watchdog::start(
            watchdog_connector,
            watchdog::Settings {
                lease: config.lock_watchdog_timeout,
                batch_size: config.watchdog_batch_size,
            },
        ) {
            Ok(w) => w,
            Err(e) => {
                listener.shutdown();
                return Err(e);
            }
        };
        Ok(Self {
            inner: Arc::new(Inner {
                id,
                config,
                pool,
                listener,
                watchdog,
                stopped: AtomicBool::new(false),
            }),
        })
    }

    /// This client's id: a fresh random UUID, lowercase and hyphenated, written into the
    /// owner field `<id>:<thread-number>` of every lock its threads hold.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The configuration the client was built with.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The Redisson `RLock` called `name`. Does no I/O.
    pub fn get_lock(&self, name: impl Into<String>) -> RLock {
        RLock::new(self.clone(), name.into())
    }

    /// The Redisson `RFairLock` called `name`: a reentrant lock granted in request order.
    /// Does no I/O.
    pub fn get_fair_lock(&self, name: impl Into<String>) -> RFairLock {
        RFairLock::new(self.clone(), name.into())
    }

    /// The Redisson `RReadWriteLock` called `name`; take its halves with
    /// [`read_lock`](RReadWriteLock::read_lock) and
    /// [`write_lock`](RReadWriteLock::write_lock). Does no I/O.
    pub fn get_read_write_lock(&self, name: impl Into<String>) -> RReadWriteLock {
        RReadWriteLock::new(self.clone(), name.into())
    }

    /// The Redisson `RSemaphore` called `name`. Does no I/O; the semaphore has no permits
    /// until someone sets or adds some.
    pub fn get_semaphore(&self, name: impl Into<String>) -> RSemaphore {
        RSemaphore::new(self.clone(), name.into())
    }

    /// The Redisson `RPermitExpirableSemaphore` called `name`: permits with ids and
    /// optional leases. Does no I/O.
    pub fn get_permit_expirable_semaphore(
        &self,
        name: impl Into<String>,
    ) -> RPermitExpirableSemaphore {
        RPermitExpirableSemaphore::new(self.clone(), name.into())
    }

    /// The Redisson `RCountDownLatch` called `name`. Does no I/O.
    pub fn get_count_down_latch(&self, name: impl Into<String>) -> RCountDownLatch {
        RCountDownLatch::new(self.clone(), name.into())
    }

    /// Stops and joins the background threads. Later calls on this client, its locks and
    /// its guards return [`Error::Shutdown`]; waiting threads wake up with it. Locks still
    /// held are no longer renewed and expire after their lease. Calling it twice is fine.
    pub fn shutdown(&self) {
        self.inner.shutdown();
    }

    /// True after [`shutdown`](Self::shutdown).
    pub fn is_shut_down(&self) -> bool {
        self.inner.stopped.load(Ordering::Acquire)
    }

    /// Locks whose leases the watchdog is renewing now.
    pub fn renewing_count(&self) -> usize {
        self.inner.watchdog.len()
    }
}

impl Inner {
    /// A pooled connection, or `Shutdown`.
    pub(crate) fn conn(&self) -> Result<r2d2::PooledConnection<Connector>> {
        if self.stopped.load(Ordering::Acquire) {
            return Err(Error::Shutdown);
        }
        Ok(self.pool.get()?)
    }

    /// Runs one command on a pooled connection, classifying its error for lock `name`.
    ///
    /// Idle pooled connections can be dead without anyone noticing (a server restart, an
    /// idle timeout, `CLIENT KILL`): the write then fails or the read sees EOF at once.
    /// The command reached no live server, so it is sent again on another connection,
    /// at most once per pooled connection plus one. A timeout is never retried: the
    /// command may have run, and running a script twice could take a second hold.
    pub(crate) fn run<T>(
        &self,
        name: &str,
        mut f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let mut attempts = self.config.pool_max_size + 1;
        loop {
            let mut pooled = self.conn()?;
            let err = match f(&mut pooled.conn) {
                Ok(value) => return Ok(value),
                Err(e) => e,
            };
            if is_connection_error(&err) {
                pooled.broken = true;
            }
            attempts -= 1;
            let dead_before_sending = err.is_connection_dropped() && !err.is_timeout();
            if !dead_before_sending || attempts == 0 {
                return Err(Error::from_redis(name, err));
            }
            log::debug!("redmutex: pooled connection was dead ({err}), retrying on another");
        }
    }

    fn shutdown(&self) {
        // Flag first: calls that start from now on fail fast instead of waiting.
        if self.stopped.swap(true, Ordering::AcqRel) {
            return;
        }
        self.listener.shutdown();
        self.watchdog.shutdown();
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown();
    }
}
