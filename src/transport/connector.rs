//! Opening connections to one Redis node: where it is and how to log in (an
//! [`Endpoint`]), connections with the client's timeouts (a [`Connector`]), and a single
//! server's command pool (r2d2, taken in turns).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, ProtocolVersion};

use super::slots::{join_host_port, split_host_port};
use super::turns::{Patience, Turn, Turns};
use crate::address;
use crate::config::Config;
use crate::error::{Error, Result, is_connection_error};

/// Where one node is and how to log in: address, TLS, credentials, database.
///
/// Cluster nodes are learned as bare `host:port`; [`at`](Self::at) gives them the seed's
/// TLS mode, root certificate and credentials.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    info: ConnectionInfo,
    root_cert: Option<Vec<u8>>,
}

impl Endpoint {
    /// The endpoint a URL names, with the credentials of `config` (its
    /// [`username`](Config::username) and password override the URL's) and its
    /// [`database`](Config::database).
    pub(crate) fn from_url(url: &str, config: &Config) -> Result<Self> {
        let mut endpoint = Self::parse(url, config)?
            .with_credentials(config.username.as_deref(), config.password.as_deref());
        let redis = endpoint
            .info
            .redis_settings()
            .clone()
            .set_db(config.database());
        endpoint.info = endpoint.info.set_redis_settings(redis);
        Ok(endpoint)
    }

    /// The endpoint a URL names, with the URL's own credentials.
    pub(crate) fn parse(url: &str, config: &Config) -> Result<Self> {
        let info = url
            .into_connection_info()
            .map_err(|e| Error::Config(address::explain(url, &e)))?;
        Ok(Self {
            info,
            root_cert: config.tls_root_certificate.clone(),
        })
    }

    /// The same endpoint with the given user and password instead of its own; `None`
    /// keeps its own.
    pub(crate) fn with_credentials(mut self, user: Option<&str>, password: Option<&str>) -> Self {
        if user.is_some() || password.is_some() {
            let mut redis = self.info.redis_settings().clone();
            if let Some(user) = user {
                redis = redis.set_username(user);
            }
            if let Some(password) = password {
                redis = redis.set_password(password);
            }
            self.info = self.info.set_redis_settings(redis);
        }
        self
    }

    /// The same address with only this login and database (a sentinel's address used
    /// for the data nodes it names, which log in on their own).
    pub(crate) fn with_login(
        mut self,
        user: Option<&str>,
        password: Option<&str>,
        db: i64,
    ) -> Self {
        let mut redis = redis::RedisConnectionInfo::default().set_db(db);
        if let Some(user) = user {
            redis = redis.set_username(user);
        }
        if let Some(password) = password {
            redis = redis.set_password(password);
        }
        self.info = self.info.set_redis_settings(redis);
        self
    }

    /// The same login at another `host:port`.
    pub(crate) fn at(&self, addr: &str) -> Result<Self> {
        let (host, port) = split_host_port(addr)
            .ok_or_else(|| Error::Config(format!("bad node address {addr:?}")))?;
        let to = match self.info.addr() {
            ConnectionAddr::TcpTls { insecure, .. } => ConnectionAddr::TcpTls {
                host,
                port,
                insecure: *insecure,
                tls_params: None,
            },
            _ => ConnectionAddr::Tcp(host, port),
        };
        Ok(Self {
            info: self.info.clone().set_addr(to),
            root_cert: self.root_cert.clone(),
        })
    }

    /// `host:port` (a Unix socket's path for one).
    pub(crate) fn addr(&self) -> String {
        match self.info.addr() {
            ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                join_host_port(host, *port)
            }
            other => other.to_string(),
        }
    }

    /// The ACL user this endpoint logs in as (`default` when none is named).
    pub(crate) fn user(&self) -> &str {
        self.info.redis_settings().username().unwrap_or("default")
    }

    /// A plain `redis` client with this endpoint's address, TLS, login and database.
    pub(crate) fn client(&self, protocol: ProtocolVersion) -> Result<redis::Client> {
        let redis = self.info.redis_settings().clone().set_protocol(protocol);
        self.client_with(redis)
    }

    /// A client whose connection setup sends one command at most (`AUTH`, or `HELLO`
    /// for RESP3), for a [`Connector`], which selects the database itself.
    ///
    /// redis-rs reads every reply of its setup pipeline even after a read timed out, so
    /// each command in it (`SELECT`, the two `CLIENT SETINFO`) can add a whole
    /// connection timeout against a server that accepts and never answers: four of
    /// them with a password and a database. The connector then runs each later step
    /// against what is left of one connection timeout instead.
    fn setup_client(&self, protocol: ProtocolVersion) -> Result<redis::Client> {
        let redis = self
            .info
            .redis_settings()
            .clone()
            .set_protocol(protocol)
            .set_db(0)
            .set_skip_set_lib_name();
        self.client_with(redis)
    }

    /// The database index.
    fn db(&self) -> i64 {
        self.info.redis_settings().db()
    }

    fn client_with(&self, redis: redis::RedisConnectionInfo) -> Result<redis::Client> {
        let bad = |e: redis::RedisError| Error::Config(format!("bad redis address: {e}"));
        let info = self.info.clone().set_redis_settings(redis);
        match &self.root_cert {
            #[cfg(feature = "tls")]
            Some(pem) => redis::Client::build_with_tls(
                info,
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(pem.clone()),
                },
            )
            .map_err(bad),
            #[cfg(not(feature = "tls"))]
            Some(_) => Err(Error::Config(
                "a TLS root certificate needs the `tls` feature".into(),
            )),
            None => redis::Client::open(info).map_err(bad),
        }
    }
}

