//! Where the tool connects: the connection options every command shares, and the
//! handle that routes each key, channel and server-wide command to its node.
//!
//! Today a deployment is one server (`--url`). A topology adds one flag to
//! [`ConnectOpts`] (`--cluster URL…`, `--sentinel URL… --master NAME`, `--redisson-yaml
//! FILE`), one variant to [`Deployment`] and its arm in [`Redis::open`]; the commands only
//! ever call [`Redis::on_key`], [`Redis::nodes`], [`Redis::subscriber`] and
//! [`Redis::publish_command`], so none of them changes.

use std::time::Duration;

use crate::address;
use crate::fail::Failure;

/// The connection options of every command that talks to Redis.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ConnectOpts {
    /// The Redis server, as a URL: redis://[user[:password]@]host[:port][/db], rediss://
    /// for TLS.
    #[arg(
        long,
        env = "REDMUTEX_URL",
        default_value = "redis://127.0.0.1:6379/",
        hide_env_values = true
    )]
    pub(crate) url: String,
    /// How long to wait for a connection and for each reply, in milliseconds.
    #[arg(long, default_value_t = 3000, value_name = "MS")]
    pub(crate) timeout_ms: u64,
}

/// The kind of deployment the options name.
#[derive(Debug, Clone)]
pub(crate) enum Deployment {
    /// One server at this URL.
    Single(String),
}

impl ConnectOpts {
    /// The deployment these options describe.
    pub(crate) fn deployment(&self) -> Deployment {
        Deployment::Single(self.url.clone())
    }

    /// The same options with another URL (`doctor URL`).
    pub(crate) fn with_url(&self, url: Option<&str>) -> Self {
        let mut opts = self.clone();
        if let Some(url) = url {
            opts.url = url.to_owned();
        }
        opts
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.max(1))
    }
}

/// The name the tool's own connections carry: not `redmutex:<id>`, so `status` never
/// takes the tool for a lock holder.
pub(crate) const TOOL_CONNECTION_NAME: &str = "redmutex-cli";

/// An open deployment: one command connection per node, opened on demand.
pub(crate) struct Redis {
    url: String,
    timeout: Duration,
    client: redis::Client,
    conn: redis::Connection,
    own_id: i64,
}

impl Redis {
    /// Connects to the deployment `opts` name.
    pub(crate) fn open(opts: &ConnectOpts) -> Result<Self, Failure> {
        match opts.deployment() {
            Deployment::Single(url) => {
                let client = redis::Client::open(url.as_str())
                    .map_err(|e| Failure::usage(address::explain(&url, &e)))?;
                let mut redis = Self {
                    conn: connect(&client, &url, opts.timeout())?,
                    url,
                    timeout: opts.timeout(),
                    client,
                    own_id: 0,
                };
                redis.own_id = redis::cmd("CLIENT")
                    .arg("ID")
                    .query(&mut redis.conn)
                    .unwrap_or(0);
                Ok(redis)
            }
        }
    }

    /// The address, password masked, for messages.
    pub(crate) fn shown(&self) -> String {
        address::redact(&self.url)
    }

    /// The user the URL logs in as (`default` when it names none).
    pub(crate) fn user(&self) -> String {
        let rest = self.url.split_once("://").map_or("", |(_, r)| r);
        let user = rest
            .rsplit_once('@')
            .map_or("", |(info, _)| info.split(':').next().unwrap_or(""));
        if user.is_empty() {
            "default".to_owned()
        } else {
            user.to_owned()
        }
    }

    /// The connection to the node that owns `key`.
    pub(crate) fn on_key(&mut self, _key: &str) -> &mut redis::Connection {
        &mut self.conn
    }

    /// One connection per node, for server-wide commands (`SCAN`, `CLIENT LIST`, `INFO`).
    pub(crate) fn nodes(&mut self) -> Vec<&mut redis::Connection> {
        vec![&mut self.conn]
    }

    /// The `CLIENT ID` of the tool's own connections, which `CLIENT LIST` also shows.
    pub(crate) fn own_ids(&self) -> Vec<i64> {
        vec![self.own_id]
    }

    /// A fresh connection, with no read timeout, for subscriptions to `channels`; they
    /// all live on the node it is opened to.
    pub(crate) fn subscriber(&self, _channels: &[String]) -> Result<redis::Connection, Failure> {
        let conn = connect(&self.client, &self.url, self.timeout)?;
        conn.set_read_timeout(None).map_err(Failure::redis)?;
        Ok(conn)
    }

    /// The command Redisson's scripts publish with in this deployment.
    pub(crate) fn publish_command(&self) -> &'static str {
        "PUBLISH"
    }
}

/// A named connection with timeouts, or a one-line reason and what to check.
fn connect(
    client: &redis::Client,
    url: &str,
    timeout: Duration,
) -> Result<redis::Connection, Failure> {
    let fail = |e: redis::RedisError| {
        Failure::runtime(address::connect_failure(&address::redact(url), &e))
    };
    let mut conn = client.get_connection_with_timeout(timeout).map_err(fail)?;
    conn.set_read_timeout(Some(timeout)).map_err(fail)?;
    conn.set_write_timeout(Some(timeout)).map_err(fail)?;
    // Best effort: a user without `client|setname` still gets its answers.
    let _ = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg(TOOL_CONNECTION_NAME)
        .query::<()>(&mut conn);
    Ok(conn)
}
