//! The core of a client: what every lock, semaphore and latch of one client holds.
//!
//! [`Client`](crate::Client) is the public facade; the objects it hands out hold an
//! `Arc<Core>` (as r2d2's pooled connections hold the pool's shared state, not the
//! `Pool` facade), so nothing below the facade imports it. All Redis I/O of those objects
//! goes through [`Core::run`] and [`Core::subscribe`], addressed by key and channel.

mod courtesy;
mod levels;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::protocol::hash;
use crate::pubsub::{Audience, Interest, Listener, Subscription};
use crate::transport::replica_sync::{ReplicaSync, Synced};
use crate::transport::{Checkout, Transport};
use crate::watchdog::{self, Watchdog};
use courtesy::Courtesy;
use levels::Levels;

/// One client's identity, configuration, transport and background threads.
#[derive(Debug)]
pub(crate) struct Core {
    id: String,
    config: Config,
    transport: Transport,
    listener: Listener,
    watchdog: Watchdog,
    replica_sync: ReplicaSync,
    stopped: AtomicBool,
    /// The watchdog timeout in milliseconds: the lease of locks taken without one.
    watchdog_ms: u64,
    /// The fairness policy's open windows (see `fairness.rs`).
    courtesy: Courtesy,
    /// The hold counts of this client's threads (see `levels.rs`).
    levels: Levels,
}

impl Core {
    /// Connects as `config` says and starts the listener and watchdog threads.
    ///
    /// # Errors
    ///
    /// As [`Transport::open`]; [`Error::Io`] when a thread cannot be started.
    pub(crate) fn start(config: Config) -> Result<Self> {
        let id = uuid::Uuid::new_v4().hyphenated().to_string();
        let transport = Transport::open(&config, &id)?;
        // The listener opens its connection only when a thread first waits.
        let listener = match Listener::start(&id, transport.routes()) {
            Ok(listener) => listener,
            Err(e) => {
                transport.shutdown();
                return Err(e);
            }
        };
        // The watchdog must give up on a dead server quickly, or it could not warn a
        // holder before its lease ends.
        let cap = watchdog::attempt_cap(config.lock_watchdog_timeout);
        let started = Watchdog::start(
            transport.dedicated(&config, cap),
            watchdog::Settings {
                lease: config.lock_watchdog_timeout,
                batch_size: config.watchdog_batch_size,
                name_labels: config.metrics_lock_names,
            },
        );
        let watchdog = match started {
            Ok(w) => w,
            Err(e) => {
                listener.shutdown();
                transport.shutdown();
                return Err(e);
            }
        };
        let replica_sync = ReplicaSync::new(&config, transport.replicates());
        Ok(Self {
            replica_sync,
            id,
            watchdog_ms: config.lock_watchdog_timeout.as_millis() as u64,
            config,
            transport,
            listener,
            watchdog,
            stopped: AtomicBool::new(false),
            courtesy: Courtesy::default(),
            levels: Levels::default(),
        })
    }

    /// The client id: the UUID in every owner field of this client's holds.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// The lease of a lock taken without an explicit one, in milliseconds.
    pub(crate) fn watchdog_ms(&self) -> u64 {
        self.watchdog_ms
    }

    /// The lease of a lock taken without an explicit one.
    pub(crate) fn watchdog_timeout(&self) -> Duration {
        self.config.lock_watchdog_timeout
    }

    pub(crate) fn watchdog(&self) -> &Watchdog {
        &self.watchdog
    }

