//! Where the tool connects: the connection options every command shares, and the
//! handle that routes each key, channel and server-wide command to its node.
//!
//! Every mode of the library is one set of options: `--url` (one server), `--cluster`
//! (seed nodes), `--sentinel` with `--master`, or `--redisson-yaml` (any of the three).
//! They become a library [`Config`], so addresses, TLS and logins are read by the
//! library's own code ([`Config::seed_clients`], [`Config::node_client`]); the tool then
//! finds the nodes itself (`CLUSTER SLOTS`, `SENTINEL get-master-addr-by-name`) and keeps
//! one plain connection per master. The commands only ever call [`Redis::on_key`],
//! [`Redis::nodes`], [`Redis::subscriber`] and [`Redis::publish_command`].

use std::time::Duration;

use redmutex::{Config, ConfigBuilder};

use crate::address;
use crate::fail::Failure;
use crate::sentinels;
use crate::slots::{SlotMap, key_slot};

/// Where [`ConnectOpts::url`] points when neither it nor `REDMUTEX_URL` is set.
const DEFAULT_URL: &str = "redis://127.0.0.1:6379/";

/// The connection options of every command that talks to Redis.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ConnectOpts {
    /// One Redis server, as a URL: redis://[user[:password]@]host[:port][/db], rediss://
    /// for TLS [default: $REDMUTEX_URL, else redis://127.0.0.1:6379/].
    #[arg(long, value_name = "URL", conflicts_with_all = ["cluster", "sentinel", "redisson_yaml"])]
    pub(crate) url: Option<String>,
    /// A Redis Cluster, by some of its nodes (host:port or URLs, comma-separated); the
    /// others are learned from CLUSTER SLOTS. Credentials and rediss:// as in --url.
    #[arg(
        long,
        value_name = "ADDR,...",
        value_delimiter = ',',
        conflicts_with_all = ["sentinel", "redisson_yaml"]
    )]
    pub(crate) cluster: Vec<String>,
    /// Sentinels (host:port or URLs, comma-separated) to ask for the master named by
    /// --master. Credentials in these URLs log in to the sentinels; --user and
    /// --password to the master.
    #[arg(
        long,
        value_name = "ADDR,...",
        value_delimiter = ',',
        requires = "master",
        conflicts_with = "redisson_yaml"
    )]
    pub(crate) sentinel: Vec<String>,
    /// The master name the sentinels monitor (Redisson's masterName).
    #[arg(long, value_name = "NAME", requires = "sentinel")]
    pub(crate) master: Option<String>,
    /// A Redisson YAML config file (singleServerConfig, clusterServersConfig or
    /// sentinelServersConfig), read as the library's Config::from_redisson_yaml_file reads it,
    /// with ${VAR} replaced from the environment.
    #[arg(long, value_name = "PATH")]
    pub(crate) redisson_yaml: Option<String>,
    /// The ACL user for the data nodes, overriding the one in the addresses.
    #[arg(long, value_name = "USER", conflicts_with = "redisson_yaml")]
    pub(crate) user: Option<String>,
    /// The password for the data nodes, overriding the one in the addresses [default:
    /// $REDMUTEX_PASSWORD, which is better: a command line is visible to other users;
    /// a Redisson YAML file carries its own].
    // Not clap's `env`: a variable set for every shell must not conflict with
    // --redisson-yaml.
    #[arg(long, conflicts_with = "redisson_yaml")]
    pub(crate) password: Option<String>,
    /// How long to wait for a connection and for each reply, in milliseconds.
    #[arg(long, default_value_t = 3000, value_name = "MS")]
    pub(crate) timeout_ms: u64,
    /// With --sentinel: how long to keep asking the sentinels, in milliseconds, while the
    /// master they name is down or no longer a master (a failover under way).
    #[arg(long, default_value_t = 30_000, value_name = "MS")]
    pub(crate) failover_wait_ms: u64,
}

impl ConnectOpts {
    /// The same options with another single-server URL (`doctor URL`).
    pub(crate) fn with_url(&self, url: Option<&str>) -> Result<Self, Failure> {
        let mut opts = self.clone();
        if let Some(url) = url {
            if !self.cluster.is_empty() || !self.sentinel.is_empty() || self.redisson_yaml.is_some()
            {
                return Err(Failure::usage(
                    "a URL argument names one server: drop it, or drop --cluster, --sentinel \
                     and --redisson-yaml",
                ));
            }
            opts.url = Some(url.to_owned());
        }
        Ok(opts)
    }

