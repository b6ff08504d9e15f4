//! Client configuration: a plain value built with [`Config::builder`].

pub(crate) mod fairness;
mod redisson;
pub(crate) mod redisson_yaml;
mod sentinel;

use std::fmt;
use std::time::Duration;

use crate::address::redact;
use fairness::Fairness;

pub(crate) use sentinel::{ReplicaSyncConfig, SentinelConfig};

/// How a [`Client`](crate::Client) connects and how its locks behave.
///
/// Build one with [`Config::builder`]; every setting has a default that matches Redisson
/// where Redisson has one. Validation happens in [`Client::new`](crate::Client::new), which
/// returns [`Error::Config`](crate::Error::Config) for a bad value.
///
/// `Debug` output never shows the password of the address.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use redmutex::{Client, Config};
///
/// let config = Config::builder()
///     .address("redis://app:secret@10.0.0.5:6379")
///     .lock_watchdog_timeout(Duration::from_secs(60)) // Redisson's lockWatchdogTimeout
///     .response_timeout(Duration::from_secs(5))       // Redisson's timeout
///     .build();
/// assert_eq!(config.lock_watchdog_timeout(), Duration::from_secs(60));
/// assert!(!format!("{config:?}").contains("secret"));
/// let client = Client::new(config)?; // checks the settings, then connects
/// # drop(client);
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Clone)]
pub struct Config {
    pub(crate) address: String,
    pub(crate) lock_watchdog_timeout: Duration,
    pub(crate) watchdog_batch_size: usize,
    pub(crate) pool_max_size: u32,
    pub(crate) pool_min_idle: Option<u32>,
    pub(crate) connection_timeout: Duration,
    pub(crate) response_timeout: Duration,
    pub(crate) retry_attempts: u32,
    pub(crate) retry_delay: Duration,
    pub(crate) retry_max_delay: Duration,
    pub(crate) tls_root_certificate: Option<Vec<u8>>,
    pub(crate) fair_lock_wait_timeout: Duration,
    pub(crate) metrics_lock_names: bool,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
    /// Set by [`ConfigBuilder::database`]; `None`: the address's `/db`, else 0.
    pub(crate) database: Option<i64>,
    pub(crate) cluster: ClusterConfig,
    pub(crate) sentinel: SentinelConfig,
    pub(crate) replica_sync: ReplicaSyncConfig,
    pub(crate) fairness: Fairness,
}

/// The Redis Cluster settings, named as Redisson's `ClusterServersConfig` names them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ClusterConfig {
    /// Redisson `nodeAddresses`; empty: not a cluster.
    pub(crate) node_addresses: Vec<String>,
    /// Redisson `scanInterval`.
    pub(crate) scan_interval: Duration,
    /// Redisson `checkSlotsCoverage`.
    pub(crate) check_slots_coverage: bool,
    /// Redisson `shardedSubscriptionMode`.
    pub(crate) sharded_subscription_mode: ShardedSubscriptionMode,
    /// Publish with both commands (see [`ConfigBuilder::publish_both`]).
    pub(crate) publish_both: bool,
    /// Redisson `natMap`: `host:port` as the cluster announces it → `host:port` to dial.
    pub(crate) nat_map: Vec<(String, String)>,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            node_addresses: Vec::new(),
            scan_interval: Duration::from_secs(5),
            check_slots_coverage: true,
            sharded_subscription_mode: ShardedSubscriptionMode::Auto,
            publish_both: false,
            nat_map: Vec::new(),
        }
    }
}

