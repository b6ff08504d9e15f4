//! Redisson's own YAML configuration file, read into the settings redmutex understands,
//! so that one file configures the Java and the Rust services of a fleet.
//!
//! Redisson reads the file with SnakeYAML (Jackson before 4.0) after replacing `${NAME}`
//! and `${NAME:-default}` with environment variables (and Java system properties, which
//! do not exist here). The same replacement runs here, then the document is walked key by
//! key. As in Redisson, a key Redisson does not define is an error (naming its path and
//! the nearest key Redisson knows); a key Redisson defines but redmutex has no use for is
//! accepted and named in one log line at info; the keys redmutex knows are checked and
//! converted, and a wrong type or a missing address is an error that names the key (as
//! `sentinelServersConfig.sentinelAddresses[1]`).

use std::time::Duration;

use yaml_rust2::{Yaml, YamlLoader};

mod keys;

use keys::Section;

/// The deployment a file describes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `singleServerConfig.address`.
    Single { address: String },
    /// `clusterServersConfig.nodeAddresses`.
    Cluster { nodes: Vec<String> },
    /// `sentinelServersConfig.sentinelAddresses` and `masterName`.
    Sentinel {
        master_name: String,
        sentinels: Vec<String>,
    },
}

/// Redisson's `shardedSubscriptionMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sharded {
    Auto,
    On,
    Off,
}

/// What a Redisson file says that redmutex uses. `None`: the file leaves the default.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct RedissonFile {
    pub(crate) mode: Mode,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
    pub(crate) sentinel_username: Option<String>,
    pub(crate) sentinel_password: Option<String>,
    pub(crate) database: Option<u32>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) connect_timeout: Option<Duration>,
    pub(crate) retry_attempts: Option<u32>,
    /// `retryDelay` (base, max), or the older `retryInterval` as both.
    pub(crate) retry_delay: Option<(Duration, Duration)>,
    pub(crate) pool_size: Option<u32>,
    pub(crate) min_idle: Option<u32>,
    pub(crate) scan_interval: Option<Duration>,
    pub(crate) sharded_subscription_mode: Option<Sharded>,
    pub(crate) check_slots_coverage: Option<bool>,
    /// `natMap` of the cluster section: announced `host:port` → `host:port` to dial.
    pub(crate) nat_map: Vec<(String, String)>,
    pub(crate) lock_watchdog_timeout: Option<Duration>,
    pub(crate) check_lock_synced_slaves: Option<bool>,
    pub(crate) slaves_sync_timeout: Option<Duration>,
    pub(crate) fair_lock_wait_timeout: Option<Duration>,
    pub(crate) tls: Tls,
    /// Keys Redisson defines that redmutex has no use for, with a value (dotted paths).
    pub(crate) unused: Vec<String>,
}

impl Default for Mode {
    fn default() -> Self {
        Self::Single {
            address: String::new(),
        }
    }
}

/// Redisson's TLS keys (top level in 4.x, per mode section in 3.x), each with the path
/// it was found at, for messages.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Tls {
    /// `sslTruststore`: a URL of the trust store.
    pub(crate) truststore: Option<(String, String)>,
    /// `sslTruststorePassword`.
    pub(crate) truststore_password: Option<String>,
    /// `sslKeystore`: a URL of the client's key store (mutual TLS).
    pub(crate) keystore: Option<(String, String)>,
    /// `sslEnableEndpointIdentification`.
    pub(crate) endpoint_identification: Option<(String, bool)>,
    /// `sslVerificationMode` (4.x): `STRICT`, `CA_ONLY` or `NONE`.
    pub(crate) verification_mode: Option<(String, String)>,
}

