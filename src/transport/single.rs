//! A single Redis server: one node that owns every key and every channel, with an r2d2
//! command pool.

use std::time::Duration;

use super::checkout::Checkout;
use super::connector::{Connector, Pool, Pooled, build_pool};
use crate::config::Config;
use crate::error::{Error, Result};

/// One Redis server: how to open connections to it, and its command pool.
#[derive(Debug)]
pub(crate) struct Node {
    connector: Connector,
    /// The same server in RESP3, for the subscriber connection.
    pubsub: Connector,
    pool: Pool,
    pool_max_size: u32,
}

impl Node {
    /// Connects to the server `config` names: opens one connection first (so that a
    /// wrong address or password reports its real cause, which the pool would hide
    /// behind a timeout), then the command pool. Every connection is named `name`.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for an address that does not parse, a pool that cannot be
    /// filled or a database the server does not have; [`Error::Auth`] when the server
    /// refuses the login; [`Error::Connect`] when the first connection fails.
    pub(crate) fn open(config: &Config, name: &str) -> Result<Self> {
        let connector =
            Connector::new(config, config.connection_timeout, config.response_timeout)?.named(name);
        drop(connector.open_checked(&crate::address::redact(config.address()))?);
        let pubsub = connector.resp3()?;
        let pool = build_pool(connector.clone(), config)?;
        Ok(Self {
            connector,
            pubsub,
            pool,
            pool_max_size: config.pool_max_size,
        })
    }

    pub(crate) fn addr(&self) -> &str {
        self.connector.addr()
    }

    /// The RESP3 connector of the subscriber connection.
    pub(crate) fn pubsub_connector(&self) -> &Connector {
        &self.pubsub
    }

    /// A best-effort `PUBLISH` on a pooled connection, for messages that only wake a
    /// thread of this process (the subscriber's control channel).
    pub(crate) fn publish(&self, channel: &str, message: &str) -> Result<()> {
        let mut pooled = self.pooled()?;
        redis::cmd("PUBLISH")
            .arg(channel)
            .arg(message)
            .query::<i64>(&mut pooled.conn)
            .map(drop)
            .map_err(|e| {
                pooled.failed(&self.connector, &e);
                Error::from(e)
            })
    }

    /// A pooled connection that is not condemned (see [`Connector::condemn`]). Condemned
    /// idle ones are closed on the way, unused: nothing was sent on them, so this costs
    /// a reconnect, never a request's outcome.
    fn pooled(&self) -> Result<Pooled> {
        let mut stale = 0;
        loop {
            let mut pooled = self.pool.get()?;
            // Bounded: each stale connection is closed, and the pool holds at most
            // `pool_max_size`; past that (the generation moving on all the while) the
            // connection is used as it is, and a failure on it is an ordinary failure.
            if pooled.generation == self.connector.generation() || stale > self.pool_max_size {
                return Ok(pooled);
            }
            pooled.broken = true;
            stale += 1;
        }
    }

    /// A pooled connection for a caller that drives it by hand; see
    /// [`Transport::checkout`](super::Transport::checkout) for `wait`.
    pub(crate) fn checkout(&self, wait: Option<Duration>) -> Result<Option<Checkout>> {
        let pooled = match wait {
            None => self.pool.try_get(),
            Some(wait) => {
                let wait = wait
                    .min(self.pool.connection_timeout())
                    .max(Duration::from_millis(1));
                Some(self.pool.get_timeout(wait)?)
            }
        };
        Ok(pooled.map(|pooled| Checkout::pooled(pooled, self.connector.response_timeout())))
    }

    /// Runs one command on a pooled connection, classifying its error for the object
    /// `name` names.
    ///
    /// Idle pooled connections can be dead without anyone noticing (a server restart, an
    /// idle timeout, `CLIENT KILL`): the write then fails or the read sees EOF at once.
    /// The command most likely reached no live server, so it is sent again on another
    /// connection, at most once per pooled connection plus one, and the idle connections
    /// of the same generation are condemned. (That EOF also comes when the server ran
    /// the command and then the connection closed, which is why an acquire goes through
    /// [`run_once`](Self::run_once) instead.) A timeout is never retried: the
    /// command may have run, and running a script twice could take a second hold.
    pub(crate) fn run<T>(
        &self,
        name: &str,
        mut f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let mut attempts = self.pool_max_size + 1;
        loop {
            let mut pooled = self.pooled()?;
            let err = match f(&mut pooled.conn) {
                Ok(value) => return Ok(value),
                Err(e) => e,
            };
            pooled.failed(&self.connector, &err);
            attempts -= 1;
            let dead_before_sending = err.is_connection_dropped() && !err.is_timeout();
            if !dead_before_sending || attempts == 0 {
                return Err(Error::from_redis(name, err));
            }
            log::debug!("redmutex: pooled connection was dead ({err}), retrying on another");
        }
    }

    /// [`run`](Self::run) without the second try on a connection found dead: its read
    /// saw the connection closed, which it also sees when the server ran the command and
    /// the connection closed before the reply came back.
    pub(crate) fn run_once<T>(
        &self,
        name: &str,
        f: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let mut pooled = self.pooled()?;
        f(&mut pooled.conn).map_err(|err| {
            pooled.failed(&self.connector, &err);
            Error::from_redis(name, err)
        })
    }

    /// The watchdog's own connection to this server.
    pub(crate) fn dedicated(&self, connect: Duration, response: Duration) -> Dedicated {
        Dedicated {
            connector: self.connector.with_timeouts(connect, response),
            conn: None,
        }
    }
}

/// A background thread's own connection to the server, opened on demand; a failed
/// command drops it so that the next one starts clean.
pub(crate) struct Dedicated {
    connector: Connector,
    conn: Option<redis::Connection>,
}

impl std::fmt::Debug for Dedicated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dedicated")
            .field("connector", &self.connector)
            .field("connected", &self.conn.is_some())
            .finish()
    }
}

impl Dedicated {
    /// Runs `f` on the connection. On any error the connection is dropped: its reply
    /// stream may be out of step.
    pub(crate) fn run<T>(
        &mut self,
        f: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> redis::RedisResult<T> {
        let stale = self
            .conn
            .as_ref()
            .is_none_or(|c| !redis::ConnectionLike::is_open(c));
        if stale {
            self.conn = Some(self.connector.connect()?);
        }
        let Some(conn) = self.conn.as_mut() else {
            return Err(std::io::Error::other("no connection").into());
        };
        let result = f(conn);
        if result.is_err() {
            self.reset();
        }
        result
    }

    /// Drops the connection (its replies made no sense); the next call opens another.
    pub(crate) fn reset(&mut self) {
        self.conn = None;
    }
}