/// Whether waiters in a Redis Cluster use sharded pub/sub (`SSUBSCRIBE`, with scripts
/// publishing by `SPUBLISH`) or plain pub/sub (`SUBSCRIBE` / `PUBLISH`): Redisson's
/// `shardedSubscriptionMode`, with the same three values. Only cluster mode reads it; a
/// single server always uses plain pub/sub, as Redisson does.
///
/// Redisson 3.22 and later use sharded pub/sub on a Redis 7 cluster (4.x by the same
/// `AUTO` probe as here; 3.23.5 always, with no setting), and 4.x with `OFF` uses plain
/// pub/sub. Each side must publish with the command the other side listens to.
///
/// # Examples
///
/// ```
/// use redmutex::{Config, ShardedSubscriptionMode};
///
/// // A fleet whose Java services run Redisson 4.x with `shardedSubscriptionMode: OFF`.
/// let config = Config::builder()
///     .cluster_nodes(["redis://10.0.0.1:7000"])
///     .sharded_subscription_mode(ShardedSubscriptionMode::Off)
///     .build();
/// assert_eq!(config.sharded_subscription_mode(), ShardedSubscriptionMode::Off);
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ShardedSubscriptionMode {
    /// Redisson's default: probe the cluster once with `PUBSUB SHARDNUMSUB` at start;
    /// where it answers (Redis 7 and later), publish with `SPUBLISH`, as Redisson does.
    /// Waiters then subscribe each channel both ways (`SSUBSCRIBE` and `SUBSCRIBE` on
    /// the slot's master), so an unlock published by a Redisson peer of either kind
    /// wakes them. Where the probe fails, plain pub/sub only.
    #[default]
    Auto,
    /// Sharded pub/sub only: `SPUBLISH` and `SSUBSCRIBE`. A cluster whose seed refuses
    /// the probe (Redis before 7.0) fails `Client::new` with [`Error::Config`](crate::Error::Config)
    /// instead of leaving waiters to sleep out every lease.
    On,
    /// Plain pub/sub only: `PUBLISH` and `SUBSCRIBE` (Redisson 4.x with
    /// `shardedSubscriptionMode: OFF`, or Redis before 7).
    Off,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            address: "redis://127.0.0.1:6379".to_owned(),
            lock_watchdog_timeout: Duration::from_secs(30),
            watchdog_batch_size: 100,
            pool_max_size: 16,
            pool_min_idle: Some(1),
            connection_timeout: Duration::from_secs(10),
            response_timeout: Duration::from_secs(3),
            retry_attempts: 4,
            retry_delay: Duration::from_secs(1),
            retry_max_delay: Duration::from_secs(2),
            tls_root_certificate: None,
            fair_lock_wait_timeout: Duration::from_secs(300),
            metrics_lock_names: false,
            username: None,
            password: None,
            database: None,
            cluster: ClusterConfig::default(),
            sentinel: SentinelConfig::default(),
            replica_sync: ReplicaSyncConfig::default(),
            fairness: Fairness::default(),
        }
    }
}

impl Config {
    /// A builder starting from the defaults.
    pub fn builder() -> ConfigBuilder {
        ConfigBuilder {
            config: Self::default(),
        }
    }

    /// A builder starting from this configuration, to adjust a loaded one: a service
    /// that reads the fleet's shared Redisson file can then set what the file does not
    /// say (fairness, [`publish_both`](ConfigBuilder::publish_both), TLS roots, metrics
    /// labels) or override what it does. The same as `ConfigBuilder::from(config)`.
    ///
    /// ```
    /// use redmutex::{Config, Fairness};
    ///
    /// let shared = Config::from_redisson_yaml_str(
    ///     "singleServerConfig:\n  address: redis://127.0.0.1:6379\nlockWatchdogTimeout: 10000\n",
    /// )?;
    /// let config = shared.to_builder().fairness(Fairness::Barging).build();
    /// assert_eq!(config.fairness(), Fairness::Barging);
    /// assert_eq!(config.lock_watchdog_timeout(), std::time::Duration::from_secs(10));
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    pub fn to_builder(&self) -> ConfigBuilder {
        ConfigBuilder::from(self.clone())
    }

    /// The Redis URL (`redis://` or `rediss://`, credentials allowed, `/db` allowed).
    /// Defaults to `redis://127.0.0.1:6379`.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The lease given to locks taken without an explicit lease; the watchdog renews such
    /// locks every third of it. Defaults to 30 s, as Redisson's `lockWatchdogTimeout`.
    pub fn lock_watchdog_timeout(&self) -> Duration {
        self.lock_watchdog_timeout
    }