/// Replaces `${NAME}` and `${NAME:-default}` the way Redisson does: with the environment
/// variable `NAME` when it is set, else with the default when there is one; a reference
/// to an unset variable without default stays as it is.
pub(crate) fn resolve_env(text: &str, env: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        // Redisson's pattern: a name of word characters and dots, and a non-empty default.
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
            && default.is_none_or(|d| !d.is_empty());
        match (valid, env(name), default) {
            (true, Some(value), _) => out.push_str(&value),
            (true, None, Some(default)) => out.push_str(default),
            _ => out.push_str(&rest[start..start + 2 + end + 1]),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// Parses a Redisson YAML document (after [`resolve_env`]).
///
/// # Errors
///
/// A message naming the offending key: malformed YAML, no mode section, a missing
/// address, or a value of the wrong type.
pub(crate) fn parse(text: &str) -> Result<RedissonFile, String> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| format!("not valid YAML: {e}"))?;
    let root = match docs.as_slice() {
        [doc] => doc,
        [] => return Err("the YAML document is empty".into()),
        _ => return Err("expected one YAML document, found several".into()),
    };
    let top = Map::new(root, "")?;
    let (section, mode) = mode(&top)?;
    let kind = match mode {
        Mode::Single { .. } => Section::Single,
        Mode::Cluster { .. } => Section::Cluster,
        Mode::Sentinel { .. } => Section::Sentinel,
    };
    let mut file = RedissonFile {
        mode,
        ..RedissonFile::default()
    };
    for (key, value) in top.entries() {
        let at = top.path(key);
        if !Section::Top.defines(key) {
            return Err(keys::unknown(Section::Top, kind, &at, key));
        }
        if tls_key(&mut file.tls, key, value, &at)? {
            continue;
        }
        match key {
            "singleServerConfig" | "clusterServersConfig" | "sentinelServersConfig" => {}
            // Redisson 4 moved the credentials to the top level.
            "username" => file.username = string(value, &at)?,
            "password" => file.password = string(value, &at)?,
            "lockWatchdogTimeout" => file.lock_watchdog_timeout = millis(value, &at)?,
            "checkLockSyncedSlaves" => file.check_lock_synced_slaves = boolean(value, &at)?,
            "slavesSyncTimeout" => file.slaves_sync_timeout = millis(value, &at)?,
            "fairLockWaitTimeout" => file.fair_lock_wait_timeout = millis(value, &at)?,
            _ => unused(&mut file, value, at),
        }
    }
    for (key, value) in section.entries() {
        let at = section.path(key);
        if !kind.defines(key) {
            return Err(keys::unknown(kind, kind, &at, key));
        }
        // The per-mode TLS keys of Redisson 3 (deprecated in 4, still read).
        if tls_key(&mut file.tls, key, value, &at)? {
            continue;
        }
        match key {
            "address" | "nodeAddresses" | "sentinelAddresses" | "masterName" => {}
            // The per-mode credentials of Redisson 3 (deprecated in 4, still read).
            "username" => file.username = string(value, &at)?.or(file.username),
            "password" => file.password = string(value, &at)?.or(file.password),
            "sentinelUsername" => file.sentinel_username = string(value, &at)?,
            "sentinelPassword" => file.sentinel_password = string(value, &at)?,
            "database" => file.database = number(value, &at)?,
            "timeout" => file.timeout = millis(value, &at)?,
            "connectTimeout" => file.connect_timeout = millis(value, &at)?,
            "retryAttempts" => file.retry_attempts = number(value, &at)?,
            "retryInterval" => {
                file.retry_delay = file.retry_delay.or(millis(value, &at)?.map(|d| (d, d)));
            }
            "retryDelay" => file.retry_delay = retry_delay(value, &at)?,
            "connectionPoolSize" | "masterConnectionPoolSize" => {
                file.pool_size = number(value, &at)?;
            }
            "connectionMinimumIdleSize" | "masterConnectionMinimumIdleSize" => {
                file.min_idle = number(value, &at)?;
            }
            "scanInterval" => file.scan_interval = millis(value, &at)?,
            "shardedSubscriptionMode" => {
                file.sharded_subscription_mode = sharded(value, &at)?;
            }
            "subscriptionMode" => subscription_mode(value, &at)?,
            "checkSlotsCoverage" => file.check_slots_coverage = boolean(value, &at)?,
            // Only a cluster's node addresses are mapped here; a sentinel's natMap is
            // Redisson's own business.
            "natMap" if kind == Section::Cluster => file.nat_map = nat_map(value, &at)?,
            _ => unused(&mut file, value, at),
        }
    }
    Ok(file)
}

/// Notes a key Redisson defines that redmutex does not use, unless it only repeats a
/// default (`null`, as Redisson's own `toYAML` writes many).
fn unused(file: &mut RedissonFile, value: &Yaml, at: String) {
    if !value.is_null() {
        file.unused.push(at);
    }
}

