//! Opening connections to one Redis node: the r2d2 manager of a command pool, and the
//! connections the background threads keep for themselves.

use std::time::Duration;

use crate::address;
use crate::config::Config;
use crate::error::{Error, Result, is_connection_error};

/// Opens connections with the client's connect and response timeouts applied.
///
/// Every connection gets read and write timeouts, so no command can block longer than
/// the response timeout: a blackholed server turns into an error, not a hang.
#[derive(Debug, Clone)]
pub(crate) struct Connector {
    client: redis::Client,
    connect_timeout: Duration,
    response_timeout: Duration,
    /// What every connection calls itself (`CLIENT SETNAME`), so `CLIENT LIST` shows
    /// which client holds it.
    name: Option<String>,
}

impl Connector {
    pub(crate) fn new(
        config: &Config,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> Result<Self> {
        let bad = |e: redis::RedisError| Error::Config(address::explain(config.address(), &e));
        let client = match config.tls_root_certificate() {
            #[cfg(feature = "tls")]
            Some(pem) => redis::Client::build_with_tls(
                config.address(),
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(pem.to_vec()),
                },
            )
            .map_err(bad)?,
            #[cfg(not(feature = "tls"))]
            Some(_) => {
                return Err(Error::Config(
                    "a TLS root certificate needs the `tls` feature".into(),
                ));
            }
            None => redis::Client::open(config.address()).map_err(bad)?,
        };
        Ok(Self {
            client,
            connect_timeout,
            response_timeout,
            name: None,
        })
    }

    /// Names every connection opened from now on `name` (`CLIENT SETNAME`).
    pub(crate) fn named(mut self, name: &str) -> Self {
        self.name = Some(name.to_owned());
        self
    }

    /// A new connection whose reads and writes time out after the response timeout.
    pub(crate) fn connect(&self) -> redis::RedisResult<redis::Connection> {
        let mut conn = self
            .client
            .get_connection_with_timeout(self.connect_timeout)?;
        conn.set_read_timeout(Some(self.response_timeout))?;
        conn.set_write_timeout(Some(self.response_timeout))?;
        if let Some(name) = &self.name {
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
        Ok(conn)
    }

    pub(crate) fn response_timeout(&self) -> Duration {
        self.response_timeout
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
}

impl r2d2::ManageConnection for Connector {
    type Connection = PoolConn;
    type Error = redis::RedisError;

    fn connect(&self) -> Result<Self::Connection, Self::Error> {
        Ok(PoolConn {
            conn: Connector::connect(self)?,
            broken: false,
        })
    }

    fn is_valid(&self, conn: &mut Self::Connection) -> Result<(), Self::Error> {
        redis::cmd("PING").query::<()>(&mut conn.conn)
    }

    fn has_broken(&self, conn: &mut Self::Connection) -> bool {
        // redis-rs also marks a connection closed after EOF or a protocol error.
        conn.broken || !redis::ConnectionLike::is_open(&conn.conn)
    }
}

/// A command pool for one node.
pub(crate) type Pool = r2d2::Pool<Connector>;

/// Builds the pool; waits until `min_idle` connections are open, so a wrong address or
/// password fails here rather than at the first lock.
pub(crate) fn build_pool(connector: Connector, config: &Config) -> Result<Pool> {
    r2d2::Pool::builder()
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
        })
}
