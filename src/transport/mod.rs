//! The one seam for Redis I/O: every command, script call, subscription and renewal
//! reaches Redis through this module, addressed by the key (or channel) it concerns,
//! never through a connection picked by the caller.
//!
//! A deployment is a set of [`Node`]s plus a rule that maps a key to the node that owns
//! it. A single server is one node that owns every key. Lock kinds, semaphores and the
//! latch never see nodes: they call [`Core::run`](crate::core::Core::run) with the key of
//! the object, and the transport decides where the command goes, how a dead pooled
//! connection is replaced, and which publish command the scripts use.
//!
//! | need                       | entry point                         |
//! |----------------------------|-------------------------------------|
//! | one command or script      | [`Transport::run`]                  |
//! | the publish command        | [`Transport::publish_command`]      |
//! | the subscriber's node      | [`Transport::subscriber_node`]      |
//! | the watchdog's connections | [`Transport::dedicated`]            |
//! | a connection driven by hand | [`Transport::checkout`]            |
//!
//! `docs/design.md` ("How a topology plugs in") says what a new topology implements.

mod connector;

use std::sync::Arc;
use std::time::Duration;

use redis::{RedisResult, Value};

use crate::config::Config;
use crate::error::{Error, Result, is_connection_error};

pub(crate) use connector::Connector;
use connector::{Pool, build_pool};

/// The command that Redisson's scripts publish with on a single server.
const PUBLISH: &str = "PUBLISH";

/// How the client reaches Redis: its nodes and the rule that routes a key to one.
#[derive(Debug)]
pub(crate) struct Transport {
    /// A single server: the node that owns every key and every channel.
    node: Arc<Node>,
    /// The `CLIENT SETNAME` of every connection, see [`connection_name`].
    name: String,
}

/// What a client's connections call themselves: `redmutex:<client-id>`, so that
/// `CLIENT LIST` (and `redmutex status`) can tell whether a lock's holder is connected.
pub(crate) fn connection_name(client_id: &str) -> String {
    format!("redmutex:{client_id}")
}

impl Transport {
    /// Connects to the deployment `config` names: opens one connection first (so that a
    /// wrong address or password reports its real cause, which the pool would hide
    /// behind a timeout), then the command pool.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for an address that does not parse or a pool that cannot be
    /// filled; [`Error::Connect`] when the first connection fails.
    pub(crate) fn open(config: &Config, client_id: &str) -> Result<Self> {
        let name = connection_name(client_id);
        let connector = Connector::new(config, config.connection_timeout, config.response_timeout)?
            .named(&name);
        drop(
            connector
                .connect()
                .map_err(|e| Error::connect(config.address(), e))?,
        );
        let pool = build_pool(connector.clone(), config)?;
        Ok(Self {
            node: Arc::new(Node {
                connector,
                pool,
                pool_max_size: config.pool_max_size,
            }),
            name,
        })
    }

    /// Runs `f` on a pooled connection to the node that owns `key`, classifying its
    /// error for the object `key` names. See [`Node::run`] for what is retried.
    pub(crate) fn run<T>(
        &self,
        key: &str,
        f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        self.node.run(key, f)
    }

    /// A pooled connection to the node that owns `key`, for a caller that writes a
    /// request and reads its reply in two steps (the quorum engine writes to every
    /// member before it reads any reply). See [`Checkout`]. With `wait` `None` only an
    /// idle connection will do (`Ok(None)` when there is none); otherwise the pool may
    /// open one, waiting at most `wait` (and never longer than the connection timeout).
    ///
    /// # Errors
    ///
    /// [`Error::PoolTimeout`] when no connection becomes free in time.
    pub(crate) fn checkout(&self, _key: &str, wait: Option<Duration>) -> Result<Option<Checkout>> {
        self.node.checkout(wait)
    }

    /// The command scripts publish unlock and release messages with, as the Redisson
    /// clients of this deployment listen for them.
    pub(crate) fn publish_command(&self) -> &'static str {
        PUBLISH
    }

    /// The node whose subscriptions hear messages on `channel`.
    pub(crate) fn subscriber_node(&self, _channel: &str) -> Arc<Node> {
        Arc::clone(&self.node)
    }

    /// Connections for a background thread that must not wait for the pool: opened on
    /// demand, one per node, with connect and response timeouts capped at `cap`.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] when the address does not parse.
    pub(crate) fn dedicated(&self, config: &Config, cap: Duration) -> Result<Dedicated> {
        let connector = Connector::new(
            config,
            config.connection_timeout.min(cap),
            config.response_timeout.min(cap),
        )?
        .named(&self.name);
        Ok(Dedicated {
            connector,
            conn: None,
        })
    }
}

/// One Redis server: how to open connections to it, and its command pool.
#[derive(Debug)]
pub(crate) struct Node {
    connector: Connector,
    pool: Pool,
    pool_max_size: u32,
}