/// Reads `key` into `tls` if it is one of Redisson's TLS keys redmutex acts on; false
/// for any other key.
fn tls_key(tls: &mut Tls, key: &str, value: &Yaml, at: &str) -> Result<bool, String> {
    let with_path = |v: Option<String>| v.map(|v| (at.to_owned(), v));
    match key {
        "sslTruststore" => tls.truststore = with_path(string(value, at)?).or(tls.truststore.take()),
        "sslTruststorePassword" => {
            tls.truststore_password = string(value, at)?.or(tls.truststore_password.take());
        }
        "sslKeystore" => tls.keystore = with_path(string(value, at)?).or(tls.keystore.take()),
        "sslEnableEndpointIdentification" => {
            tls.endpoint_identification = boolean(value, at)?
                .map(|b| (at.to_owned(), b))
                .or(tls.endpoint_identification.take());
        }
        "sslVerificationMode" => {
            tls.verification_mode = with_path(string(value, at)?).or(tls.verification_mode.take());
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Redisson's `natMap`: a mapping of announced `host:port` to the `host:port` to dial
/// (a `redis://` prefix, which Redisson allows on either side, is dropped).
fn nat_map(value: &Yaml, at: &str) -> Result<Vec<(String, String)>, String> {
    if value.is_null() {
        return Ok(Vec::new());
    }
    let map = Map::new(value, at)?;
    map.entries()
        .map(|(from, to)| {
            let to = string(to, &map.path(from))?
                .ok_or_else(|| format!("{} is null", map.path(from)))?;
            Ok((bare(from), bare(&to)))
        })
        .collect()
}

/// `host:port` without a `redis://` or `rediss://` scheme.
fn bare(address: &str) -> String {
    address
        .split_once("://")
        .map_or(address, |(_, rest)| rest)
        .trim_end_matches('/')
        .to_owned()
}

/// The mode section and what it says about the deployment.
fn mode<'a>(top: &Map<'a>) -> Result<(Map<'a>, Mode), String> {
    let sections: Vec<&str> = [
        "singleServerConfig",
        "clusterServersConfig",
        "sentinelServersConfig",
        "masterSlaveServersConfig",
        "replicatedServersConfig",
    ]
    .into_iter()
    .filter(|k| top.get(k).is_some_and(|v| !v.is_null()))
    .collect();
    let name = match sections.as_slice() {
        [one] => *one,
        [] => {
            return Err(
                "no singleServerConfig, clusterServersConfig or sentinelServersConfig \
                        section (the modes redmutex supports)"
                    .into(),
            );
        }
        _ => {
            return Err(format!(
                "more than one mode section: {}",
                sections.join(", ")
            ));
        }
    };
    if matches!(name, "masterSlaveServersConfig" | "replicatedServersConfig") {
        return Err(format!(
            "{name} is a Redisson mode redmutex does not support: use singleServerConfig, \
             clusterServersConfig or sentinelServersConfig"
        ));
    }
    let section = Map::new(top.get(name).unwrap_or(&Yaml::Null), name)?;
    let mode = match name {
        "singleServerConfig" => Mode::Single {
            address: required_string(&section, "address")?,
        },
        "clusterServersConfig" => Mode::Cluster {
            nodes: addresses(&section, "nodeAddresses")?,
        },
        _ => Mode::Sentinel {
            master_name: required_string(&section, "masterName")?,
            sentinels: addresses(&section, "sentinelAddresses")?,
        },
    };
    Ok((section, mode))
}

/// A YAML mapping with string keys, and where it is in the file.
struct Map<'a> {
    entries: Vec<(&'a str, &'a Yaml)>,
    at: String,
}

impl<'a> Map<'a> {
    fn new(value: &'a Yaml, at: &str) -> Result<Self, String> {
        let Yaml::Hash(hash) = value else {
            return Err(match at {
                "" => "the file must be a mapping of Redisson settings".to_owned(),
                _ => format!("{at} must be a mapping of settings"),
            });
        };
        let mut entries = Vec::with_capacity(hash.len());
        for (key, value) in hash {
            let Yaml::String(key) = key else {
                return Err(format!("{at}: every key must be a name, found {key:?}"));
            };
            entries.push((key.as_str(), value));
        }
        Ok(Self {
            entries,
            at: at.to_owned(),
        })
    }

    fn entries(&self) -> impl Iterator<Item = (&'a str, &'a Yaml)> + '_ {
        self.entries.iter().copied()
    }

    fn get(&self, key: &str) -> Option<&'a Yaml> {
        self.entries
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    }

    /// The dotted path of `key` in this mapping, for messages.
    fn path(&self, key: &str) -> String {
        if self.at.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.at)
        }
    }
}

