//! Redisson's YAML file turned into a redmutex config:
//! [`Config::from_redisson_yaml_file`] and [`Config::from_redisson_yaml_str`].

use std::path::Path;

use super::{Config, ShardedSubscriptionMode};
use crate::config::redisson_yaml::{self, Mode, RedissonFile, Sharded, Tls};
use crate::error::{Error, Result};

impl Config {
    /// Reads Redisson's own YAML configuration file (`singleServerConfig`,
    /// `clusterServersConfig` or `sentinelServersConfig`), so that the Java and the
    /// Rust services of a fleet share one file. See
    /// [`from_redisson_yaml_str`](Self::from_redisson_yaml_str) for what is read.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] naming the file when it does not exist or cannot be read, and
    /// as [`from_redisson_yaml_str`](Self::from_redisson_yaml_str) for its content.
    pub fn from_redisson_yaml_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::Config(match e.kind() {
                std::io::ErrorKind::NotFound => {
                    format!("the Redisson config file {} does not exist", path.display())
                }
                _ => format!(
                    "cannot read the Redisson config file {}: {e}",
                    path.display()
                ),
            })
        })?;
        Self::from_redisson_yaml_str(&text).map_err(|e| match e {
            Error::Config(msg) => Error::Config(format!("{}: {msg}", path.display())),
            other => other,
        })
    }

    /// Reads a Redisson YAML document (the text of a file
    /// [`from_redisson_yaml_file`](Self::from_redisson_yaml_file) would read).
    ///
    /// `${NAME}` and `${NAME:-default}` are replaced from the environment first, as
    /// Redisson does. Then every key is checked as Redisson checks it: a key Redisson
    /// (4.7.0 or 3.23.5) does not define at that place is an error that names its path
    /// and the nearest key Redisson knows, so `pasword` or `lockWatchdogTimeout` inside
    /// `singleServerConfig` fail here as they fail in Redisson. The settings redmutex has
    /// are read: addresses, master name, credentials, `database`, timeouts, retries,
    /// pool sizes, `scanInterval`, `shardedSubscriptionMode`, `checkSlotsCoverage`,
    /// `natMap` (cluster), `lockWatchdogTimeout`, `checkLockSyncedSlaves`,
    /// `slavesSyncTimeout`, `fairLockWaitTimeout` and the TLS keys (`sslTruststore` as a
    /// PEM file; see `docs/compat.md`). Keys Redisson defines that mean nothing here
    /// (`threads`, `codec`, `readMode`, ...) are accepted and named in one log line at
    /// info. Redisson's defaults stand where the file is silent, as they do for
    /// Redisson. Adjust the result with [`to_builder`](Self::to_builder).
    ///
    /// ```
    /// let config = redmutex::Config::from_redisson_yaml_str(
    ///     "sentinelServersConfig:\n  masterName: mymaster\n  sentinelAddresses:\n  - redis://127.0.0.1:26379\n",
    /// )?;
    /// assert_eq!(config.master_name(), Some("mymaster"));
    ///
    /// let typo = redmutex::Config::from_redisson_yaml_str(
    ///     "singleServerConfig:\n  address: redis://127.0.0.1:6379\n  pasword: secret\n",
    /// );
    /// assert!(typo.unwrap_err().to_string().contains("did you mean password?"));
    /// # Ok::<(), redmutex::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Config`] naming the key for a key Redisson does not define, a missing
    /// address, a value of the wrong type, a trust store that is not PEM, a TLS setting
    /// redmutex cannot honour, or malformed YAML.
    pub fn from_redisson_yaml_str(text: &str) -> Result<Self> {
        let text = redisson_yaml::resolve_env(text, |name| std::env::var(name).ok());
        let file = redisson_yaml::parse(&text)
            .map_err(|e| Error::Config(format!("Redisson YAML: {e}")))?;
        Self::from_file(file).map_err(|e| Error::Config(format!("Redisson YAML: {e}")))
    }

    /// Reads Redisson's YAML configuration from a file path, or from the YAML itself
    /// when `path_or_text` is not the name of a file.
    ///
    /// # Errors
    ///
    /// As [`from_redisson_yaml_file`](Self::from_redisson_yaml_file) and
    /// [`from_redisson_yaml_str`](Self::from_redisson_yaml_str); a text that is neither
    /// a file nor YAML is an [`Error::Config`].
    #[deprecated(
        since = "0.1.0",
        note = "a missing file was read as YAML text; use `from_redisson_yaml_file` or \
                `from_redisson_yaml_str`"
    )]
    pub fn from_redisson_yaml(path_or_text: impl AsRef<str>) -> Result<Self> {
        let given = path_or_text.as_ref();
        if Path::new(given).is_file() {
            Self::from_redisson_yaml_file(given)
        } else if given.contains(':') || given.contains('\n') {
            Self::from_redisson_yaml_str(given)
        } else {
            Err(Error::Config(format!(
                "{given:?} is neither a file nor a Redisson YAML document"
            )))
        }
    }

    fn from_file(file: RedissonFile) -> std::result::Result<Self, String> {
        let mut builder = Config::builder();
        if let Some(db) = file.database {
            builder = builder.database(i64::from(db));
        }
        builder = match file.mode {
            Mode::Single { address } => builder.address(address),
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
                if let Some(check) = file.check_slots_coverage {
                    b = b.check_slots_coverage(check);
                }
                for (announced, dial) in file.nat_map {
                    b = b.nat_map(announced, dial);
                }
                b
            }
            Mode::Sentinel {
                master_name,
                sentinels,
            } => {
                let mut b = builder
                    .master_name(master_name)
                    .sentinel_addresses(sentinels);
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
        if let Some(pem) = tls_roots(&file.tls)? {
            builder = builder.tls_root_certificate(pem);
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
            config.replica_sync.check_lock_synced_slaves = check;
        }
        set(
            &mut config.replica_sync.slaves_sync_timeout,
            file.slaves_sync_timeout,
        );
        set(
            &mut config.fair_lock_wait_timeout,
            file.fair_lock_wait_timeout,
        );
        if !file.unused.is_empty() {
            log::info!(
                "redmutex: Redisson settings redmutex has no use for, ignored: {}",
                file.unused.join(", ")
            );
        }
        Ok(config)
    }
}