    /// The library configuration these options describe.
    fn config(&self) -> Result<Config, Failure> {
        self.config_tuned(|builder| builder)
    }

    /// [`config`](Self::config) for a command that takes locks through the library
    /// (`run`), with `tune` applied to the builder; a Redisson YAML file is read as it is
    /// (it carries its own settings).
    pub(crate) fn config_tuned(
        &self,
        tune: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
    ) -> Result<Config, Failure> {
        let timeout = self.timeout();
        if let Some(path) = &self.redisson_yaml {
            if !std::path::Path::new(path).is_file() {
                return Err(Failure::usage(format!(
                    "--redisson-yaml {path:?}: no such file"
                )));
            }
            return Config::from_redisson_yaml_file(path)
                .map_err(|e| Failure::usage(e.to_string()));
        }
        let mut builder = Config::builder()
            .connection_timeout(timeout)
            .response_timeout(timeout);
        if !self.cluster.is_empty() {
            builder = builder.cluster_nodes(self.cluster.iter().map(|a| as_url(a)));
        } else if !self.sentinel.is_empty() {
            builder = builder
                .sentinel_addresses(self.sentinel.iter().map(|a| as_url(a)))
                .master_name(self.master.clone().unwrap_or_default());
        } else {
            let url = self
                .url
                .clone()
                .or_else(|| std::env::var("REDMUTEX_URL").ok())
                .unwrap_or_else(|| DEFAULT_URL.to_owned());
            builder = builder.address(url);
        }
        if let Some(user) = &self.user {
            builder = builder.username(user);
        }
        if let Some(password) = self
            .password
            .clone()
            .or_else(|| std::env::var("REDMUTEX_PASSWORD").ok())
        {
            builder = builder.password(password);
        }
        Ok(tune(builder).build())
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.max(1))
    }

    fn failover_wait(&self) -> Duration {
        Duration::from_millis(self.failover_wait_ms)
    }
}

/// `host:port` as a `redis://` URL; a URL stays as it is.
fn as_url(addr: &str) -> String {
    let addr = addr.trim();
    if addr.contains("://") {
        addr.to_owned()
    } else {
        format!("redis://{addr}")
    }
}

/// The name the tool's own connections carry: not `redmutex:<id>`, so `status` never
/// takes the tool for a lock holder.
pub(crate) const TOOL_CONNECTION_NAME: &str = "redmutex-cli";

/// One node with the tool's command connection to it.
struct Node {
    addr: String,
    client: redis::Client,
    conn: redis::Connection,
    own_id: i64,
}

impl Node {
    fn open(addr: &str, client: redis::Client, timeout: Duration) -> Result<Self, Failure> {
        let conn = connect(&client, addr, timeout)?;
        Ok(Self::with_conn(addr.to_owned(), client, conn))
    }

    fn with_conn(addr: String, client: redis::Client, mut conn: redis::Connection) -> Self {
        let own_id = redis::cmd("CLIENT").arg("ID").query(&mut conn).unwrap_or(0);
        Self {
            addr,
            client,
            conn,
            own_id,
        }
    }
}

/// An open deployment: one command connection per master.
pub(crate) struct Redis {
    /// What the options connect to, for messages (no password).
    shown: String,
    /// The ACL user the data nodes are logged in as.
    user: String,
    timeout: Duration,
    nodes: Vec<Node>,
    /// The cluster's slot map; `None` outside a cluster (the one node owns every key).
    slots: Option<SlotMap>,
    publish: &'static str,
    /// Only this node answers [`nodes`](Self::nodes) (`doctor`, one node at a time).
    focus: Option<usize>,
}