fn wrong(at: &str, expected: &str, value: &Yaml) -> String {
    let found = match value {
        Yaml::Real(r) => format!("the number {r}"),
        Yaml::Integer(i) => format!("the number {i}"),
        Yaml::String(s) => format!("{s:?}"),
        Yaml::Boolean(b) => b.to_string(),
        Yaml::Array(_) => "a list".into(),
        Yaml::Hash(_) => "a mapping".into(),
        Yaml::Alias(_) => "an alias".into(),
        Yaml::Null => "null".into(),
        Yaml::BadValue => "an unreadable value".into(),
    };
    format!("{at} must be {expected}, not {found}")
}

/// A string setting; `null` leaves the default.
fn string(value: &Yaml, at: &str) -> Result<Option<String>, String> {
    match value {
        Yaml::Null => Ok(None),
        Yaml::String(s) => Ok(Some(s.clone())),
        other => Err(wrong(at, "a string", other)),
    }
}

fn required_string(section: &Map<'_>, key: &str) -> Result<String, String> {
    let at = section.path(key);
    match section.get(key) {
        None | Some(Yaml::Null) => Err(format!("{at} is missing")),
        Some(value) => string(value, &at)?.ok_or_else(|| format!("{at} is missing")),
    }
}

/// A non-empty list of `redis://`, `rediss://`, `valkey://` or `valkeys://` addresses.
fn addresses(section: &Map<'_>, key: &str) -> Result<Vec<String>, String> {
    let at = section.path(key);
    let list = match section.get(key) {
        None | Some(Yaml::Null) => return Err(format!("{at} is missing")),
        Some(Yaml::Array(list)) if list.is_empty() => {
            return Err(format!("{at} names no address"));
        }
        Some(Yaml::Array(list)) => list,
        // SnakeYAML turns a lone string into a one-element list.
        Some(Yaml::String(one)) => return Ok(vec![one.clone()]),
        Some(other) => return Err(wrong(&at, "a list of addresses", other)),
    };
    list.iter()
        .enumerate()
        .map(|(i, item)| {
            let at = format!("{at}[{i}]");
            string(item, &at)?.ok_or_else(|| format!("{at} is null"))
        })
        .collect()
}

fn boolean(value: &Yaml, at: &str) -> Result<Option<bool>, String> {
    match value {
        Yaml::Null => Ok(None),
        Yaml::Boolean(b) => Ok(Some(*b)),
        // SnakeYAML reads these strings as booleans too.
        Yaml::String(s) if s.eq_ignore_ascii_case("true") => Ok(Some(true)),
        Yaml::String(s) if s.eq_ignore_ascii_case("false") => Ok(Some(false)),
        other => Err(wrong(at, "true or false", other)),
    }
}

/// A whole number that fits `T` (a count, a size, a database index).
fn number<T: TryFrom<i64>>(value: &Yaml, at: &str) -> Result<Option<T>, String> {
    let n = match value {
        Yaml::Null => return Ok(None),
        Yaml::Integer(n) => *n,
        Yaml::String(s) => s
            .trim()
            .parse::<i64>()
            .map_err(|_| wrong(at, "a whole number", value))?,
        other => return Err(wrong(at, "a whole number", other)),
    };
    T::try_from(n)
        .map(Some)
        .map_err(|_| format!("{at} is out of range: {n}"))
}