/// Opens connections with the client's connect and response timeouts applied.
///
/// Every connection gets read and write timeouts, so no command can block longer than
/// the response timeout: a blackholed server turns into an error, not a hang.
#[derive(Debug, Clone)]
pub(crate) struct Connector {
    client: redis::Client,
    endpoint: Endpoint,
    addr: String,
    connect_timeout: Duration,
    response_timeout: Duration,
    /// What every connection calls itself (`CLIENT SETNAME`), so `CLIENT LIST` shows
    /// which client holds it.
    name: Option<String>,
    /// The generation of the connections opened from now on, shared by every clone; see
    /// [`condemn`](Self::condemn).
    generation: Arc<AtomicU64>,
}

impl Connector {
    /// Connections to the single server of `config`.
    pub(crate) fn new(
        config: &Config,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> Result<Self> {
        let endpoint = Endpoint::from_url(config.address(), config)?;
        Self::to(&endpoint, connect_timeout, response_timeout)
    }

    /// RESP2 connections to `endpoint`.
    pub(crate) fn to(
        endpoint: &Endpoint,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> Result<Self> {
        Ok(Self {
            client: endpoint.setup_client(ProtocolVersion::RESP2)?,
            addr: endpoint.addr(),
            endpoint: endpoint.clone(),
            connect_timeout,
            response_timeout,
            name: None,
            generation: Arc::default(),
        })
    }

    /// The same node with other timeouts.
    pub(crate) fn with_timeouts(&self, connect: Duration, response: Duration) -> Self {
        Self {
            connect_timeout: connect,
            response_timeout: response,
            ..self.clone()
        }
    }

    /// The same node, speaking RESP3: for subscriber connections, where every message
    /// and every subscription change arrives as a push frame, apart from the replies.
    pub(crate) fn resp3(&self) -> Result<Self> {
        Ok(Self {
            client: self.endpoint.setup_client(ProtocolVersion::RESP3)?,
            ..self.clone()
        })
    }

    /// Names every connection opened from now on `name` (`CLIENT SETNAME`).
    pub(crate) fn named(mut self, name: &str) -> Self {
        self.name = Some(name.to_owned());
        self
    }

    /// A new connection whose reads and writes time out after the response timeout.
    pub(crate) fn connect(&self) -> redis::RedisResult<redis::Connection> {
        self.connect_and(false)
    }

    /// A new connection, set up (login, database, name, and a `PING` when `ping`) within
    /// one connection timeout in all: a server that accepts and never answers fails it
    /// after that timeout, not after one timeout per setup command.
    fn connect_and(&self, ping: bool) -> redis::RedisResult<redis::Connection> {
        let deadline = Instant::now() + self.connect_timeout;
        let mut conn = self
            .client
            .get_connection_with_timeout(self.connect_timeout)?;
        // Each step may wait for what is left of the budget, no more.
        let budget = |conn: &redis::Connection| -> redis::RedisResult<()> {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(std::io::Error::from(std::io::ErrorKind::TimedOut).into());
            }
            conn.set_read_timeout(Some(left))?;
            conn.set_write_timeout(Some(left))
        };
        if self.endpoint.db() != 0 {
            budget(&conn)?;
            redis::cmd("SELECT")
                .arg(self.endpoint.db())
                .query::<()>(&mut conn)?;
        }
        if let Some(name) = &self.name {
            budget(&conn)?;
            // The name only helps operators; a server or proxy that refuses it (ACL
            // without `client|setname`, no CLIENT command) must not cost the connection.
            match redis::cmd("CLIENT")
                .arg("SETNAME")
                .arg(name)
                .query::<()>(&mut conn)
            {
                Err(e) if is_connection_error(&e) => return Err(e),
                Err(e) => log::debug!("redmutex: CLIENT SETNAME refused: {e}"),
                Ok(()) => {}
            }
        }
        if ping {
            budget(&conn)?;
            match redis::cmd("PING").query::<()>(&mut conn) {
                // A user without the right to PING is logged in all the same.
                Err(e) if e.code() != Some("NOPERM") => return Err(e),
                _ => {}
            }
        }
        conn.set_read_timeout(Some(self.response_timeout))?;
        conn.set_write_timeout(Some(self.response_timeout))?;
        Ok(conn)
    }

    /// A client's first connection to this node, checked: connected (TCP, TLS, the
    /// login, `SELECT` of the database) and one `PING`, so that a refused login or a
    /// database the server does not have shows when the client is created rather than
    /// at its first lock. Without the `PING` a missing password goes unnoticed: nothing
    /// in the connection's setup needs one. `shown` names the node in messages (its
    /// password masked).
    ///
    /// # Errors
    ///
    /// [`Error::Auth`] for a refused login, [`Error::Config`] for a database the server
    /// does not have, [`Error::Connect`] for anything else.
    pub(crate) fn open_checked(&self, shown: &str) -> Result<redis::Connection> {
        self.connect_and(true)
            .map_err(|e| self.first_failure(shown, e))
    }

    /// What a failure of the first connection (`err`) means for the caller.
    pub(crate) fn first_failure(&self, shown: &str, err: redis::RedisError) -> Error {
        let settings = self.endpoint.info.redis_settings();
        if address::is_login_refusal(&err) {
            return Error::Auth {
                address: shown.to_owned(),
                user: settings.username().unwrap_or("default").to_owned(),
                source: Box::new(err),
            };
        }
        let db = settings.db();
        if db != 0 && err.to_string().contains("DB index") {
            return Error::Config(format!(
                "redis at `{shown}` has no database {db} ({err}): its `databases` setting \
                 (16 by default) bounds the index; set ConfigBuilder::database, Redisson's \
                 `database` or the address's /db to one it has"
            ));
        }
        let source = if err.is_timeout() {
            // The OS says "Resource temporarily unavailable"; say which wait ran out.
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "no answer within the connection timeout ({:?})",
                    self.connect_timeout
                ),
            )
            .into()
        } else {
            err
        };
        Error::Connect {
            address: shown.to_owned(),
            source,
        }
    }

    pub(crate) fn response_timeout(&self) -> Duration {
        self.response_timeout
    }

    pub(crate) fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// The generation of connections opened from now on.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// A connection of `generation` was found closed by the server or the network: the
    /// idle connections opened with it most likely were too (a restart, a proxy reset),
    /// so all of them are condemned and the pool opens new ones. Only the first of a
    /// wave of such failures moves the generation on: the others name the old one, and
    /// the connections opened after it stay.
    pub(crate) fn condemn(&self, generation: u64) {
        let _ = self.generation.compare_exchange(
            generation,
            generation.wrapping_add(1),
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }

    /// The node's `host:port`.
    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }
}