impl Redis {
    /// Connects to the deployment `opts` name.
    pub(crate) fn open(opts: &ConnectOpts) -> Result<Self, Failure> {
        let config = opts.config()?;
        let timeout = opts.timeout();
        let seeds = config
            .seed_clients()
            .map_err(|e| Failure::usage(e.to_string()))?;
        let user = user_of(&config);
        let mut redis = Self {
            shown: String::new(),
            user,
            timeout,
            nodes: Vec::new(),
            slots: None,
            publish: "PUBLISH",
            focus: None,
        };
        if let Some(master) = config.master_name() {
            let found =
                sentinels::find_master(&config, master, &seeds, timeout, opts.failover_wait())?;
            redis.shown = format!(
                "master \"{master}\" at {} (sentinels {})",
                found.addr, found.asked
            );
            redis
                .nodes
                .push(Node::with_conn(found.addr, found.client, found.conn));
        } else if config.is_cluster() {
            let (seed, map) = read_slots(&config, &seeds, timeout)?;
            for master in map.masters() {
                let client = config
                    .node_client(master)
                    .map_err(|e| Failure::usage(e.to_string()))?;
                redis.nodes.push(Node::open(master, client, timeout)?);
            }
            redis.shown = format!("cluster of {} masters via {seed}", redis.nodes.len());
            // Redisson 3.22+ on a Redis 7 cluster listens with SSUBSCRIBE, older ones and
            // redmutex with sharded mode off with SUBSCRIBE: publish both where sharded
            // pub/sub exists, so every waiter wakes.
            let sharded = redis::cmd("PUBSUB")
                .arg("SHARDNUMSUB")
                .query::<redis::Value>(&mut redis.nodes[0].conn)
                .is_ok();
            redis.publish = if sharded {
                "SPUBLISH PUBLISH"
            } else {
                "PUBLISH"
            };
            redis.slots = Some(map);
        } else {
            let url = config.address().to_owned();
            let Some((_, client)) = seeds.into_iter().next() else {
                return Err(Failure::usage("no server address"));
            };
            redis.shown = address::redact(&url);
            redis.nodes.push(Node::open(&redis.shown, client, timeout)?);
        }
        Ok(redis)
    }

    /// What the options connect to, password masked, for messages.
    pub(crate) fn shown(&self) -> String {
        match self.focus {
            Some(i) if self.slots.is_some() => format!("{} (cluster node)", self.nodes[i].addr),
            _ => self.shown.clone(),
        }
    }

    /// The user the data nodes are logged in as (`default` when none is named).
    pub(crate) fn user(&self) -> String {
        self.user.clone()
    }

    /// How many nodes answer [`nodes`](Self::nodes) without a focus.
    pub(crate) fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Makes [`nodes`](Self::nodes) answer with node `index` only (`None`: all again).
    /// Keys still go to their owners.
    pub(crate) fn focus(&mut self, index: Option<usize>) {
        self.focus = index.filter(|&i| i < self.nodes.len());
    }

    /// The index of the node that owns `key`.
    fn index_of(&self, key: &str) -> usize {
        let Some(map) = &self.slots else {
            return 0;
        };
        // An uncovered slot goes to the first node, whose CLUSTERDOWN or MOVED reply
        // says what is wrong better than a guess here.
        map.master(key_slot(key.as_bytes()))
            .and_then(|addr| self.nodes.iter().position(|n| n.addr == addr))
            .unwrap_or(0)
    }

    /// The connection to the node that owns `key` (or the channel named `key`: an
    /// object's channels carry its name as their hash tag).
    pub(crate) fn on_key(&mut self, key: &str) -> &mut redis::Connection {
        let index = self.index_of(key);
        &mut self.nodes[index].conn
    }

    /// Which node owns `key`, as an index that groups keys by node.
    pub(crate) fn node_of(&self, key: &str) -> usize {
        self.index_of(key)
    }

    /// One connection per master, for server-wide commands (`SCAN`, `CLIENT LIST`,
    /// `INFO`, `CONFIG`).
    pub(crate) fn nodes(&mut self) -> Vec<&mut redis::Connection> {
        match self.focus {
            Some(i) => vec![&mut self.nodes[i].conn],
            None => self.nodes.iter_mut().map(|n| &mut n.conn).collect(),
        }
    }

    /// The `CLIENT ID`s of the tool's own connections, which `CLIENT LIST` also shows.
    pub(crate) fn own_ids(&self) -> Vec<i64> {
        self.nodes.iter().map(|n| n.own_id).collect()
    }

    /// A fresh connection, with no read timeout, to the node whose subscriptions hear
    /// `channel` (sharded ones need the slot's owner; plain ones hear every node's
    /// `PUBLISH` there too).
    pub(crate) fn subscriber(&self, channel: &str) -> Result<redis::Connection, Failure> {
        let node = &self.nodes[self.index_of(channel)];
        let conn = connect(&node.client, &node.addr, self.timeout)?;
        conn.set_read_timeout(None).map_err(Failure::redis)?;
        Ok(conn)
    }