/// A time in milliseconds (Redisson's `int`/`long` settings), or an ISO-8601 duration
/// (`PT1S`, Java's `Duration`).
fn millis(value: &Yaml, at: &str) -> Result<Option<Duration>, String> {
    match value {
        Yaml::Null => Ok(None),
        Yaml::String(s) if s.starts_with(['P', 'p']) => iso_duration(s)
            .map(Some)
            .ok_or_else(|| wrong(at, "milliseconds or an ISO-8601 duration", value)),
        other => {
            let ms: u64 = number(other, at)?.unwrap_or(0);
            Ok(Some(Duration::from_millis(ms)))
        }
    }
}

/// `PT1S`, `PT0.1S`, `PT2M30S`, `PT1H`, `P1D` (the forms Java's `Duration` prints).
fn iso_duration(text: &str) -> Option<Duration> {
    let upper = text.to_ascii_uppercase();
    let rest = upper.strip_prefix('P')?;
    let (days, time) = match rest.split_once('T') {
        Some((days, time)) => (days, time),
        None => (rest, ""),
    };
    let mut total = 0f64;
    let mut parts = 0;
    if !days.is_empty() {
        parts += 1;
        total += days.strip_suffix('D')?.parse::<f64>().ok()? * 86_400.0;
    }
    let mut number = String::new();
    for c in time.chars() {
        match c {
            '0'..='9' | '.' | '-' => number.push(c),
            'H' | 'M' | 'S' => {
                parts += 1;
                let n: f64 = number.parse().ok()?;
                number.clear();
                total += n * match c {
                    'H' => 3600.0,
                    'M' => 60.0,
                    _ => 1.0,
                };
            }
            _ => return None,
        }
    }
    if parts == 0 || !number.is_empty() || !(0.0..1e12).contains(&total) {
        return None;
    }
    Some(Duration::from_secs_f64(total))
}

/// Redisson 3.48+'s `retryDelay`: a jitter delay `{baseDelay, maxDelay}` or a constant
/// `{delay}` (the YAML tag that names the class is not needed to tell them apart).
fn retry_delay(value: &Yaml, at: &str) -> Result<Option<(Duration, Duration)>, String> {
    if value.is_null() {
        return Ok(None);
    }
    let map = Map::new(value, at)?;
    let field = |key: &str| match map.get(key) {
        Some(v) => millis(v, &map.path(key)),
        None => Ok(None),
    };
    match (field("baseDelay")?, field("maxDelay")?, field("delay")?) {
        (Some(base), Some(max), _) => Ok(Some((base, max))),
        (_, _, Some(delay)) => Ok(Some((delay, delay))),
        _ => Err(format!(
            "{at} must have baseDelay and maxDelay (a jitter delay) or delay (a constant one)"
        )),
    }
}

fn sharded(value: &Yaml, at: &str) -> Result<Option<Sharded>, String> {
    Ok(match string(value, at)?.as_deref() {
        None => None,
        Some(s) if s.eq_ignore_ascii_case("auto") => Some(Sharded::Auto),
        Some(s) if s.eq_ignore_ascii_case("on") => Some(Sharded::On),
        Some(s) if s.eq_ignore_ascii_case("off") => Some(Sharded::Off),
        Some(_) => return Err(wrong(at, "AUTO, ON or OFF", value)),
    })
}

