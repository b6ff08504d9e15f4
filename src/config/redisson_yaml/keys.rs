//! Which settings Redisson's YAML reader knows, section by section, so that a misspelt
//! key is an error (as it is for Redisson) rather than a default silently kept.
//!
//! The lists follow Redisson's config classes: `Config` for the top level, `BaseConfig`
//! shared by every mode section, `SingleServerConfig`, `BaseMasterSlaveServersConfig`
//! shared by the cluster and sentinel sections, `ClusterServersConfig` and
//! `SentinelServersConfig`. Each section's list is the union of the keys that
//! Redisson 4.7.0's and 3.23.5's `Config.fromYAML` accept there: the Java peer's
//! `--yaml-keys` prints them (`tests/fixtures/redisson/keys-<version>.txt` keep its
//! output, and a unit test checks these lists against those files).

/// A part of a Redisson file with its own set of keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Section {
    /// The top level (`Config`).
    Top,
    /// `singleServerConfig`.
    Single,
    /// `clusterServersConfig`.
    Cluster,
    /// `sentinelServersConfig`.
    Sentinel,
}

impl Section {
    /// The section's name in a file (empty for the top level).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Top => "",
            Self::Single => "singleServerConfig",
            Self::Cluster => "clusterServersConfig",
            Self::Sentinel => "sentinelServersConfig",
        }
    }

    /// The lists whose union is this section's keys.
    fn lists(self) -> &'static [&'static [&'static str]] {
        match self {
            Self::Top => &[TOP],
            Self::Single => &[BASE, SINGLE],
            Self::Cluster => &[BASE, MASTER_SLAVE, CLUSTER],
            Self::Sentinel => &[BASE, MASTER_SLAVE, SENTINEL],
        }
    }

    /// Whether Redisson (4.7.0 or 3.23.5) accepts `key` in this section.
    pub(crate) fn defines(self, key: &str) -> bool {
        self.lists().iter().any(|list| list.contains(&key))
    }

    /// Every key of this section.
    pub(crate) fn keys(self) -> impl Iterator<Item = &'static str> {
        self.lists().iter().flat_map(|list| list.iter().copied())
    }
}

/// `Config`: the top level. `clusterConfig`, `sentinelConfig` and `singleConfig` are
/// names 3.23.5 skips without complaint (4.x rejects them).
const TOP: &[&str] = &[
    "addressResolverGroupFactory",
    "checkLockSyncedSlaves",
    "cleanUpKeysAmount",
    "clusterConfig",
    "clusterServersConfig",
    "codec",
    "commandMapper",
    "connectionListener",
    "credentialsResolver",
    "eventLoopGroup",
    "executor",
    "fairLockWaitTimeout",
    "keepPubSubOrder",
    "lazyInitialization",
    "lockWatchdogBatchSize",
    "lockWatchdogTimeout",
    "masterSlaveServersConfig",
    "maxCleanUpDelay",
    "minCleanUpDelay",
    "nameMapper",
    "nettyExecutor",
    "nettyHook",
    "nettyThreads",
    "password",
    "protocol",
    "referenceEnabled",
    "reliableTopicWatchdogTimeout",
    "replicatedServersConfig",
    "sentinelConfig",
    "sentinelServersConfig",
    "singleConfig",
    "singleServerConfig",
    "slavesSyncTimeout",
    "sslCiphers",
    "sslKeystore",
    "sslKeystorePassword",
    "sslKeystoreType",
    "sslProtocols",
    "sslProvider",
    "sslTruststore",
    "sslTruststorePassword",
    "sslVerificationMode",
    "tcpKeepAlive",
    "tcpKeepAliveCount",
    "tcpKeepAliveIdle",
    "tcpKeepAliveInterval",
    "tcpNoDelay",
    "tcpUserTimeout",
    "threads",
    "transportMode",
    "useScriptCache",
    "useThreadClassLoader",
    "username",
    "valkeyCapabilities",
];