    /// The command (or commands, space-separated) Redisson's scripts publish with in
    /// this deployment.
    pub(crate) fn publish_command(&self) -> &'static str {
        self.publish
    }
}

/// The data nodes' user: the configured one, else the one in the (first) address.
fn user_of(config: &Config) -> String {
    if let Some(user) = config.username() {
        return user.to_owned();
    }
    let url = if config.is_sentinel() {
        // The sentinel URLs' users log in to the sentinels, not to the master.
        ""
    } else {
        config
            .node_addresses()
            .first()
            .map_or(config.address(), String::as_str)
    };
    let rest = url.split_once("://").map_or("", |(_, r)| r);
    let user = rest
        .rsplit_once('@')
        .map_or("", |(info, _)| info.split(':').next().unwrap_or(""));
    if user.is_empty() {
        "default".to_owned()
    } else {
        user.to_owned()
    }
}

/// The slot map, read from the first seed that answers, and that seed.
fn read_slots(
    config: &Config,
    seeds: &[(String, redis::Client)],
    timeout: Duration,
) -> Result<(String, SlotMap), Failure> {
    let mut unreachable = Vec::new();
    for (addr, client) in seeds {
        let mut conn = match connect(client, addr, timeout) {
            Ok(conn) => conn,
            Err(failure) => {
                unreachable.push(failure.message);
                continue;
            }
        };
        let reply = match redis::cmd("CLUSTER").arg("SLOTS").query(&mut conn) {
            Ok(reply) => reply,
            Err(e) if e.is_io_error() || e.is_timeout() => {
                unreachable.push(format!("{addr}: {e}"));
                continue;
            }
            Err(e) => {
                return Err(Failure::usage(format!(
                    "{addr} is not a cluster node (CLUSTER SLOTS answered: {e}): --cluster \
                     takes cluster nodes, --url a plain server"
                )));
            }
        };
        let nat = config.nat_map();
        let dial = |announced: String| {
            nat.iter()
                .find(|(from, _)| *from == announced)
                .map_or(announced.clone(), |(_, to)| to.clone())
        };
        let map = SlotMap::parse(&reply, addr, dial)
            .map_err(|e| Failure::runtime(format!("{addr}: {e}")))?;
        if map.masters().next().is_none() {
            return Err(Failure::runtime(format!(
                "the cluster at {addr} serves no slots yet: check `redis-cli --cluster check \
                 {addr}`"
            )));
        }
        return Ok((addr.clone(), map));
    }
    Err(Failure::runtime(format!(
        "cannot reach any cluster seed ({}): check --cluster",
        unreachable.join("; ")
    )))
}

/// A named connection with timeouts, or a one-line reason and what to check.
pub(crate) fn connect(
    client: &redis::Client,
    shown: &str,
    timeout: Duration,
) -> Result<redis::Connection, Failure> {
    let fail = |e: redis::RedisError| {
        if address::is_login_refusal(&e) {
            // The library's login message points at its builder; here the login comes
            // from the tool's options.
            let user = client
                .get_connection_info()
                .redis_settings()
                .username()
                .unwrap_or("default");
            Failure::runtime(format!(
                "redis at `{shown}` refused the login of user `{user}`: {e}; check --user and \
                 --password (or REDMUTEX_PASSWORD, or user:password in the address)"
            ))
        } else {
            Failure::runtime(address::connect_failure(shown, &e))
        }
    };
    let mut conn = client.get_connection_with_timeout(timeout).map_err(fail)?;
    conn.set_read_timeout(Some(timeout)).map_err(fail)?;
    conn.set_write_timeout(Some(timeout)).map_err(fail)?;
    // Best effort: a user without `client|setname` still gets its answers.
    let _ = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg(TOOL_CONNECTION_NAME)
        .query::<()>(&mut conn);
    // A server that wants a password nobody gave accepts the connection and refuses
    // the first command: ask it here, so the message is about the login, not a key.
    // Any other refusal (a user without +ping) leaves the commands to say what they may.
    match redis::cmd("PING").query::<()>(&mut conn) {
        Err(e) if address::is_login_refusal(&e) || e.is_io_error() || e.is_timeout() => {
            Err(fail(e))
        }
        _ => Ok(conn),
    }
}