    /// How many locks one renewal script renews. Defaults to 100, as Redisson's
    /// `lockWatchdogBatchSize`.
    pub fn watchdog_batch_size(&self) -> usize {
        self.watchdog_batch_size
    }

    /// Most connections in the command pool, per node: the single server's, and each
    /// master's in cluster and sentinel mode (Redisson's `connectionPoolSize` and
    /// `masterConnectionPoolSize`, which a Redisson config file sets here). Defaults to
    /// 16.
    ///
    /// Calls take the pooled connections in turns: a thread that finds all of a node's
    /// connections busy waits for the next one given back (a woken waiter's retry goes
    /// before every first attempt), so any number of threads share this many
    /// connections. A call without a deadline (`lock()`) waits as long as others keep
    /// getting connections; when none did for a whole
    /// [`connection_timeout`](Self::connection_timeout), or a call's own wait runs out
    /// first, it fails with [`Error::PoolTimeout`](crate::Error::PoolTimeout), which
    /// names the node. Not counted here: the subscriber's connection to each node and the
    /// background threads' own (the watchdog's, a cluster client's slot-map reads).
    pub fn pool_max_size(&self) -> u32 {
        self.pool_max_size
    }

    /// Idle connections the pool keeps open. Defaults to `Some(1)`.
    pub fn pool_min_idle(&self) -> Option<u32> {
        self.pool_min_idle
    }

    /// How long to wait for a new TCP connection, and for a free pooled connection.
    /// Defaults to 10 s, as Redisson's `connectTimeout`.
    pub fn connection_timeout(&self) -> Duration {
        self.connection_timeout
    }

    /// How long to wait for Redis to answer one command. Defaults to 3 s, as Redisson's
    /// `timeout`.
    pub fn response_timeout(&self) -> Duration {
        self.response_timeout
    }

    /// How often a release is retried after its connection failed (the unlock latch makes
    /// the retry safe). Defaults to 4, as Redisson's `retryAttempts`.
    pub fn retry_attempts(&self) -> u32 {
        self.retry_attempts
    }

    /// Base delay between retries, doubled per attempt up to
    /// [`retry_max_delay`](Self::retry_max_delay) with equal jitter. Defaults to 1 s, as
    /// Redisson's `EqualJitterDelay(1s, 2s)`.
    pub fn retry_delay(&self) -> Duration {
        self.retry_delay
    }

    /// Upper bound of one retry delay. Defaults to 2 s.
    pub fn retry_max_delay(&self) -> Duration {
        self.retry_max_delay
    }

    /// How long a fair-lock waiter keeps its place in the queue without showing up; a
    /// crashed waiter delays the queue by at most this. Use the same value as the Redisson
    /// clients sharing the locks. Defaults to 5 minutes, as Redisson's
    /// `fairLockWaitTimeout`.
    pub fn fair_lock_wait_timeout(&self) -> Duration {
        self.fair_lock_wait_timeout
    }

    /// How an `RLock` is shared between a thread that releases it and asks again and the
    /// waiters its release woke, here and in other processes. Defaults to
    /// [`Fairness::Eventual`] with a 10 ms window: nobody starves, and an uncontended lock
    /// costs what it did. [`Fairness::Barging`] is Redisson's behaviour. Redisson has no
    /// such setting; neither choice changes what a Redisson peer sees.
    pub fn fairness(&self) -> Fairness {
        self.fairness
    }

    /// The PEM root certificate that `rediss://` servers are verified against, instead of
    /// the system's trust store. Defaults to `None` (the system's trust store).
    pub fn tls_root_certificate(&self) -> Option<&[u8]> {
        self.tls_root_certificate.as_deref()
    }

