//! Where a verification worker's lock client and its direct connection go, per topology
//! (single server, Sentinel set, Cluster): the client's `Config`, and [`Direct`], the
//! connection the entry and exit snapshots and the protected writes use.
//!
//! The direct connection must read the lock's state where the lock lives *now*: after a
//! failover that is another node, and during a slot migration the slot answers `ASK`
//! and `TRYAGAIN`. So [`Direct`] finds the current master itself (the sentinels' answer,
//! or the master serving the lock's slot in `CLUSTER NODES`) and, on an error that says
//! the command did not run there (a redirection, `READONLY`, `LOADING`, an aborted
//! `MULTI`) or on a broken connection, finds it again and resends.

use std::time::{Duration, Instant};

use redmutex::Config;

/// The topology a worker's clients connect to.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// One server (or the fault proxy in front of it) at this URL.
    Url(String),
    /// The master the sentinels name under `master`.
    Sentinel {
        sentinels: Vec<String>,
        master: String,
    },
    /// The master serving `slot`, found through these seed nodes.
    Cluster { seeds: Vec<String>, slot: u16 },
}

/// The worker's topology options: `--sentinels` (with `--master-name`) or `--cluster`
/// name the nodes; otherwise the lock client uses `url` and the direct connection
/// `direct`.
pub(crate) fn targets(
    url: &str,
    direct: &str,
    sentinels: Option<&str>,
    master: &str,
    cluster: Option<&str>,
    name: &str,
) -> Result<(Target, Target), String> {
    let list = |s: &str| -> Vec<String> {
        s.split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(str::to_owned)
            .collect()
    };
    match (sentinels, cluster) {
        (Some(_), Some(_)) => Err("--sentinels and --cluster exclude each other".into()),
        (Some(s), None) => {
            let t = Target::Sentinel {
                sentinels: list(s),
                master: master.to_owned(),
            };
            Ok((t.clone(), t))
        }
        (None, Some(c)) => {
            let t = Target::Cluster {
                seeds: list(c),
                slot: redmutex::admin::slots::key_slot(name.as_bytes()),
            };
            Ok((t.clone(), t))
        }
        (None, None) if url.is_empty() || direct.is_empty() => {
            Err("a single server needs --url and --direct".into())
        }
        (None, None) => Ok((Target::Url(url.to_owned()), Target::Url(direct.to_owned()))),
    }
}

/// The lock client's `Config` for `target`, with the worker's timeouts.
pub(crate) fn client_config(target: &Target, lease: Duration) -> Config {
    let b = Config::builder();
    let b = match target {
        Target::Url(u) => b.address(u.as_str()),
        Target::Sentinel { sentinels, master } => b
            .master_name(master.as_str())
            .sentinel_addresses(sentinels.iter().map(String::as_str)),
        Target::Cluster { seeds, .. } => b.cluster_nodes(seeds.iter().map(String::as_str)),
    };
    b.lock_watchdog_timeout(lease)
        .response_timeout(Duration::from_millis(500))
        .connection_timeout(Duration::from_secs(1))
        .retry_delay(Duration::from_millis(20))
        .retry_max_delay(Duration::from_millis(100))
        .build()
}

/// How long [`Direct`] keeps looking for the lock's node before it gives up: longer than
/// a SIGKILLed master's replacement (about 5 s on two cores) plus healing.
const FIND_TIMEOUT: Duration = Duration::from_secs(60);

/// The direct connection of one worker thread (see the module doc).
pub(crate) struct Direct {
    target: Target,
    conn: Option<redis::Connection>,
    /// Sentinel mode: the master's address `conn` goes to. A demoted master keeps
    /// taking writes until it is told to follow the new one, so before each command
    /// the sentinels are asked again and a changed answer moves the connection.
    master: Option<String>,
    /// Sentinel mode: the connection to the sentinel that answered last, kept so that
    /// the question before each command costs one round trip, not a new connection.
    sentinel: Option<redis::Connection>,
}