    /// The command scripts publish with in this deployment: the typed
    /// [`Publish`](crate::transport::publish::Publish) as a script argument.
    pub(crate) fn publish_command(&self) -> &'static str {
        self.transport.publish().command()
    }

    /// Runs `f` against the node that owns `key`; `Shutdown` after shutdown. Errors are
    /// classified for the object that `key` names.
    pub(crate) fn run<T>(
        &self,
        key: &str,
        f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        if self.is_stopped() {
            return Err(Error::Shutdown);
        }
        self.transport.run(key, f)
    }

    /// A pooled connection to the node that owns `key`, driven by the caller; see
    /// [`Transport::checkout`] for `wait`. `Shutdown` after shutdown.
    pub(crate) fn checkout(&self, key: &str, wait: Option<Duration>) -> Result<Option<Checkout>> {
        if self.is_stopped() {
            return Err(Error::Shutdown);
        }
        self.transport.checkout(key, wait)
    }

    /// Applies a `MOVED` answer that a caller driving a [`checkout`](Self::checkout) got
    /// to this client's slot map. Whether the key now routes elsewhere (only a cluster
    /// client's does).
    pub(crate) fn redirected(&self, err: &redis::RedisError) -> bool {
        self.transport.routes().moved(err).is_some()
    }

    /// [`run`](Self::run) for an acquiring script: when `took` says the script took
    /// something, `WAIT` for the master's replicas follows on the same connection (see
    /// `replica_sync`), and its finding comes back with the script's answer.
    pub(crate) fn run_acquire<T>(
        &self,
        key: &str,
        mut f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
        took: impl Fn(&T) -> bool,
    ) -> Result<(T, Synced)> {
        // Read before the script: a failover after it makes the cached replica count
        // stale, which this generation then no longer matches.
        let generation = self.transport.generation();
        let group = self.transport.replica_group(key);
        // Never sent twice: a second run would take a second hold. The lock finds out
        // whether a request whose connection closed ran (see `levels.rs`).
        self.run_once(key, |c| {
            let answer = f(c)?;
            if !took(&answer) {
                return Ok((answer, Synced::Unchecked));
            }
            let synced = self.replica_sync.after_acquire(
                c,
                generation,
                group,
                &|| self.transport.known_replicas(),
                &|| self.transport.standing(generation),
            )?;
            Ok((answer, synced))
        })
    }

    /// [`run`](Self::run) for a release script: when `changed` says the script changed
    /// the lock, `WAIT` for the master's replicas follows on the same connection (see
    /// [`Config::sync_releases`](crate::Config::sync_releases)). A release no replica
    /// acknowledged still happened on the master: it is logged and counted, not failed.
    pub(crate) fn run_release<T>(
        &self,
        key: &str,
        mut f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
        changed: impl Fn(&T) -> bool,
    ) -> Result<T> {
        // Without the release WAIT the hot path is the plain run: no slot hash, no
        // generation read per unlock.
        if !self.replica_sync.releases_on() {
            return self.run(key, f);
        }
        let generation = self.transport.generation();
        let group = self.transport.replica_group(key);
        self.run(key, |c| {
            let answer = f(c)?;
            if !changed(&answer) {
                return Ok(answer);
            }
            // The release's outcome is known once its answer is in, so a WAIT that fails
            // (its connection closed) does not fail the release or send it again: only the
            // confirmation is missing, as when no replica acknowledged.
            match self.replica_sync.after_release(c, generation, group) {
                Ok(Synced::NoneAcked { replicas }) => {
                    crate::metrics::replica_sync_failed("release");
                    log::warn!(
                        "redmutex: no replica of {replicas} acknowledged the release of {key:?} \
                         within slaves_sync_timeout; a failover now could bring the hold back \
                         until its lease ends"
                    );
                }
                Err(e) => {
                    crate::metrics::replica_sync_failed("release");
                    log::warn!(
                        "redmutex: the WAIT after releasing {key:?} failed ({e}); a failover \
                         now could bring the hold back until its lease ends"
                    );
                }
                Ok(_) => {}
            }
            Ok(answer)
        })
    }

    /// The `WAIT` that [`run_acquire`](Self::run_acquire) owes an acquire of `key` by
    /// `owner` that ran although its connection closed before the answer (or before the
    /// `WAIT`'s): on another connection, after a write of the hold's own TTL there, so
    /// that the `WAIT` covers the acquire (see `rewrite_ttl.lua`). `Unchecked` when the
    /// check is off or the hold is gone.
    ///
    /// Both commands may be sent again: writing a TTL unchanged and waiting change nothing.
    pub(crate) fn resync_adopted(&self, key: &str, owner: &str) -> Result<Synced> {
        if !self.replica_sync.is_on() {
            return Ok(Synced::Unchecked);
        }
        let generation = self.transport.generation();
        let group = self.transport.replica_group(key);
        self.run(key, |c| {
            if !hash::rewrite_ttl(c, key, owner)? {
                return Ok(Synced::Unchecked);
            }
            self.replica_sync.after_acquire(
                c,
                generation,
                group,
                &|| self.transport.known_replicas(),
                &|| self.transport.standing(generation),
            )
        })
    }

    /// [`run`](Self::run) for a request that must not run twice: after a connection
    /// failure the error comes back, even when the connection only looked dead (see
    /// [`Transport::run_once`]).
    pub(crate) fn run_once<T>(
        &self,
        key: &str,
        f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        if self.is_stopped() {
            return Err(Error::Shutdown);
        }
        self.transport.run_once(key, f)
    }

    /// [`run`](Self::run) that also works while the client shuts down, for clean-up that
    /// a waiter woken by the shutdown still owes (a fair waiter leaving its queue).
    pub(crate) fn run_even_if_stopped<T>(
        &self,
        key: &str,
        f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        self.transport.run(key, f)
    }

    /// Runs `f` again after a transient failure (the connection failed or timed out, so
    /// the outcome is unknown), up to `retry_attempts` times with the configured back-off,
    /// for requests that are safe to repeat (a release under its unlock latch, leaving a
    /// fair queue). Not after shutdown.
    pub(crate) fn retrying<T>(&self, mut f: impl FnMut() -> Result<T>) -> Result<T> {
        let mut attempt = 0;
        loop {
            match f() {
                Err(e)
                    if e.is_transient()
                        && attempt < self.config.retry_attempts
                        && !self.is_stopped() =>
                {
                    log::debug!("redmutex: retrying after a transient failure: {e}");
                    std::thread::sleep(self.config.retry_delay_for(attempt));
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// Registers the calling thread as a waiter; see [`Listener::subscribe`].
    pub(crate) fn subscribe(&self, interest: Interest<'_>) -> Result<Subscription> {
        self.listener.subscribe(interest)
    }

    /// Registers the calling thread as an observer of a channel; see
    /// [`Listener::observe`].
    pub(crate) fn observe(&self, interest: Interest<'_>) -> Result<Subscription> {
        self.listener.observe(interest)
    }

    /// See [`Listener::audience`]; `kinds` is how many kinds scripts publish on, which
    /// the subscription kinds the session makes match.
    pub(crate) fn audience(&self, channel: &str) -> Audience {
        let kinds = self.transport.publish().on().count();
        self.listener.audience(channel, kinds)
    }

    /// The fairness policy's courtesy windows.
    pub(crate) fn courtesy(&self) -> &Courtesy {
        &self.courtesy
    }

    /// The hold counts of this client's threads.
    pub(crate) fn levels(&self) -> &Levels {
        &self.levels
    }

    /// A string key read as an integer; a missing key is 0.
    pub(crate) fn get_count(&self, key: &str) -> Result<i64> {
        let value: Option<i64> = self.run(key, |c| redis::cmd("GET").arg(key).query(c))?;
        Ok(value.unwrap_or(0))
    }

    /// `PTTL` as Redisson's `remainTimeToLive`: `None` when the key is absent,
    /// `Some(Duration::MAX)` when it has no TTL.
    pub(crate) fn remain_time_to_live(&self, key: &str) -> Result<Option<Duration>> {
        let ttl: i64 = self.run(key, |c| redis::cmd("PTTL").arg(key).query(c))?;
        Ok(match ttl {
            -2 => None,
            -1 => Some(Duration::MAX),
            ms => Some(Duration::from_millis(ms.max(0).unsigned_abs())),
        })
    }

    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// Stops and joins the threads; later calls fail with `Shutdown`. Idempotent.
    pub(crate) fn shutdown(&self) {
        // Flag first: calls that start from now on fail fast instead of waiting.
        if self.stopped.swap(true, Ordering::AcqRel) {
            return;
        }
        self.listener.shutdown();
        self.watchdog.shutdown();
        // Last: the threads above may still route a final command (latch deletion).
        self.transport.shutdown();
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        self.shutdown();
    }
}