/// `BaseConfig`: in every mode section. `retryInterval`, `sslKeyManagerFactory` and
/// `sslTrustManagerFactory` are 3.23.5's (4.x rejects them).
const BASE: &[&str] = &[
    "clientName",
    "commandMapper",
    "connectTimeout",
    "credentialsResolver",
    "idleConnectionTimeout",
    "keepAlive",
    "nameMapper",
    "password",
    "pingConnectionInterval",
    "reconnectionDelay",
    "retryAttempts",
    "retryDelay",
    "retryInterval",
    "sslCiphers",
    "sslEnableEndpointIdentification",
    "sslKeyManagerFactory",
    "sslKeystore",
    "sslKeystorePassword",
    "sslKeystoreType",
    "sslProtocols",
    "sslProvider",
    "sslTrustManagerFactory",
    "sslTruststore",
    "sslTruststorePassword",
    "sslVerificationMode",
    "subscriptionTimeout",
    "subscriptionsPerConnection",
    "tcpKeepAliveCount",
    "tcpKeepAliveIdle",
    "tcpKeepAliveInterval",
    "tcpNoDelay",
    "tcpUserTimeout",
    "timeout",
    "username",
];

/// `SingleServerConfig`.
const SINGLE: &[&str] = &[
    "address",
    "connectionMinimumIdleSize",
    "connectionPoolSize",
    "database",
    "dnsMonitoringInterval",
    "dnsMonitoringTimes",
    "subscriptionConnectionMinimumIdleSize",
    "subscriptionConnectionPoolSize",
];

/// `BaseMasterSlaveServersConfig`: in the cluster and sentinel sections. `slaveNotUsed`
/// is a name 3.23.5 skips without complaint.
const MASTER_SLAVE: &[&str] = &[
    "dnsMonitoringInterval",
    "dnsMonitoringTimes",
    "failedSlaveCheckInterval",
    "failedSlaveNodeDetector",
    "failedSlaveReconnectionInterval",
    "fallbackLoadingToMaster",
    "loadBalancer",
    "masterConnectionMinimumIdleSize",
    "masterConnectionPoolSize",
    "readMode",
    "slaveConnectionMinimumIdleSize",
    "slaveConnectionPoolSize",
    "slaveNotUsed",
    "subscriptionConnectionMinimumIdleSize",
    "subscriptionConnectionPoolSize",
    "subscriptionMode",
];

/// `ClusterServersConfig` (`database` is 4.x's, for Valkey clusters).
const CLUSTER: &[&str] = &[
    "checkMasterLinkStatus",
    "checkSlotsCoverage",
    "database",
    "natMap",
    "natMapper",
    "nodeAddresses",
    "scanInterval",
    "shardedSubscriptionMode",
];

/// `SentinelServersConfig`.
const SENTINEL: &[&str] = &[
    "checkSentinelsList",
    "checkSlaveStatusWithSyncing",
    "database",
    "masterName",
    "natMap",
    "natMapper",
    "scanInterval",
    "sentinelAddresses",
    "sentinelPassword",
    "sentinelUsername",
    "sentinelsDiscovery",
];

/// Why `key` at `at` (its dotted path) is refused in `section` of a file whose mode
/// section is `mode`: it is not a Redisson setting there, with the nearest key Redisson
/// knows, or the section it belongs in.
pub(crate) fn unknown(section: Section, mode: Section, at: &str, key: &str) -> String {
    let place = match section {
        Section::Top => "at the top level".to_owned(),
        other => format!("in {}", other.name()),
    };
    let head = format!(
        "{at} is not a Redisson setting {place} (Redisson 4.7.0 and 3.23.5 refuse such a file)"
    );
    // The right key in the wrong place: a top-level key inside the mode section, or a
    // mode key at the top level.
    let elsewhere = if section == Section::Top {
        mode
    } else {
        Section::Top
    };
    if elsewhere.defines(key) {
        return match elsewhere {
            Section::Top => format!(
                "{head}: {key} is a top-level setting; move it out of {}",
                section.name()
            ),
            other => format!("{head}: {key} belongs in {}", other.name()),
        };
    }
    let near = nearest(key, section.keys())
        .map(|k| (k, section))
        .or_else(|| nearest(key, elsewhere.keys()).map(|k| (k, elsewhere)));
    match near {
        Some((k, s)) if s == section => format!("{head}; did you mean {k}?"),
        Some((k, Section::Top)) => format!("{head}; did you mean {k} (a top-level setting)?"),
        Some((k, s)) => format!("{head}; did you mean {k} (in {})?", s.name()),
        None => head,
    }
}