    /// Whether the per-lock [metrics](crate::metrics) carry the lock's name as a `name`
    /// label. Defaults to `false`: one series per lock name grows without bound when
    /// names carry ids (`orders:42`); turn it on only for a small, fixed set of locks.
    pub fn metrics_lock_names(&self) -> bool {
        self.metrics_lock_names
    }

    /// The ACL user name for every connection, overriding the one in the address (or
    /// node addresses). Defaults to `None`: the address's, else Redis's `default` user.
    /// Redisson's `username`.
    pub fn username(&self) -> Option<&str> {
        self.username.as_deref()
    }

    /// Whether a password was set with [`ConfigBuilder::password`] (the password itself
    /// is not readable back). Redisson's `password`.
    pub fn has_password(&self) -> bool {
        self.password.is_some()
    }

    /// The database index the locks live in (Redisson's `database`), in every mode:
    /// the one set with [`ConfigBuilder::database`], else the `/db` of the
    /// [`address`](Self::address) of a single server, else 0. A Redis Cluster has only
    /// database 0. `Client::new` refuses an address and a builder that name two
    /// different databases, and a database the server does not have.
    pub fn database(&self) -> i64 {
        if let Some(db) = self.database {
            return db;
        }
        if self.is_sentinel() || self.is_cluster() {
            return 0;
        }
        crate::address::database(&self.address).unwrap_or(0)
    }

    /// True when the client connects to a Redis Cluster: some
    /// [`node_addresses`](Self::node_addresses) are set. [`address`](Self::address) is
    /// then ignored.
    pub fn is_cluster(&self) -> bool {
        !self.cluster.node_addresses.is_empty()
    }

    /// The cluster's seed nodes, as Redisson's `nodeAddresses`: `redis://host:port` or
    /// `rediss://host:port` URLs (credentials allowed, the same on all of them). One live
    /// node is enough; the client learns every other node from it. Empty (the default)
    /// for a single server.
    pub fn node_addresses(&self) -> &[String] {
        &self.cluster.node_addresses
    }

    /// How often the cluster's slot map is read again, as Redisson's `scanInterval`. It
    /// is also read at once after a `MOVED` redirect or a failed node. Defaults to 5 s,
    /// as in Redisson.
    pub fn scan_interval(&self) -> Duration {
        self.cluster.scan_interval
    }

    /// Whether `Client::new` fails when some hash slot has no master, as Redisson's
    /// `checkSlotsCoverage`. Defaults to `true`.
    pub fn check_slots_coverage(&self) -> bool {
        self.cluster.check_slots_coverage
    }

    /// Sharded or plain pub/sub in a cluster. Defaults to
    /// [`ShardedSubscriptionMode::Auto`], as in Redisson 4.x.
    pub fn sharded_subscription_mode(&self) -> ShardedSubscriptionMode {
        self.cluster.sharded_subscription_mode
    }

    /// Whether unlock and release messages go out with both `SPUBLISH` and `PUBLISH` in
    /// a cluster whose sharded pub/sub is on. Defaults to `false`. See
    /// [`ConfigBuilder::publish_both`].
    pub fn publish_both(&self) -> bool {
        self.cluster.publish_both
    }

    /// Redisson's `natMap`: node addresses as the cluster announces them (`host:port`),
    /// mapped to the addresses this client dials instead. Defaults to none.
    pub fn nat_map(&self) -> &[(String, String)] {
        &self.cluster.nat_map
    }