impl Direct {
    /// A connection to where `target`'s lock lives now.
    pub(crate) fn connect(target: &Target) -> Result<Self, String> {
        let mut d = Self {
            target: target.clone(),
            conn: None,
            master: None,
            sentinel: None,
        };
        let end = Instant::now() + FIND_TIMEOUT;
        loop {
            match d.open() {
                Ok(c) => {
                    d.conn = Some(c);
                    return Ok(d);
                }
                Err(e) if Instant::now() > end => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    fn open(&mut self) -> Result<redis::Connection, String> {
        match &self.target {
            Target::Url(u) => plain(u),
            Target::Sentinel { .. } => {
                let addr = self.named_master()?;
                let mut conn = plain(&format!("redis://{addr}"))?;
                is_master(&mut conn)?;
                self.master = Some(addr);
                Ok(conn)
            }
            Target::Cluster { seeds, slot } => {
                let mut last = "no seed node".to_owned();
                for s in seeds {
                    match slot_master(s, *slot) {
                        Ok(c) => return Ok(c),
                        Err(e) => last = e,
                    }
                }
                Err(last)
            }
        }
    }

    /// Runs `f` on the connection, reconnecting and resending while the failure says
    /// the command did not run on the lock's node, or the connection broke.
    ///
    /// A resend after a broken connection may run a command twice (its first reply was
    /// lost): harmless for what the worker sends here (reads, a `SET` of the same value,
    /// a fenced write that accepts an equal token again, the occupancy counter the
    /// checkers do not read).
    fn retry<T>(
        &mut self,
        mut f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
        failed: impl Fn(&T) -> bool,
    ) -> redis::RedisResult<T> {
        let end = Instant::now() + FIND_TIMEOUT;
        loop {
            if self.conn.is_none() {
                match self.open() {
                    Ok(c) => self.conn = Some(c),
                    Err(e) if Instant::now() > end => {
                        return Err(redis::RedisError::from((
                            redis::ErrorKind::Io,
                            "the lock's node not found",
                            e,
                        )));
                    }
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                }
            }
            if self.master.is_some() && self.named_master().ok() != self.master {
                self.conn = None;
                continue;
            }
            let Some(conn) = self.conn.as_mut() else {
                continue;
            };
            let out = f(conn);
            let again = match &out {
                Ok(v) => failed(v),
                Err(e) => retryable(e),
            };
            if !again || Instant::now() > end {
                return out;
            }
            self.conn = None;
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A failure after which the command surely did not run on the lock's node, or whose
/// connection broke.
fn retryable(e: &redis::RedisError) -> bool {
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.code().is_some_and(retryable_code)
}

fn retryable_code(code: &str) -> bool {
    matches!(
        code,
        "MOVED"
            | "ASK"
            | "TRYAGAIN"
            | "CLUSTERDOWN"
            | "MASTERDOWN"
            | "READONLY"
            | "LOADING"
            | "EXECABORT"
    )
}

fn has_retryable(values: &[redis::Value]) -> bool {
    values
        .iter()
        .any(|v| matches!(v, redis::Value::ServerError(e) if retryable_code(e.code())))
}

impl redis::ConnectionLike for Direct {
    fn req_packed_command(&mut self, cmd: &[u8]) -> redis::RedisResult<redis::Value> {
        self.retry(
            |c| c.req_packed_command(cmd),
            |v| has_retryable(std::slice::from_ref(v)),
        )
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> redis::RedisResult<Vec<redis::Value>> {
        self.retry(
            |c| c.req_packed_commands(cmd, offset, count),
            |v| has_retryable(v),
        )
    }

    fn get_db(&self) -> i64 {
        0
    }

    fn check_connection(&mut self) -> bool {
        self.conn.as_mut().is_some_and(|c| c.check_connection())
    }

    fn is_open(&self) -> bool {
        true
    }
}

fn plain(url: &str) -> Result<redis::Connection, String> {
    let conn = redis::Client::open(url)
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(1)))
        .map_err(|e| format!("{url}: {e}"))?;
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .and_then(|()| conn.set_write_timeout(Some(Duration::from_secs(10))))
        .map_err(|e| format!("{url}: {e}"))?;
    Ok(conn)
}

impl Direct {
    /// `host:port` of the master the sentinels name: the last one that answered, else
    /// the first that answers.
    fn named_master(&mut self) -> Result<String, String> {
        let Target::Sentinel { sentinels, master } = &self.target else {
            return Err("not sentinel mode".into());
        };
        let ask = |s: &mut redis::Connection| {
            redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(master)
                .query::<(String, u16)>(s)
                .map_err(|e| e.to_string())
        };
        if let Some(s) = self.sentinel.as_mut() {
            match ask(s) {
                Ok((host, port)) => return Ok(format!("{host}:{port}")),
                Err(_) => self.sentinel = None,
            }
        }
        let mut last = "no sentinel".to_owned();
        for url in sentinels {
            match plain(url).and_then(|mut s| ask(&mut s).map(|a| (a, s))) {
                Ok(((host, port), s)) => {
                    self.sentinel = Some(s);
                    return Ok(format!("{host}:{port}"));
                }
                Err(e) => last = format!("{url}: {e}"),
            }
        }
        Err(last)
    }
}

fn is_master(conn: &mut redis::Connection) -> Result<(), String> {
    let role: Vec<redis::Value> = redis::cmd("ROLE").query(conn).map_err(|e| e.to_string())?;
    match role.first() {
        Some(redis::Value::BulkString(b)) if b == b"master" => Ok(()),
        Some(redis::Value::SimpleString(s)) if s == "master" => Ok(()),
        other => Err(format!("not a master: {other:?}")),
    }
}

/// A connection to the master that serves `slot` by `seed`'s `CLUSTER NODES`.
fn slot_master(seed: &str, slot: u16) -> Result<redis::Connection, String> {
    let mut s = plain(seed)?;
    let text: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query(&mut s)
        .map_err(|e| format!("{seed}: {e}"))?;
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 9 || !f[2].split(',').any(|fl| fl == "master") || f[2].contains("fail") {
            continue;
        }
        let serves = f[8..].iter().any(|r| {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            matches!((a.parse::<u16>(), b.parse::<u16>()), (Ok(a), Ok(b)) if (a..=b).contains(&slot))
        });
        if serves {
            let addr = f[1].split(['@', ',']).next().unwrap_or_default();
            let mut conn = plain(&format!("redis://{addr}"))?;
            is_master(&mut conn)?;
            return Ok(conn);
        }
    }
    Err(format!("{seed}: no master serves slot {slot}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_topology_options_pick_one_target_for_both_connections() {
        let single = targets("redis://p", "redis://d", None, "m", None, "n");
        assert!(
            matches!(single, Ok((Target::Url(u), Target::Url(d))) if u == "redis://p" && d == "redis://d")
        );
        let sentinel = targets("", "", Some("redis://s1, redis://s2"), "m", None, "n");
        assert!(
            matches!(sentinel, Ok((Target::Sentinel { sentinels, master }, _))
            if sentinels == ["redis://s1", "redis://s2"] && master == "m")
        );
        let name = "verify:c:{lock}";
        let cluster = targets("", "", None, "m", Some("redis://a"), name);
        let slot = redmutex::admin::slots::key_slot(name.as_bytes());
        assert!(matches!(cluster, Ok((Target::Cluster { slot: s, .. }, _)) if s == slot));
        assert!(targets("", "", Some("redis://s"), "m", Some("redis://a"), "n").is_err());
        assert!(targets("redis://p", "", None, "m", None, "n").is_err());
    }

    #[test]
    fn only_failures_that_ran_nothing_or_broke_the_connection_are_resent() {
        for code in [
            "MOVED",
            "ASK",
            "TRYAGAIN",
            "READONLY",
            "LOADING",
            "EXECABORT",
        ] {
            assert!(retryable_code(code), "{code}");
        }
        for code in ["NOSCRIPT", "WRONGTYPE", "ERR", "NOPERM"] {
            assert!(!retryable_code(code), "{code}");
        }
    }
}