/// The PEM roots Redisson's TLS keys give, or why they cannot be honoured here.
///
/// Redisson reads `sslTruststore` as a Java key store (JKS or PKCS#12); redmutex reads
/// PEM, so a PEM file there works for redmutex (a Java service needs its own key store
/// file). A client key store (`sslKeystore`, mutual TLS) and relaxed verification have
/// no equivalent here: an error, rather than a connection that differs from the Java
/// service's.
fn tls_roots(tls: &Tls) -> std::result::Result<Option<Vec<u8>>, String> {
    if let Some((at, mode)) = &tls.verification_mode
        && !mode.eq_ignore_ascii_case("strict")
    {
        return Err(format!(
            "{at} is {mode}: redmutex always verifies the server's certificate and host \
                 name (STRICT); give the server a certificate that names its host"
        ));
    }
    if let Some((at, false)) = &tls.endpoint_identification {
        return Err(format!(
            "{at} is false: redmutex always verifies that the certificate names the host; \
             give the server a certificate that names its host, or drop the key"
        ));
    }
    if let Some((at, _)) = &tls.keystore {
        return Err(format!(
            "{at}: client certificates (mutual TLS) are not supported by redmutex; drop the \
             key from the file redmutex reads"
        ));
    }
    let Some((at, url)) = &tls.truststore else {
        return Ok(None);
    };
    let path = url
        .strip_prefix("file://")
        .or_else(|| url.strip_prefix("file:"))
        .unwrap_or(url);
    if path.contains("://") || path.starts_with("classpath:") {
        return Err(format!(
            "{at} is {url:?}: redmutex reads a trust store from a file only (file:/path or \
             a path); or set ConfigBuilder::tls_root_certificate"
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("{at}: cannot read {path}: {e}"))?;
    let pem = String::from_utf8_lossy(&bytes);
    if pem.contains("-----BEGIN CERTIFICATE-----") {
        return Ok(Some(bytes));
    }
    Err(format!(
        "{at}: {path} is not a PEM certificate file (a JKS or PKCS#12 key store?), which \
         redmutex cannot read: export the CA certificate as PEM (`keytool -exportcert -rfc \
         -keystore {path} -alias <alias>`) and name that file in sslTruststore for \
         redmutex, or set it with ConfigBuilder::tls_root_certificate after loading \
         (Config::to_builder){}",
        if tls.truststore_password.is_some() {
            "; sslTruststorePassword is then not needed"
        } else {
            ""
        }
    ))
}

/// Overwrites `slot` with what the file says, if it says anything.
fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *slot = v;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn redissons_examples_become_configs() {
        let single = Config::from_redisson_yaml_str(include_str!(
            "../../tests/fixtures/redisson/single.yaml"
        ))
        .unwrap();
        assert_eq!(single.address(), "redis://127.0.0.1:6379");
        assert!(!single.is_cluster() && !single.is_sentinel());
        assert_eq!(single.pool_max_size(), 64);
        assert_eq!(single.pool_min_idle(), Some(24));
        assert_eq!(single.response_timeout(), Duration::from_secs(3));
        assert_eq!(single.retry_max_delay(), Duration::from_secs(2));
        assert!(single.validate().is_ok());

        let cluster = Config::from_redisson_yaml_str(include_str!(
            "../../tests/fixtures/redisson/cluster.yaml"
        ))
        .unwrap();
        assert_eq!(cluster.node_addresses().len(), 3);
        assert_eq!(cluster.scan_interval(), Duration::from_secs(1));
        assert!(cluster.validate().is_ok());

        let sentinel = Config::from_redisson_yaml_str(include_str!(
            "../../tests/fixtures/redisson/sentinel.yaml"
        ))
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
        let c = Config::from_redisson_yaml_str(
            "singleServerConfig:\n  address: redis://h:1\n  database: 2\n\
             lockWatchdogTimeout: 9000\ncheckLockSyncedSlaves: false\n\
             slavesSyncTimeout: 250\nfairLockWaitTimeout: 60000\n\
             username: u\npassword: p\n",
        )
        .unwrap();
        assert_eq!(c.address(), "redis://h:1");
        assert_eq!(c.database(), 2);
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
            match Config::from_redisson_yaml_str(text) {
                Err(Error::Config(msg)) => assert!(msg.contains(key), "{msg}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        // A path that does not exist is a missing file, never YAML text.
        for path in ["/no/such/file.yaml", "/no/such:dir/redisson.yaml"] {
            match Config::from_redisson_yaml_file(path) {
                Err(Error::Config(msg)) => {
                    assert!(
                        msg.contains(path) && msg.contains("does not exist"),
                        "{msg}"
                    );
                }
                other => panic!("{path}: {other:?}"),
            }
        }
    }

    /// The deprecated entry point keeps its behaviour: a file when the name is one,
    /// else the text itself.
    #[test]
    #[allow(deprecated)]
    fn the_old_entry_point_still_reads_both() {
        let text = "singleServerConfig:\n  address: redis://h:1\n";
        assert_eq!(
            Config::from_redisson_yaml(text).unwrap().address(),
            "redis://h:1"
        );
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/redisson/single.yaml"
        );
        assert_eq!(
            Config::from_redisson_yaml(path).unwrap().address(),
            "redis://127.0.0.1:6379"
        );
        assert!(matches!(
            Config::from_redisson_yaml("neither"),
            Err(Error::Config(_))
        ));
    }

    #[test]
    fn cluster_nat_and_coverage_are_read() {
        let c = Config::from_redisson_yaml_str(
            "clusterServersConfig:\n  nodeAddresses: [redis://10.0.0.1:7000]\n  \
             checkSlotsCoverage: false\n  natMap:\n    \"10.0.0.1:7000\": \"127.0.0.1:17000\"\n    \
             \"redis://10.0.0.2:7000\": \"redis://127.0.0.1:17001\"\n",
        )
        .unwrap();
        assert!(!c.check_slots_coverage());
        assert_eq!(
            c.nat_map(),
            [
                ("10.0.0.1:7000".to_owned(), "127.0.0.1:17000".to_owned()),
                ("10.0.0.2:7000".to_owned(), "127.0.0.1:17001".to_owned())
            ]
        );
        assert!(c.validate().is_ok());
    }

    #[test]
    fn a_pem_truststore_becomes_the_tls_root() {
        let dir = std::env::temp_dir().join(format!("redmutex-yaml-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pem = dir.join("ca.pem");
        let jks = dir.join("ca.jks");
        let body = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        std::fs::write(&pem, body).unwrap();
        std::fs::write(&jks, [0xfe, 0xed, 0xfe, 0xed, 0, 0, 0, 2]).unwrap();
        let yaml = |extra: &str| format!("singleServerConfig:\n  address: rediss://h:1\n{extra}");
        // 4.x puts the key at the top level, 3.x in the section; a file: URL or a path.
        for extra in [
            format!(
                "sslTruststore: file:{}\nsslTruststorePassword: x\n",
                pem.display()
            ),
            format!("  sslTruststore: {}\n", pem.display()),
        ] {
            let c = Config::from_redisson_yaml_str(&yaml(&extra)).unwrap();
            assert_eq!(c.tls_root_certificate(), Some(body.as_bytes()), "{extra}");
        }
        let refused = [
            (
                format!(
                    "sslTruststore: file:{}\nsslTruststorePassword: x\n",
                    jks.display()
                ),
                "sslTruststore: ",
                "ConfigBuilder::tls_root_certificate",
            ),
            (
                "sslTruststore: classpath:ca.jks\n".to_owned(),
                "sslTruststore is \"classpath:ca.jks\"",
                "from a file only",
            ),
            (
                format!("sslKeystore: file:{}\n", pem.display()),
                "sslKeystore",
                "client certificates",
            ),
            (
                "  sslEnableEndpointIdentification: false\n".to_owned(),
                "singleServerConfig.sslEnableEndpointIdentification is false",
                "names its host",
            ),
            (
                "sslVerificationMode: CA_ONLY\n".to_owned(),
                "sslVerificationMode is CA_ONLY",
                "STRICT",
            ),
        ];
        for (extra, at, hint) in refused {
            match Config::from_redisson_yaml_str(&yaml(&extra)) {
                Err(Error::Config(msg)) => {
                    assert!(msg.contains(at) && msg.contains(hint), "{extra}: {msg}");
                }
                other => panic!("{extra}: {other:?}"),
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_loaded_config_can_be_adjusted() {
        let loaded = Config::from_redisson_yaml_str(include_str!(
            "../../tests/fixtures/redisson/cluster.yaml"
        ))
        .unwrap();
        let adjusted = loaded
            .to_builder()
            .publish_both(true)
            .metrics_lock_names(true)
            .tls_root_certificate(b"pem".to_vec())
            .build();
        assert!(adjusted.publish_both() && adjusted.metrics_lock_names());
        assert_eq!(adjusted.node_addresses(), loaded.node_addresses());
        assert_eq!(adjusted.scan_interval(), loaded.scan_interval());
        assert_eq!(adjusted.pool_max_size(), loaded.pool_max_size());
        let same = crate::ConfigBuilder::from(loaded.clone()).build();
        assert_eq!(format!("{same:?}"), format!("{loaded:?}"));
    }
}