    /// The delay before retry number `attempt` (Redisson's `EqualJitterDelay`): half of
    /// `min(base × 2^attempt, max)` plus a random share of the other half.
    pub(crate) fn retry_delay_for(&self, attempt: u32) -> Duration {
        let cap = self
            .retry_delay
            .checked_mul(1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX))
            .unwrap_or(Duration::MAX)
            .min(self.retry_max_delay);
        let half = cap / 2;
        let jitter_ms = half.as_millis().min(u128::from(u64::MAX)) as u64;
        half + Duration::from_millis(crate::random::number() % jitter_ms.saturating_add(1))
    }

    /// The PX of an unlock latch key, sized as Redisson sizes it: long enough to outlive
    /// every retry of one release.
    pub(crate) fn unlock_latch_ms(&self) -> u64 {
        let per_try = self
            .response_timeout
            .saturating_add(self.retry_delay_for(self.retry_attempts));
        let total = per_try
            .checked_mul(self.retry_attempts)
            .map_or(u64::MAX, |d| d.as_millis().min(u128::from(u64::MAX)) as u64);
        total.max(1)
    }

    /// Checks the values against each other; `Client::new` calls it.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.lock_watchdog_timeout < Duration::from_millis(30) {
            return Err("lock_watchdog_timeout must be at least 30 ms".into());
        }
        if self.lock_watchdog_timeout.as_millis() > i64::MAX as u128 / 2 {
            return Err("lock_watchdog_timeout is too long".into());
        }
        if self.watchdog_batch_size == 0 {
            return Err("watchdog_batch_size must be at least 1".into());
        }
        if self.pool_max_size == 0 {
            return Err("pool_max_size must be at least 1".into());
        }
        if self.pool_min_idle.is_some_and(|n| n > self.pool_max_size) {
            return Err("pool_min_idle must not exceed pool_max_size".into());
        }
        if self.connection_timeout.is_zero() || self.response_timeout.is_zero() {
            return Err("timeouts must be greater than zero".into());
        }
        if self.fair_lock_wait_timeout.is_zero() {
            return Err("fair_lock_wait_timeout must be greater than zero".into());
        }
        if self.retry_max_delay < self.retry_delay {
            return Err("retry_max_delay must not be below retry_delay".into());
        }
        if self.cluster.scan_interval.is_zero() {
            return Err("scan_interval must be greater than zero".into());
        }
        self.validate_database()?;
        self.validate_sentinel()?;
        for (from, to) in &self.cluster.nat_map {
            if !is_host_port(from) || !is_host_port(to) {
                return Err(format!(
                    "nat_map entries are host:port pairs, got {from:?} -> {to:?}"
                ));
            }
        }
        Ok(())
    }
}

impl Config {
    /// The database is one setting in every mode: the builder's and the address's must
    /// agree, and a cluster has only database 0.
    fn validate_database(&self) -> Result<(), String> {
        if let Some(db) = self.database
            && db < 0
        {
            return Err(format!("database must not be negative, got {db}"));
        }
        if self.is_cluster() {
            let named = self
                .cluster
                .node_addresses
                .iter()
                .filter_map(|url| crate::address::database(url).map(|db| (url, db)))
                .find(|(_, db)| *db != 0);
            if let Some((url, db)) = named {
                return Err(format!(
                    "cluster node address `{}` names database {db}, but a Redis Cluster has \
                     only database 0",
                    redact(url)
                ));
            }
            return match self.database {
                Some(db) if db != 0 => Err(format!(
                    "database({db}) was set, but a Redis Cluster has only database 0: drop it \
                     (or keep the locks apart with a key prefix)"
                )),
                _ => Ok(()),
            };
        }
        if self.is_sentinel() {
            return Ok(());
        }
        match (self.database, crate::address::database(&self.address)) {
            (Some(set), Some(named)) if set != named => Err(format!(
                "the address `{}` names database {named} but database({set}) was set: use \
                 one of them",
                redact(&self.address)
            )),
            _ => Ok(()),
        }
    }
}