/// A pooled connection that can be condemned.
///
/// After a timeout or an I/O error the reply stream is in an unknown state: a reply may
/// still arrive, or may never arrive (a lost segment, a proxy that dropped it), and the
/// next command on the connection would read the wrong answer. Such a connection is
/// marked broken and the pool closes it instead of handing it out again.
pub(crate) struct PoolConn {
    pub(crate) conn: redis::Connection,
    pub(crate) broken: bool,
    /// The generation it was opened in; older than the connector's means condemned.
    pub(crate) generation: u64,
}

impl PoolConn {
    /// Whether a failure (`err`) on this connection showed it closed rather than slow:
    /// then its generation is condemned (see [`Connector::condemn`]).
    pub(crate) fn failed(&mut self, connector: &Connector, err: &redis::RedisError) {
        // The reply stream is out of step now; the pool must close it.
        self.broken = is_connection_error(err);
        if err.is_connection_dropped() && !err.is_timeout() {
            connector.condemn(self.generation);
        }
    }
}

impl r2d2::ManageConnection for Connector {
    type Connection = PoolConn;
    type Error = redis::RedisError;

    fn connect(&self) -> Result<Self::Connection, Self::Error> {
        // Read before connecting: a connection opened while its generation is condemned
        // is condemned with it, never the other way round.
        let generation = self.generation();
        Ok(PoolConn {
            conn: Connector::connect(self)?,
            broken: false,
            generation,
        })
    }

    fn is_valid(&self, conn: &mut Self::Connection) -> Result<(), Self::Error> {
        redis::cmd("PING").query::<()>(&mut conn.conn)
    }

    fn has_broken(&self, conn: &mut Self::Connection) -> bool {
        // redis-rs also marks a connection closed after EOF or a protocol error.
        conn.broken
            || !redis::ConnectionLike::is_open(&conn.conn)
            || conn.generation != self.generation()
    }
}