impl Node {
    /// Opens connections to this node with the client's timeouts; for the subscriber's
    /// own connection.
    pub(crate) fn connector(&self) -> &Connector {
        &self.connector
    }

    /// A best-effort `PUBLISH` on a pooled connection, for messages that only wake a
    /// thread of this process (the subscriber's control channel).
    pub(crate) fn publish(&self, channel: &str, message: &str) -> Result<()> {
        let mut pooled = self.pool.get()?;
        redis::cmd("PUBLISH")
            .arg(channel)
            .arg(message)
            .query::<i64>(&mut pooled.conn)
            .map(drop)
            .map_err(|e| {
                // A connection whose reply went missing must not be reused.
                pooled.broken = is_connection_error(&e);
                Error::from(e)
            })
    }

    fn checkout(&self, wait: Option<Duration>) -> Result<Option<Checkout>> {
        let pooled = match wait {
            None => self.pool.try_get(),
            Some(wait) => {
                let wait = wait
                    .min(self.pool.connection_timeout())
                    .max(Duration::from_millis(1));
                Some(self.pool.get_timeout(wait)?)
            }
        };
        Ok(pooled.map(|pooled| Checkout {
            pooled,
            response_timeout: self.connector.response_timeout(),
        }))
    }

    /// Runs one command on a pooled connection, classifying its error for the object
    /// `name` names.
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
        let mut attempts = self.pool_max_size + 1;
        loop {
            let mut pooled = self.pool.get()?;
            let err = match f(&mut pooled.conn) {
                Ok(value) => return Ok(value),
                Err(e) => e,
            };
            if is_connection_error(&err) {
                // The reply stream is out of step now; the pool must close it.
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
}

/// A pooled connection driven by hand: a request is written with [`send`](Self::send)
/// and its reply read later with [`recv`](Self::recv), so that a caller can have requests
/// in flight on several nodes at once.
///
/// A connection whose reply stream may be out of step (an I/O error, a timeout) is
/// condemned and the pool closes it instead of handing it out again, as [`Node::run`]
/// does for its own connections.
pub(crate) struct Checkout {
    pooled: r2d2::PooledConnection<Connector>,
    response_timeout: Duration,
}

impl std::fmt::Debug for Checkout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkout")
            .field("broken", &self.pooled.broken)
            .finish_non_exhaustive()
    }
}

impl Checkout {
    /// The connection itself, for a follow-up command in the usual request-reply way.
    pub(crate) fn conn(&mut self) -> &mut redis::Connection {
        &mut self.pooled.conn
    }

    /// Writes one packed command without reading its reply.
    pub(crate) fn send(&mut self, packed: &[u8]) -> RedisResult<()> {
        let sent = self.pooled.conn.send_packed_command(packed);
        if sent.as_ref().is_err_and(is_connection_error) {
            self.condemn();
        }
        sent
    }

    /// Reads the reply of the command sent last, waiting at most `within` (never longer
    /// than the client's response timeout). An error reply is returned as `Err`.
    pub(crate) fn recv(&mut self, within: Option<Duration>) -> RedisResult<Value> {
        // Only a budget shorter than the connection's own timeout needs a change of the
        // socket's timeout (two system calls); the usual path leaves it alone.
        let shorter = within.filter(|w| *w < self.response_timeout);
        if let Some(w) = shorter {
            // A zero timeout means "block forever" to the socket, so at least 1 ms.
            let w = w.max(Duration::from_millis(1));
            if let Err(e) = self.pooled.conn.set_read_timeout(Some(w)) {
                self.condemn();
                return Err(e);
            }
        }
        let reply = self
            .pooled
            .conn
            .recv_response()
            .and_then(Value::extract_error);
        if reply.as_ref().is_err_and(is_connection_error) {
            // A late reply would be read as the answer to the next command.
            self.condemn();
        } else if shorter.is_some()
            && self
                .pooled
                .conn
                .set_read_timeout(Some(self.response_timeout))
                .is_err()
        {
            self.condemn();
        }
        reply
    }

    /// Marks the connection as out of step: the pool closes it.
    pub(crate) fn condemn(&mut self) {
        self.pooled.broken = true;
    }
}

/// A background thread's own connections, one per node, opened on demand; a failed
/// command drops its connection so that the next one starts clean.
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

/// Keys whose commands may share one multi-key script call; see [`Dedicated::group`].
pub(crate) type Group = u64;

impl Dedicated {
    /// Which keys may be batched into one script call with `key`: keys of one group live
    /// on one node, in a way a multi-key script accepts. A single server has one group.
    pub(crate) fn group(&self, _key: &str) -> Group {
        0
    }

    /// Runs `f` on the connection to the node that owns `key` (every key of a batch
    /// belongs to one [`group`](Self::group)). On any error the connection is dropped:
    /// its reply stream may be out of step.
    pub(crate) fn run<T>(
        &mut self,
        _key: &str,
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
