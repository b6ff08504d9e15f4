//! [`Config::from_redisson_yaml`]: a Redisson YAML file turned into a redmutex config.

use std::path::Path;

use super::{Config, ShardedSubscriptionMode};
use crate::error::{Error, Result};
use crate::redisson_yaml::{self, Mode, RedissonFile, Sharded};

impl Config {
    /// Reads Redisson's own YAML configuration (`singleServerConfig`,
    /// `clusterServersConfig` or `sentinelServersConfig`), so that the Java and the
    /// Rust services of a fleet share one file. `path_or_text` is a file path, or the
    /// YAML itself when it is not the name of a file.
    ///
    /// `${NAME}` and `${NAME:-default}` are replaced from the environment first, as
    /// Redisson does. The settings redmutex has are read (addresses, master name,
    /// credentials, `database`, timeouts, retries, pool sizes, `scanInterval`,
    /// `shardedSubscriptionMode`, `lockWatchdogTimeout`, `checkLockSyncedSlaves`,
    /// `slavesSyncTimeout`, `fairLockWaitTimeout`); every other Redisson key is ignored
    /// with a debug log. Redisson's defaults stand where the file is silent, as they do
    /// for Redisson.
    ///
    /// ```
    /// let config = redmutex::Config::from_redisson_yaml(
    ///     "sentinelServersConfig:\n  masterName: mymaster\n  sentinelAddresses:\n  - redis://127.0.0.1:26379\n",
    /// )
    /// .unwrap();
    /// assert_eq!(config.master_name(), Some("mymaster"));
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Config`] naming the key for a missing address, a value of the wrong
    /// type or malformed YAML, and naming the file when it cannot be read.
    pub fn from_redisson_yaml(path_or_text: impl AsRef<str>) -> Result<Self> {
        let given = path_or_text.as_ref();
        let text = if Path::new(given).is_file() {
            std::fs::read_to_string(given)
                .map_err(|e| Error::Config(format!("cannot read {given:?}: {e}")))?
        } else if given.contains(':') || given.contains('\n') {
            given.to_owned()
        } else {
            return Err(Error::Config(format!(
                "{given:?} is neither a file nor a Redisson YAML document"
            )));
        };
        let text = redisson_yaml::resolve_env(&text, |name| std::env::var(name).ok());
        let file = redisson_yaml::parse(&text)
            .map_err(|e| Error::Config(format!("Redisson YAML: {e}")))?;
        Ok(Self::from_file(file))
    }

    fn from_file(file: RedissonFile) -> Self {
        let mut builder = Config::builder();
        let database = file.database.map(i64::from);
        builder = match file.mode {
            Mode::Single { address } => {
                builder.address(with_database(address, database.unwrap_or(0)))
            }
            Mode::Cluster { nodes } => {
                let mut b = builder.cluster_nodes(nodes);
                if let Some(interval) = file.scan_interval {
                    b = b.scan_interval(interval);
                }
                if let Some(mode) = file.sharded_subscription_mode {
                    b = b.sharded_subscription_mode(match mode {
                        Sharded::Auto => ShardedSubscriptionMode::Auto,
                        Sharded::On => ShardedSubscriptionMode::On,
                        Sharded::Off => ShardedSubscriptionMode::Off,
                    });
                }
                b
            }
            Mode::Sentinel {
                master_name,
                sentinels,
            } => {
                let mut b = builder
                    .master_name(master_name)
                    .sentinel_addresses(sentinels)
                    .database(database.unwrap_or(0));
                if let Some(user) = file.sentinel_username {
                    b = b.sentinel_username(user);
                }
                if let Some(password) = file.sentinel_password {
                    b = b.sentinel_password(password);
                }
                if let Some(interval) = file.scan_interval {
                    b = b.sentinel_scan_interval(interval);
                }
                b
            }
        };
        if let Some(user) = file.username {
            builder = builder.username(user);
        }
        if let Some(password) = file.password {
            builder = builder.password(password);
        }
        let mut config = builder.build();
        set(&mut config.response_timeout, file.timeout);
        set(&mut config.connection_timeout, file.connect_timeout);
        set(&mut config.retry_attempts, file.retry_attempts);
        if let Some((base, max)) = file.retry_delay {
            config.retry_delay = base;
            config.retry_max_delay = max;
        }
        set(&mut config.pool_max_size, file.pool_size);
        if let Some(idle) = file.min_idle {
            config.pool_min_idle = Some(idle);
        }
        set(
            &mut config.lock_watchdog_timeout,
            file.lock_watchdog_timeout,
        );
        if let Some(check) = file.check_lock_synced_slaves {
            config.replica_sync.check_lock_synced_slaves = Some(check);
        }
        set(
            &mut config.replica_sync.slaves_sync_timeout,
            file.slaves_sync_timeout,
        );
        set(
            &mut config.fair_lock_wait_timeout,
            file.fair_lock_wait_timeout,
        );
        config
    }
}

/// Overwrites `slot` with what the file says, if it says anything.
fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *slot = v;
    }
}

/// A single server's URL with Redisson's `database` as its path, unless the URL names a
/// database itself.
fn with_database(address: String, database: i64) -> String {
    if database == 0 {
        return address;
    }
    let after_scheme = address.find("://").map_or(0, |i| i + 3);
    if address[after_scheme..].contains('/') {
        address
    } else {
        format!("{address}/{database}")
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn redissons_examples_become_configs() {
        let single =
            Config::from_redisson_yaml(include_str!("../../tests/fixtures/redisson/single.yaml"))
                .unwrap();
        assert_eq!(single.address(), "redis://127.0.0.1:6379");
        assert!(!single.is_cluster() && !single.is_sentinel());
        assert_eq!(single.pool_max_size(), 64);
        assert_eq!(single.pool_min_idle(), Some(24));
        assert_eq!(single.response_timeout(), Duration::from_secs(3));
        assert_eq!(single.retry_max_delay(), Duration::from_secs(2));
        assert!(single.validate().is_ok());

        let cluster =
            Config::from_redisson_yaml(include_str!("../../tests/fixtures/redisson/cluster.yaml"))
                .unwrap();
        assert_eq!(cluster.node_addresses().len(), 3);
        assert_eq!(cluster.scan_interval(), Duration::from_secs(1));
        assert!(cluster.validate().is_ok());

        let sentinel =
            Config::from_redisson_yaml(include_str!("../../tests/fixtures/redisson/sentinel.yaml"))
                .unwrap();
        assert_eq!(sentinel.master_name(), Some("mymaster"));
        assert_eq!(
            sentinel.sentinel_addresses(),
            ["redis://127.0.0.1:26379", "redis://127.0.0.1:26389"]
        );
        assert_eq!(sentinel.database(), 0);
        assert!(sentinel.validate().is_ok());
    }

    #[test]
    fn top_level_lock_settings_are_read() {
        let c = Config::from_redisson_yaml(
            "singleServerConfig:\n  address: redis://h:1\n  database: 2\n\
             lockWatchdogTimeout: 9000\ncheckLockSyncedSlaves: false\n\
             slavesSyncTimeout: 250\nfairLockWaitTimeout: 60000\n\
             username: u\npassword: p\n",
        )
        .unwrap();
        assert_eq!(c.address(), "redis://h:1/2");
        assert_eq!(c.lock_watchdog_timeout(), Duration::from_secs(9));
        assert!(!c.check_lock_synced_slaves());
        assert_eq!(c.slaves_sync_timeout(), Duration::from_millis(250));
        assert_eq!(c.fair_lock_wait_timeout(), Duration::from_secs(60));
        assert_eq!(c.username(), Some("u"));
        assert!(c.has_password());
    }

    #[test]
    fn errors_are_config_errors_naming_the_key() {
        for (text, key) in [
            (
                "sentinelServersConfig:\n  masterName: m\n",
                "sentinelAddresses",
            ),
            (
                "sentinelServersConfig:\n  sentinelAddresses: [redis://h:1]\n",
                "masterName",
            ),
            (
                "singleServerConfig:\n  address: redis://h:1\n  timeout: soon\n",
                "singleServerConfig.timeout",
            ),
            (
                "clusterServersConfig:\n  nodeAddresses: 5\n",
                "nodeAddresses",
            ),
        ] {
            match Config::from_redisson_yaml(text) {
                Err(Error::Config(msg)) => assert!(msg.contains(key), "{msg}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        assert!(matches!(
            Config::from_redisson_yaml("/no/such/file.yaml"),
            Err(Error::Config(_))
        ));
    }
}