/// A single server's command pool: r2d2's connections, taken in [`Turns`] so that a
/// woken waiter's retry does not queue behind every other thread's first attempt, and
/// so that a busy pool makes callers wait rather than fail (see `turns.rs`).
#[derive(Debug)]
pub(crate) struct Pool {
    turns: Arc<Turns>,
    inner: r2d2::Pool<Connector>,
    /// The server's `host:port` and the pool's size, for [`Error::PoolTimeout`].
    addr: String,
    size: u32,
}

/// A connection of a [`Pool`], with the turn it was taken in.
pub(crate) struct Pooled {
    // Fields drop in order: the connection goes back to r2d2 before the turn is handed
    // on, so the next turn's holder finds it idle there instead of waiting for it.
    conn: r2d2::PooledConnection<Connector>,
    /// `None` for a connection r2d2 gave out after the turns had stalled.
    _turn: Option<Turn>,
}

impl std::ops::Deref for Pooled {
    type Target = PoolConn;

    fn deref(&self) -> &PoolConn {
        &self.conn
    }
}

impl std::ops::DerefMut for Pooled {
    fn deref_mut(&mut self) -> &mut PoolConn {
        &mut self.conn
    }
}

impl Pool {
    /// A connection, waiting as long as other threads keep giving connections back.
    ///
    /// # Errors
    ///
    /// [`Error::PoolTimeout`] when no connection came back for a whole connection
    /// timeout, or when r2d2 cannot open one within it (with its last connect error).
    pub(crate) fn get(&self) -> Result<Pooled> {
        let asked = Instant::now();
        let timeout = self.inner.connection_timeout();
        let turn = self.turns.take(Patience::WhileMoving(timeout));
        self.with(turn, timeout, asked)
    }

    /// A connection within `wait`.
    ///
    /// # Errors
    ///
    /// [`Error::PoolTimeout`] when none came free in time.
    pub(crate) fn get_timeout(&self, wait: Duration) -> Result<Pooled> {
        let asked = Instant::now();
        let until = asked + wait;
        let turn = self.turns.take(Patience::Until(until));
        self.with(turn, until.saturating_duration_since(Instant::now()), asked)
    }

    /// An idle connection, without waiting.
    pub(crate) fn try_get(&self) -> Option<Pooled> {
        let mut turn = self.turns.try_take()?;
        let conn = self.inner.try_get()?;
        turn.served();
        Some(Pooled {
            conn,
            _turn: Some(turn),
        })
    }

    /// The connection for `turn`, waiting at most `wait` for r2d2 (which makes a turn's
    /// holder wait only while a connection is being opened). Without a turn (the queue
    /// stood still, or `wait` ran out) r2d2's own answer: its timeout, with the last
    /// connect error if there was one, unless a connection came free just then.
    fn with(&self, mut turn: Option<Turn>, wait: Duration, asked: Instant) -> Result<Pooled> {
        // A zero wait is "at once"; r2d2 gets at least 1 ms.
        let wait = if turn.is_some() {
            wait.max(Duration::from_millis(1))
        } else {
            Duration::from_millis(1)
        };
        let conn = self
            .inner
            .get_timeout(wait)
            .map_err(|e| Error::PoolTimeout {
                address: self.addr.clone(),
                pool_size: self.size,
                waited: asked.elapsed(),
                connect_error: connect_error(&e),
            })?;
        if let Some(turn) = turn.as_mut() {
            turn.served();
        }
        Ok(Pooled { conn, _turn: turn })
    }

    /// How long a checkout may wait for a connection.
    pub(crate) fn connection_timeout(&self) -> Duration {
        self.inner.connection_timeout()
    }
}

/// The last connect error an r2d2 timeout carries, if any. r2d2 has no accessor for it:
/// its message is `timed out waiting for connection`, then `: ` and the error.
fn connect_error(timeout: &r2d2::Error) -> Option<Box<str>> {
    let text = timeout.to_string();
    text.split_once(": ").map(|(_, cause)| cause.into())
}

/// Builds the pool; waits until `min_idle` connections are open, so a wrong address or
/// password fails here rather than at the first lock.
pub(crate) fn build_pool(connector: Connector, config: &Config) -> Result<Pool> {
    let addr = connector.addr().to_owned();
    let inner = r2d2::Pool::builder()
        .max_size(config.pool_max_size)
        .min_idle(config.pool_min_idle)
        .connection_timeout(config.connection_timeout)
        // A PING per checkout would double the round trips of every lock operation;
        // broken connections are caught by `has_broken` instead.
        .test_on_check_out(false)
        .error_handler(Box::new(r2d2::LoggingErrorHandler))
        .build(connector)
        .map_err(|e| {
            Error::Config(format!(
                "cannot fill the connection pool for `{}`: {e}",
                crate::address::redact(config.address())
            ))
        })?;
    Ok(Pool {
        turns: Turns::new(config.pool_max_size),
        inner,
        addr,
        size: config.pool_max_size,
    })
}
