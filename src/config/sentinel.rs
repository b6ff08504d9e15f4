//! Sentinel mode and replica sync: settings named as Redisson's `SentinelServersConfig`
//! and its top-level `checkLockSyncedSlaves` / `slavesSyncTimeout` name them.

use std::time::Duration;

use super::{Config, ConfigBuilder};

/// The Redis Sentinel settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SentinelConfig {
    /// Redisson `masterName`; `None`: not sentinel mode.
    pub(crate) master_name: Option<String>,
    /// Redisson `sentinelAddresses`.
    pub(crate) sentinel_addresses: Vec<String>,
    /// Redisson `sentinelUsername`: the sentinels' login, not the data nodes'.
    pub(crate) sentinel_username: Option<String>,
    /// Redisson `sentinelPassword`.
    pub(crate) sentinel_password: Option<String>,
    /// Redisson `scanInterval` of sentinel mode: how often the sentinels are asked.
    pub(crate) scan_interval: Duration,
}

impl Default for SentinelConfig {
    fn default() -> Self {
        Self {
            master_name: None,
            sentinel_addresses: Vec::new(),
            sentinel_username: None,
            sentinel_password: None,
            scan_interval: Duration::from_secs(1),
        }
    }
}

/// Redisson's replica sync (`checkLockSyncedSlaves`, `slavesSyncTimeout`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ReplicaSyncConfig {
    pub(crate) check_lock_synced_slaves: bool,
    pub(crate) slaves_sync_timeout: Duration,
    /// Whether releases are followed by `WAIT` too (Redisson 4.7.0 always does).
    pub(crate) sync_releases: bool,
}

impl Default for ReplicaSyncConfig {
    fn default() -> Self {
        Self {
            check_lock_synced_slaves: true,
            slaves_sync_timeout: Duration::from_secs(1),
            sync_releases: true,
        }
    }
}

impl Config {
    /// True when the client finds its master through Redis Sentinel: a
    /// [`master_name`](Self::master_name) is set.
    pub fn is_sentinel(&self) -> bool {
        self.sentinel.master_name.is_some()
    }

    /// The name the sentinels monitor the master under (Redisson's `masterName`).
    pub fn master_name(&self) -> Option<&str> {
        self.sentinel.master_name.as_deref()
    }

    /// The sentinels, as Redisson's `sentinelAddresses`: `redis://host:port` or
    /// `rediss://host:port` URLs. Their credentials are the sentinels' own; the data
    /// nodes use [`username`](Self::username) and the password.
    pub fn sentinel_addresses(&self) -> &[String] {
        &self.sentinel.sentinel_addresses
    }

    /// The ACL user for the sentinels (Redisson's `sentinelUsername`). Defaults to the
    /// one in each sentinel address, else none.
    pub fn sentinel_username(&self) -> Option<&str> {
        self.sentinel.sentinel_username.as_deref()
    }

    /// Whether a sentinel password was set (Redisson's `sentinelPassword`).
    pub fn has_sentinel_password(&self) -> bool {
        self.sentinel.sentinel_password.is_some()
    }

    /// How often the sentinels are asked for the master in sentinel mode, besides the
    /// `+switch-master` events heard at once (Redisson's `scanInterval`). Defaults to
    /// 1 s, as in Redisson.
    pub fn sentinel_scan_interval(&self) -> Duration {
        self.sentinel.scan_interval
    }

    /// Whether every acquire is followed by `WAIT` for the master's replicas, and
    /// undone and retried when none of them acknowledged it (Redisson's
    /// `checkLockSyncedSlaves`). Sentinel and cluster modes wait, each acquire for the
    /// replicas of its own master; a single server never waits. Defaults to `true`, as
    /// in Redisson; the builder or the YAML file's `checkLockSyncedSlaves` turns it off.
    pub fn check_lock_synced_slaves(&self) -> bool {
        self.replica_sync.check_lock_synced_slaves
    }

    /// How long one `WAIT` after an acquire waits for replicas (Redisson's
    /// `slavesSyncTimeout`). Defaults to 1 s, as in Redisson.
    pub fn slaves_sync_timeout(&self) -> Duration {
        self.replica_sync.slaves_sync_timeout
    }