/// `host:port` with a numeric port.
fn is_host_port(text: &str) -> bool {
    text.rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("address", &redact(&self.address))
            .field("lock_watchdog_timeout", &self.lock_watchdog_timeout)
            .field("watchdog_batch_size", &self.watchdog_batch_size)
            .field("pool_max_size", &self.pool_max_size)
            .field("pool_min_idle", &self.pool_min_idle)
            .field("connection_timeout", &self.connection_timeout)
            .field("response_timeout", &self.response_timeout)
            .field("retry_attempts", &self.retry_attempts)
            .field("retry_delay", &self.retry_delay)
            .field("retry_max_delay", &self.retry_max_delay)
            .field("fair_lock_wait_timeout", &self.fair_lock_wait_timeout)
            .field("metrics_lock_names", &self.metrics_lock_names)
            .field("fairness", &self.fairness)
            .field(
                "tls_root_certificate",
                &self.tls_root_certificate.as_ref().map(|_| "<pem>"),
            )
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field(
                "node_addresses",
                &self
                    .cluster
                    .node_addresses
                    .iter()
                    .map(|a| redact(a))
                    .collect::<Vec<_>>(),
            )
            .field("scan_interval", &self.cluster.scan_interval)
            .field("check_slots_coverage", &self.cluster.check_slots_coverage)
            .field(
                "sharded_subscription_mode",
                &self.cluster.sharded_subscription_mode,
            )
            .field("publish_both", &self.cluster.publish_both)
            .field("nat_map", &self.cluster.nat_map)
            .field("master_name", &self.sentinel.master_name)
            .field(
                "sentinel_addresses",
                &self
                    .sentinel
                    .sentinel_addresses
                    .iter()
                    .map(|a| redact(a))
                    .collect::<Vec<_>>(),
            )
            .field("sentinel_username", &self.sentinel.sentinel_username)
            .field(
                "sentinel_password",
                &self.sentinel.sentinel_password.as_ref().map(|_| "***"),
            )
            .field("database", &self.database())
            .field("sentinel_scan_interval", &self.sentinel.scan_interval)
            .field("replica_sync", &self.replica_sync)
            .finish()
    }
}

/// Builds a [`Config`]; every setter takes and returns the builder.
///
/// Start from the defaults with [`Config::builder`], or from a loaded configuration
/// with [`Config::to_builder`] or `ConfigBuilder::from(config)`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redmutex::{Config, Fairness};
///
/// // A Redis Cluster, by a few seed nodes, with Redisson's strict first-come order off.
/// let config = Config::builder()
///     .cluster_nodes(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"])
///     .password("cluster-secret")
///     .fairness(Fairness::Barging)
///     .pool_max_size(32)
///     .build();
/// assert!(config.is_cluster());
/// assert_eq!(config.pool_max_size(), 32);
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ConfigBuilder {
    config: Config,
}

impl From<Config> for ConfigBuilder {
    fn from(config: Config) -> Self {
        Self { config }
    }
}

impl ConfigBuilder {
    /// Sets the Redis URL. See [`Config::address`].
    pub fn address(mut self, url: impl Into<String>) -> Self {
        self.config.address = url.into();
        self
    }

    /// Sets the watchdog lease. See [`Config::lock_watchdog_timeout`].
    pub fn lock_watchdog_timeout(mut self, timeout: Duration) -> Self {
        self.config.lock_watchdog_timeout = timeout;
        self
    }

    /// Sets the renewal batch size. See [`Config::watchdog_batch_size`].
    pub fn watchdog_batch_size(mut self, size: usize) -> Self {
        self.config.watchdog_batch_size = size;
        self
    }

    /// Sets the pool size per node. See [`Config::pool_max_size`].
    pub fn pool_max_size(mut self, size: u32) -> Self {
        self.config.pool_max_size = size;
        self
    }

    /// Sets the idle connections kept. See [`Config::pool_min_idle`].
    pub fn pool_min_idle(mut self, idle: Option<u32>) -> Self {
        self.config.pool_min_idle = idle;
        self
    }