/// The candidate closest to `key` (ignoring case), if it is close enough to be a
/// misspelling: at most a quarter of the key's letters apart, and at least 2 allowed.
fn nearest<'a>(key: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let key_lower = key.to_ascii_lowercase();
    let limit = (key.chars().count() / 4).max(2);
    candidates
        .map(|c| (distance(&key_lower, &c.to_ascii_lowercase()), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Edit distance counting insertions, deletions, substitutions and swaps of two
/// neighbouring letters (optimal string alignment), as typos are.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let width = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * width];
    for i in 0..=a.len() {
        d[i * width] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(width) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[(i - 1) * width + j] + 1)
                .min(d[i * width + j - 1] + 1)
                .min(d[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[(i - 2) * width + j - 2] + 1);
            }
            d[i * width + j] = best;
        }
    }
    d[a.len() * width + b.len()]
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// The keys a version's Java peer printed for `section` (`--yaml-keys`).
    fn printed(text: &str, section: Section) -> BTreeSet<String> {
        let label = match section {
            Section::Top => "top",
            other => other.name(),
        };
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(label)?.strip_prefix(": "))
            .unwrap_or_else(|| panic!("no `{label}:` line"));
        line.split_whitespace().map(str::to_owned).collect()
    }

    /// The lists here are exactly the union of what the two Redisson versions accept.
    #[test]
    fn the_lists_are_redissons_own() {
        let versions = [
            include_str!("../../../tests/fixtures/redisson/keys-4.7.0.txt"),
            include_str!("../../../tests/fixtures/redisson/keys-3.23.5.txt"),
        ];
        for section in [
            Section::Top,
            Section::Single,
            Section::Cluster,
            Section::Sentinel,
        ] {
            let redisson: BTreeSet<String> = versions
                .iter()
                .flat_map(|text| printed(text, section))
                .collect();
            let here: BTreeSet<String> = section.keys().map(str::to_owned).collect();
            assert_eq!(here, redisson, "{section:?}");
        }
    }

    #[test]
    fn misspellings_get_the_nearest_key() {
        let cases = [
            (Section::Single, "pasword", "did you mean password?"),
            (Section::Single, "databse", "did you mean database?"),
            (
                Section::Top,
                "lockWatchdogTimout",
                "did you mean lockWatchdogTimeout?",
            ),
            (
                Section::Single,
                "lockWatchdogTimeout",
                "lockWatchdogTimeout is a top-level setting; move it out of singleServerConfig",
            ),
            (
                Section::Top,
                "address",
                "address belongs in singleServerConfig",
            ),
            (
                Section::Cluster,
                "nodeAddress",
                "did you mean nodeAddresses?",
            ),
            (
                Section::Single,
                "lockWatchdogTimout",
                "did you mean lockWatchdogTimeout (a top-level setting)?",
            ),
            (Section::Single, "Password", "did you mean password?"),
        ];
        for (section, key, expected) in cases {
            let at = match section {
                Section::Top => key.to_owned(),
                s => format!("{}.{key}", s.name()),
            };
            let text = unknown(section, Section::Single, &at, key);
            assert!(text.contains(expected), "{key}: {text}");
            assert!(
                text.starts_with(&format!("{at} is not a Redisson setting")),
                "{text}"
            );
        }
        let far = unknown(
            Section::Single,
            Section::Single,
            "singleServerConfig.zzz",
            "zzz",
        );
        assert!(!far.contains("did you mean"), "{far}");
    }

    #[test]
    fn distance_counts_typos() {
        assert_eq!(distance("pasword", "password"), 1);
        assert_eq!(distance("databse", "database"), 1);
        assert_eq!(distance("abc", "abc"), 0);
        assert_eq!(distance("", "abc"), 3);
    }
}