    /// Whether every release that changed a lock (an unlock, a read or write half's
    /// unlock, a fenced or fair unlock) is followed by `WAIT` for the master's
    /// replicas, for up to [`slaves_sync_timeout`](Self::slaves_sync_timeout), in
    /// sentinel and cluster modes. Redisson 4.7.0 sends that `WAIT` after each unlock
    /// whatever `checkLockSyncedSlaves` says; it is what keeps a failover right after an
    /// unlock from bringing the released hold back on the promoted replica, where it
    /// would block everyone until its lease ran out. Defaults to `true`, as in Redisson;
    /// a single server never waits. The cost is one replica round trip per release
    /// (`docs/benchmarks.md`).
    ///
    /// A release that no replica acknowledged still succeeded on the master: the unlock
    /// returns `Ok`, logs a warning and counts
    /// [`REPLICA_SYNC_FAILURES`](crate::metrics::REPLICA_SYNC_FAILURES) with
    /// `op="release"`. (Redisson throws `NoSyncedSlavesException` from such an unlock
    /// when `checkLockSyncedSlaves` is on, although the lock is released; an error the
    /// caller cannot act on.)
    pub fn sync_releases(&self) -> bool {
        self.replica_sync.sync_releases
    }

    /// Checks the sentinel settings against each other.
    pub(crate) fn validate_sentinel(&self) -> Result<(), String> {
        let Some(name) = &self.sentinel.master_name else {
            return Ok(());
        };
        if name.is_empty() {
            return Err("master_name must not be empty".into());
        }
        if self.sentinel.sentinel_addresses.is_empty() {
            return Err("sentinel mode needs at least one sentinel address".into());
        }
        if self.is_cluster() {
            return Err("a config is either sentinel mode (master_name) or a cluster (node_addresses), not both".into());
        }
        if self.sentinel.scan_interval.is_zero() {
            return Err("sentinel_scan_interval must be greater than zero".into());
        }
        Ok(())
    }
}

impl ConfigBuilder {
    /// Finds the master through Redis Sentinel: the sentinels monitor it under `name`
    /// (Redisson's `masterName`). [`Config::address`] is then ignored.
    ///
    /// ```
    /// let config = redmutex::Config::builder()
    ///     .master_name("mymaster")
    ///     .sentinel_addresses(["redis://10.0.0.1:26379", "redis://10.0.0.2:26379"])
    ///     .build();
    /// assert!(config.is_sentinel());
    /// ```
    pub fn master_name(mut self, name: impl Into<String>) -> Self {
        self.config.sentinel.master_name = Some(name.into());
        self
    }

    /// Sets the sentinels, replacing any set before. See [`Config::sentinel_addresses`].
    pub fn sentinel_addresses<I, S>(mut self, urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.config.sentinel.sentinel_addresses = urls.into_iter().map(Into::into).collect();
        self
    }

    /// Adds one sentinel (Redisson's `addSentinelAddress`).
    pub fn add_sentinel_address(mut self, url: impl Into<String>) -> Self {
        self.config.sentinel.sentinel_addresses.push(url.into());
        self
    }

    /// Sets the sentinels' ACL user. See [`Config::sentinel_username`].
    pub fn sentinel_username(mut self, user: impl Into<String>) -> Self {
        self.config.sentinel.sentinel_username = Some(user.into());
        self
    }

    /// Sets the sentinels' password (Redisson's `sentinelPassword`), separate from the
    /// data nodes' [`password`](Self::password).
    pub fn sentinel_password(mut self, password: impl Into<String>) -> Self {
        self.config.sentinel.sentinel_password = Some(password.into());
        self
    }

    /// Sets how often the sentinels are asked. See [`Config::sentinel_scan_interval`].
    pub fn sentinel_scan_interval(mut self, interval: Duration) -> Self {
        self.config.sentinel.scan_interval = interval;
        self
    }

    /// Turns replica sync after acquires on or off. See
    /// [`Config::check_lock_synced_slaves`].
    pub fn check_lock_synced_slaves(mut self, check: bool) -> Self {
        self.config.replica_sync.check_lock_synced_slaves = check;
        self
    }

    /// Sets how long one `WAIT` waits. See [`Config::slaves_sync_timeout`].
    pub fn slaves_sync_timeout(mut self, timeout: Duration) -> Self {
        self.config.replica_sync.slaves_sync_timeout = timeout;
        self
    }

    /// Turns the `WAIT` after releases on or off. See [`Config::sync_releases`].
    pub fn sync_releases(mut self, sync: bool) -> Self {
        self.config.replica_sync.sync_releases = sync;
        self
    }
}