/// Redisson subscribes on masters (`MASTER`, the default) or replicas (`SLAVE`); redmutex
/// always subscribes where the locks are written, which Redisson's `MASTER` is.
fn subscription_mode(value: &Yaml, at: &str) -> Result<(), String> {
    match string(value, at)?.as_deref() {
        None => {}
        Some(s) if s.eq_ignore_ascii_case("master") => {}
        Some(s) if s.eq_ignore_ascii_case("slave") => log::debug!(
            "redmutex: {at} is SLAVE; redmutex subscribes on masters, where Redisson's \
             unlock scripts publish"
        ),
        Some(_) => return Err(wrong(at, "MASTER or SLAVE", value)),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "REDIS_PORT").then(|| "7000".to_owned())
    }

    #[test]
    fn placeholders_resolve_as_in_redisson() {
        assert_eq!(resolve_env("a:${REDIS_PORT}", env), "a:7000");
        assert_eq!(resolve_env("a:${REDIS_PORT:-6379}", env), "a:7000");
        assert_eq!(resolve_env("a:${OTHER:-6379}/", env), "a:6379/");
        assert_eq!(resolve_env("a:${OTHER}", env), "a:${OTHER}");
        assert_eq!(resolve_env("${bad name}x", env), "${bad name}x");
        assert_eq!(resolve_env("${REDIS_PORT", env), "${REDIS_PORT");
        assert_eq!(resolve_env("é${REDIS_PORT}é", env), "é7000é");
    }

    #[test]
    fn iso_durations_read_like_java() {
        assert_eq!(iso_duration("PT1S"), Some(Duration::from_secs(1)));
        assert_eq!(iso_duration("PT0.1S"), Some(Duration::from_millis(100)));
        assert_eq!(iso_duration("PT2M30S"), Some(Duration::from_secs(150)));
        assert_eq!(iso_duration("P1DT1H"), Some(Duration::from_secs(90_000)));
        assert_eq!(iso_duration("PT0S"), Some(Duration::ZERO));
        for bad in ["P", "PT", "PTS", "PT1X", "PT1", "PT-1S", "1S"] {
            assert_eq!(iso_duration(bad), None, "{bad}");
        }
    }

    /// The single, cluster and sentinel examples of Redisson's configuration guide
    /// (`docs/configuration.md`), as a Java service has them.
    #[test]
    fn redissons_documented_examples_parse() {
        let single = parse(include_str!("../../tests/fixtures/redisson/single.yaml")).unwrap();
        assert_eq!(
            single.mode,
            Mode::Single {
                address: "redis://127.0.0.1:6379".into()
            }
        );
        assert_eq!(single.timeout, Some(Duration::from_secs(3)));
        assert_eq!(single.connect_timeout, Some(Duration::from_secs(10)));
        assert_eq!(single.retry_attempts, Some(4));
        assert_eq!(
            single.retry_delay,
            Some((Duration::from_secs(1), Duration::from_secs(2)))
        );
        assert_eq!((single.pool_size, single.min_idle), (Some(64), Some(24)));
        assert_eq!(single.database, Some(0));
        assert_eq!((single.username, single.password), (None, None));

        let cluster = parse(include_str!("../../tests/fixtures/redisson/cluster.yaml")).unwrap();
        assert_eq!(
            cluster.mode,
            Mode::Cluster {
                nodes: vec![
                    "redis://127.0.0.1:7004".into(),
                    "redis://127.0.0.1:7001".into(),
                    "redis://127.0.0.1:7000".into()
                ]
            }
        );
        assert_eq!(cluster.scan_interval, Some(Duration::from_secs(1)));
        assert_eq!((cluster.pool_size, cluster.min_idle), (Some(64), Some(24)));

        let sentinel = parse(include_str!("../../tests/fixtures/redisson/sentinel.yaml")).unwrap();
        assert_eq!(
            sentinel.mode,
            Mode::Sentinel {
                master_name: "mymaster".into(),
                sentinels: vec![
                    "redis://127.0.0.1:26379".into(),
                    "redis://127.0.0.1:26389".into()
                ]
            }
        );
        assert_eq!(sentinel.retry_attempts, Some(4));
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            (
                "singleServerConfig: {}",
                "singleServerConfig.address is missing",
            ),
            (
                "singleServerConfig: {address: 5}",
                "singleServerConfig.address must be a string, not the number 5",
            ),
            (
                "clusterServersConfig: {nodeAddresses: []}",
                "clusterServersConfig.nodeAddresses names no address",
            ),
            (
                "sentinelServersConfig: {masterName: m, sentinelAddresses: [\"redis://a:1\", 7]}",
                "sentinelServersConfig.sentinelAddresses[1] must be a string, not the number 7",
            ),
            (
                "singleServerConfig: {address: \"redis://a:1\", timeout: soon}",
                "singleServerConfig.timeout must be a whole number, not \"soon\"",
            ),
            (
                "singleServerConfig: {address: \"redis://a:1\"}\ncheckLockSyncedSlaves: 3",
                "checkLockSyncedSlaves must be true or false, not the number 3",
            ),
            ("threads: 16", "no singleServerConfig"),
            ("- 1", "the file must be a mapping"),
        ];
        for (text, expected) in cases {
            let err = parse(text).unwrap_err();
            assert!(err.contains(expected), "{text}: {err}");
        }
    }
}