    /// Sets the connect and pool-wait timeout. See [`Config::connection_timeout`].
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.config.connection_timeout = timeout;
        self
    }

    /// Sets the response timeout. See [`Config::response_timeout`].
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.config.response_timeout = timeout;
        self
    }

    /// Sets the retry count. See [`Config::retry_attempts`].
    pub fn retry_attempts(mut self, attempts: u32) -> Self {
        self.config.retry_attempts = attempts;
        self
    }

    /// Sets the base retry delay. See [`Config::retry_delay`].
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.config.retry_delay = delay;
        self
    }

    /// Sets the largest retry delay. See [`Config::retry_max_delay`].
    pub fn retry_max_delay(mut self, delay: Duration) -> Self {
        self.config.retry_max_delay = delay;
        self
    }

    /// Sets the fair-lock queue slot length. See [`Config::fair_lock_wait_timeout`].
    pub fn fair_lock_wait_timeout(mut self, wait: Duration) -> Self {
        self.config.fair_lock_wait_timeout = wait;
        self
    }

    /// Sets how a released `RLock` is shared with its waiters. See [`Config::fairness`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use redmutex::{Config, Fairness};
    ///
    /// let config = Config::builder()
    ///     .fairness(Fairness::Eventual { window: Duration::from_millis(20) })
    ///     .build();
    /// assert_eq!(config.fairness(), Fairness::Eventual { window: Duration::from_millis(20) });
    /// ```
    pub fn fairness(mut self, fairness: Fairness) -> Self {
        self.config.fairness = fairness;
        self
    }

    /// Verifies `rediss://` servers against this PEM root certificate (for a private CA)
    /// instead of the system's trust store. See [`Config::tls_root_certificate`].
    pub fn tls_root_certificate(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.config.tls_root_certificate = Some(pem.into());
        self
    }

    /// Labels the per-lock metrics with lock names. See [`Config::metrics_lock_names`].
    pub fn metrics_lock_names(mut self, on: bool) -> Self {
        self.config.metrics_lock_names = on;
        self
    }

    /// Sets the ACL user of every connection. See [`Config::username`].
    pub fn username(mut self, user: impl Into<String>) -> Self {
        self.config.username = Some(user.into());
        self
    }

    /// Sets the password of every connection (with [`username`](Self::username), or the
    /// address's user, or Redis's `default` user), overriding one in the address.
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.config.password = Some(password.into());
        self
    }

    /// Sets the database index of the locks, in every mode (Redisson's `database`). See
    /// [`Config::database`]: an address whose `/db` names another database, a cluster
    /// and a negative index are refused by `Client::new`, and so is an index the server
    /// does not have (its `databases` setting, 16 by default).
    ///
    /// ```
    /// let config = redmutex::Config::builder()
    ///     .address("redis://127.0.0.1:6379")
    ///     .database(3)
    ///     .build();
    /// assert_eq!(config.database(), 3);
    /// ```
    pub fn database(mut self, db: i64) -> Self {
        self.config.database = Some(db);
        self
    }

    /// Connects to a Redis Cluster through these seed nodes (Redisson's
    /// `nodeAddresses`), replacing any set before. See [`Config::node_addresses`].
    ///
    /// ```
    /// let config = redmutex::Config::builder()
    ///     .cluster_nodes(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"])
    ///     .build();
    /// assert!(config.is_cluster());
    /// ```
    pub fn cluster_nodes<I, S>(mut self, urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.config.cluster.node_addresses = urls.into_iter().map(Into::into).collect();
        self
    }

    /// Adds one cluster seed node. See [`Config::node_addresses`].
    pub fn add_node_address(mut self, url: impl Into<String>) -> Self {
        self.config.cluster.node_addresses.push(url.into());
        self
    }

    /// Sets how often the slot map is read. See [`Config::scan_interval`].
    pub fn scan_interval(mut self, interval: Duration) -> Self {
        self.config.cluster.scan_interval = interval;
        self
    }

    /// Sets whether an uncovered slot fails `Client::new`. See
    /// [`Config::check_slots_coverage`].
    pub fn check_slots_coverage(mut self, check: bool) -> Self {
        self.config.cluster.check_slots_coverage = check;
        self
    }

    /// Sets sharded or plain pub/sub for a cluster. See [`ShardedSubscriptionMode`].
    pub fn sharded_subscription_mode(mut self, mode: ShardedSubscriptionMode) -> Self {
        self.config.cluster.sharded_subscription_mode = mode;
        self
    }

    /// In a cluster with sharded pub/sub on, publish every unlock and release message
    /// with both `SPUBLISH` and `PUBLISH`, so that Redisson peers listening either way
    /// wake at once (a fleet mixing Redisson 3.23.5, which always subscribes sharded,
    /// with Redisson 4.x set to `OFF`). It costs one more publish per release, and a
    /// plain `PUBLISH` in a cluster is sent to every node over the cluster bus. Without
    /// it such a peer still gets the lock, but only when it polls at the holder's lease
    /// end. Ignored outside cluster mode and when sharded pub/sub is off.
    pub fn publish_both(mut self, both: bool) -> Self {
        self.config.cluster.publish_both = both;
        self
    }

    /// Maps a node address the cluster announces (`host:port`) to the one to dial
    /// (Redisson's `natMap`), for clusters behind NAT or a proxy. See
    /// [`Config::nat_map`].
    pub fn nat_map(mut self, announced: impl Into<String>, dial: impl Into<String>) -> Self {
        self.config
            .cluster
            .nat_map
            .push((announced.into(), dial.into()));
        self
    }

    /// The finished configuration. Never fails; `Client::new` validates it.
    pub fn build(self) -> Config {
        self.config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_redisson() {
        let c = Config::default();
        assert_eq!(c.lock_watchdog_timeout(), Duration::from_secs(30));
        assert_eq!(c.response_timeout(), Duration::from_secs(3));
        assert_eq!(c.retry_attempts(), 4);
        assert_eq!(c.watchdog_batch_size(), 100);
        assert!(c.validate().is_ok());
        // Replica sync after acquires and releases, in every replicated mode.
        for c in [
            Config::builder()
                .cluster_nodes(["redis://127.0.0.1:7000"])
                .build(),
            Config::builder()
                .master_name("m")
                .sentinel_addresses(["redis://127.0.0.1:26379"])
                .build(),
        ] {
            assert!(c.check_lock_synced_slaves());
            assert!(c.sync_releases());
            assert_eq!(c.slaves_sync_timeout(), Duration::from_secs(1));
        }
    }

    #[test]
    fn latch_lifetime_is_redissons_16_to_20_seconds_by_default() {
        let c = Config::default();
        for _ in 0..100 {
            let ms = c.unlock_latch_ms();
            assert!((16_000..=20_000).contains(&ms), "{ms}");
        }
    }

    #[test]
    fn retry_delay_stays_within_equal_jitter_bounds() {
        let c = Config::default();
        for attempt in 0..40 {
            let d = c.retry_delay_for(attempt);
            assert!(d <= Duration::from_secs(2), "{d:?}");
            assert!(d >= Duration::from_millis(500), "{d:?}");
        }
    }

    #[test]
    fn debug_hides_passwords() {
        for url in [
            "redis://user:hunter2@127.0.0.1:6379/0",
            "rediss://:hunter2@host",
            "redis://hunter2@host:1",
            "redis://user:hun#ter2@host:1/",
            "redis://user:hunter2/x@host:1/",
        ] {
            let c = Config::builder().address(url).build();
            let text = format!("{c:?}");
            assert!(!text.contains("hunter2"), "{text}");
            assert!(text.contains("***"), "{text}");
        }
        assert_eq!(redact("redis://host:1/2"), "redis://host:1/2");
    }

    #[test]
    fn validation_rejects_nonsense() {
        let bad = [
            Config::builder().pool_max_size(0).build(),
            Config::builder()
                .pool_max_size(2)
                .pool_min_idle(Some(3))
                .build(),
            Config::builder().response_timeout(Duration::ZERO).build(),
            Config::builder()
                .lock_watchdog_timeout(Duration::from_millis(1))
                .build(),
            Config::builder()
                .lock_watchdog_timeout(Duration::MAX)
                .build(),
            Config::builder().watchdog_batch_size(0).build(),
        ];
        for c in bad {
            assert!(c.validate().is_err(), "{c:?}");
        }
    }
}
