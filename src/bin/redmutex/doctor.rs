//! `redmutex doctor`: checks a server for what locks depend on, each with a plain
//! verdict and what to change.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::json;

use crate::clock;
use crate::connect::{ConnectOpts, Redis};
use crate::fail::{DOCTOR_FAILED, Failure};

/// Check a server for what locks depend on, with verdicts and fixes
///
/// Version and mode, sharded pub/sub and WAIT, eviction and persistence settings that
/// put locks or fencing tokens at risk, the ACL permissions a redmutex and a Redisson
/// client need, and the clock offset against the server (TIME).
#[derive(Debug, clap::Args)]
pub(crate) struct DoctorArgs {
    /// The server to check (else --url or REDMUTEX_URL).
    #[arg(value_name = "URL")]
    target: Option<String>,
    /// A lock name to check key and channel permissions with.
    #[arg(long, default_value = "redmutex:doctor")]
    name: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    connect: ConnectOpts,
}

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Ok,
    Warn,
    Fail,
    Unknown,
}

impl Verdict {
    fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warn => "warn",
            Self::Fail => "FAIL",
            Self::Unknown => "unknown",
        }
    }
}

/// One check's outcome: what was found, and what to change (empty when nothing).
struct Check {
    name: &'static str,
    verdict: Verdict,
    found: String,
    fix: String,
}

fn check(
    name: &'static str,
    verdict: Verdict,
    found: impl Into<String>,
    fix: impl Into<String>,
) -> Check {
    Check {
        name,
        verdict,
        found: found.into(),
        fix: fix.into(),
    }
}

pub(crate) fn run(args: &DoctorArgs) -> Result<(), Failure> {
    let opts = args.connect.with_url(args.target.as_deref())?;
    let mut redis = Redis::open(&opts)?;
    // A cluster is checked node by node: each master has its own settings, ACLs and
    // clock. Keys still go to their owners while one node is in focus.
    let mut reports = Vec::new();
    for index in 0..redis.node_count() {
        redis.focus(Some(index));
        reports.push((redis.shown(), checks_of(&mut redis, &args.name)));
    }
    redis.focus(None);
    let failed: usize = reports
        .iter()
        .map(|(_, checks)| checks.iter().filter(|c| c.verdict == Verdict::Fail).count())
        .sum();
    if args.json {
        let as_json = |checks: &[Check]| -> Vec<serde_json::Value> {
            checks
                .iter()
                .map(|c| {
                    json!({"check": c.name, "verdict": c.verdict.as_str().to_ascii_lowercase(),
                           "found": c.found, "fix": c.fix})
                })
                .collect()
        };
        let out = match reports.as_slice() {
            [(_, checks)] => {
                json!({"server": redis.shown(), "checks": as_json(checks), "failed": failed})
            }
            _ => {
                let nodes: Vec<_> = reports
                    .iter()
                    .map(|(node, checks)| json!({"server": node, "checks": as_json(checks)}))
                    .collect();
                json!({"server": redis.shown(), "nodes": nodes, "failed": failed})
            }
        };
        println!("{out}");
    } else {
        println!("redmutex doctor: {}", redis.shown());
        let several = reports.len() > 1;
        for (node, checks) in &reports {
            if several {
                println!("{node}:");
            }
            for c in checks {
                println!("{:<7} {:<12} {}", c.verdict.as_str(), c.name, c.found);
                if !c.fix.is_empty() {
                    println!("{:<7} {:<12} -> {}", "", "", c.fix);
                }
            }
        }
        println!(
            "{}",
            if failed == 0 {
                "no check failed".to_owned()
            } else {
                format!("{failed} check(s) failed")
            }
        );
    }
    if failed > 0 {
        return Err(Failure {
            code: DOCTOR_FAILED,
            message: String::new(),
        });
    }
    Ok(())
}

/// Every check, on the node `redis` is focused on.
fn checks_of(redis: &mut Redis, name: &str) -> Vec<Check> {
    let server = Server::read(redis);
    vec![
        version(&server),
        sharded(redis, &server),
        wait(redis, &server),
        eviction(redis),
        persistence(redis),
        acl(redis, name),
        clock_offset(redis),
    ]
}

/// What `INFO` says about the server.
struct Server {
    /// The server's own name and version: "Redis 7.0.15", or "Valkey 8.1.8" (whose
    /// `redis_version` is the Redis release it is compatible with).
    product: String,
    version: String,
    major: u32,
    mode: String,
    role: String,
    replicas: u32,
}

impl Server {
    fn read(redis: &mut Redis) -> Self {
        let conn = redis.nodes().remove(0);
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query(conn)
            .unwrap_or_default();
        let replication: String = redis::cmd("INFO")
            .arg("replication")
            .query(conn)
            .unwrap_or_default();
        let field = |text: &str, key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
                .map(|v| v.trim().to_owned())
        };
        let version = field(&info, "redis_version").unwrap_or_default();
        let product = match field(&info, "valkey_version") {
            Some(valkey) => format!("Valkey {valkey} (Redis {version} compatible)"),
            None if version.is_empty() => "Redis ?".to_owned(),
            None => format!("Redis {version}"),
        };
        Self {
            product,
            major: version
                .split('.')
                .next()
                .and_then(|m| m.parse().ok())
                .unwrap_or(0),
            // Valkey 8 names the field `server_mode`.
            mode: field(&info, "redis_mode")
                .or_else(|| field(&info, "server_mode"))
                .unwrap_or_else(|| "unknown".into()),
            role: field(&replication, "role").unwrap_or_else(|| "unknown".into()),
            replicas: field(&replication, "connected_slaves")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0),
            version,
        }
    }
}

fn version(server: &Server) -> Check {
    let found = format!(
        "{} in {} mode, role {}, {} replica(s)",
        server.product, server.mode, server.role, server.replicas
    );
    if server.version.is_empty() {
        return check(
            "server",
            Verdict::Unknown,
            "INFO was refused",
            "allow INFO (+info) to read it",
        );
    }
    if server.role == "slave" {
        return check(
            "server",
            Verdict::Fail,
            found,
            "this is a replica: locks are taken on the master; point the URL at it",
        );
    }
    if server.major < 6 {
        return check(
            "server",
            Verdict::Warn,
            found,
            "Redis before 6.0 has no ACLs and no CLIENT ID; upgrade to 7.x",
        );
    }
    check("server", Verdict::Ok, found, "")
}

fn sharded(redis: &mut Redis, server: &Server) -> Check {
    let works = redis::cmd("PUBSUB")
        .arg("SHARDNUMSUB")
        .query::<redis::Value>(redis.nodes().remove(0))
        .is_ok();
    match (works, server.mode.as_str()) {
        (true, "cluster") => check(
            "sharded",
            Verdict::Ok,
            "sharded pub/sub works: Redisson 3.22+ publishes unlocks with SPUBLISH here",
            "",
        ),
        (true, _) => check(
            "sharded",
            Verdict::Ok,
            "sharded pub/sub works (Redisson uses plain PUBLISH outside a cluster)",
            "",
        ),
        (false, "cluster") => check(
            "sharded",
            Verdict::Warn,
            "no sharded pub/sub (Redis < 7.0): every unlock message crosses the whole cluster",
            "upgrade to Redis 7 to keep unlock messages on their shard",
        ),
        (false, _) => check(
            "sharded",
            Verdict::Ok,
            "no sharded pub/sub (Redis < 7.0); not needed outside a cluster",
            "",
        ),
    }
}

fn wait(redis: &mut Redis, server: &Server) -> Check {
    match redis::cmd("WAIT")
        .arg(0)
        .arg(0)
        .query::<i64>(redis.nodes().remove(0))
    {
        Ok(_) if server.replicas == 0 => check(
            "wait",
            Verdict::Ok,
            "WAIT works (no replicas now: a lock lives on this server only)",
            "",
        ),
        Ok(_) => check(
            "wait",
            Verdict::Ok,
            format!(
                "WAIT works: lock writes can be confirmed by the {} replica(s) before a failover",
                server.replicas
            ),
            "",
        ),
        Err(e) if server.replicas == 0 && server.mode == "standalone" => check(
            "wait",
            Verdict::Warn,
            format!(
                "WAIT is refused ({}); a single server does not need it",
                e.code().unwrap_or("error")
            ),
            "with replicas, Redisson's checkLockSyncedSlaves sends WAIT: allow it (+wait)",
        ),
        Err(e) => check(
            "wait",
            Verdict::Fail,
            format!("WAIT is refused ({e}) but there are replicas"),
            "Redisson (checkLockSyncedSlaves, on by default) fails every lock without WAIT: \
             allow +wait, or set checkLockSyncedSlaves false and accept losing locks on failover",
        ),
    }
}

/// `CONFIG GET parameter`, or `None` when CONFIG is refused.
fn config(redis: &mut Redis, parameter: &str) -> Option<String> {
    let pair: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(parameter)
        .query(redis.nodes().remove(0))
        .ok()?;
    pair.into_iter().nth(1)
}

fn eviction(redis: &mut Redis) -> Check {
    let (Some(policy), Some(maxmemory)) = (
        config(redis, "maxmemory-policy"),
        config(redis, "maxmemory"),
    ) else {
        return check(
            "eviction",
            Verdict::Unknown,
            "CONFIG GET is refused (a managed service?)",
            "check maxmemory-policy in the service's settings: noeviction keeps locks safe",
        );
    };
    let limited = maxmemory.trim() != "0";
    let found = format!(
        "maxmemory-policy {policy}, maxmemory {}",
        if limited {
            maxmemory.as_str()
        } else {
            "0 (no limit)"
        }
    );
    if policy.starts_with("allkeys-") {
        let verdict = if limited {
            Verdict::Fail
        } else {
            Verdict::Warn
        };
        return check(
            "eviction",
            verdict,
            format!(
                "{found}: under memory pressure Redis evicts held locks and fencing-token counters"
            ),
            "CONFIG SET maxmemory-policy noeviction (or keep locks on a server of their own)",
        );
    }
    if policy.starts_with("volatile-") && limited {
        return check(
            "eviction",
            Verdict::Warn,
            format!("{found}: evicts keys with a TTL, and every held lock has one"),
            "CONFIG SET maxmemory-policy noeviction, or keep enough memory headroom",
        );
    }
    check("eviction", Verdict::Ok, found, "")
}

fn persistence(redis: &mut Redis) -> Check {
    let (Some(aof), Some(save)) = (config(redis, "appendonly"), config(redis, "save")) else {
        return check(
            "persistence",
            Verdict::Unknown,
            "CONFIG GET is refused",
            "check persistence in the service's settings",
        );
    };
    let fsync = config(redis, "appendfsync").unwrap_or_default();
    let rdb = !save.trim().is_empty();
    if aof == "yes" && fsync == "always" {
        return check(
            "persistence",
            Verdict::Ok,
            "AOF with appendfsync always",
            "",
        );
    }
    if aof == "yes" {
        return check(
            "persistence",
            Verdict::Ok,
            format!("AOF with appendfsync {fsync}: a crash loses about the last second"),
            "for RedLock or fencing tokens that must never go back, use appendfsync always",
        );
    }
    if rdb {
        return check(
            "persistence",
            Verdict::Warn,
            format!(
                "RDB snapshots only (save \"{save}\"): a crash loses the writes since the last one"
            ),
            "fencing tokens can go back and released-then-retaken locks reappear: \
             CONFIG SET appendonly yes",
        );
    }
    check(
        "persistence",
        Verdict::Warn,
        "no persistence: a restart forgets every lock (a second holder can enter) and resets \
         fencing tokens to 0",
        "CONFIG SET appendonly yes; with RedLock, either persist every node (appendfsync \
         always) or keep a restarted node down for the longest lease",
    )
}

/// Commands every redmutex client sends itself, or runs inside its scripts.
const REDMUTEX_COMMANDS: &[&str] = &[
    "ping",
    "evalsha",
    "eval",
    "script|load",
    "publish",
    "subscribe",
    "unsubscribe",
    "get",
    "set",
    "del",
    "exists",
    "pttl",
    "pexpire",
    "hexists",
    "hget",
    "hset",
    "hdel",
    "hincrby",
    "hlen",
    "hkeys",
    "incrby",
    "decr",
    "decrby",
    "lindex",
    "lpop",
    "rpush",
    "lrange",
    "lrem",
    "zadd",
    "zrem",
    "zscore",
    "zrange",
    "zincrby",
    "zrangebyscore",
    "zremrangebyscore",
    "zcount",
    "zcard",
];

/// What a Redisson client sends beyond that (replica checks, start-up probes, sharded
/// pub/sub in a cluster, client names).
const REDISSON_EXTRA: &[&str] = &[
    "info",
    "wait",
    "client|setname",
    "pubsub|numpat",
    "pubsub|shardnumsub",
    "ssubscribe",
    "sunsubscribe",
    "spublish",
];

fn acl(redis: &mut Redis, name: &str) -> Check {
    let channel = crate::names::lock_channel(name);
    let url_user = redis.user();
    let conn = redis.nodes().remove(0);
    // Without ACL WHOAMI (no ACL commands at all) the user is the URL's.
    let whoami: Option<String> = redis::cmd("ACL").arg("WHOAMI").query(conn).ok();
    let user = whoami.clone().unwrap_or(url_user);
    let mut missing: Vec<&str> = Vec::new();
    let mut missing_redisson: Vec<&str> = Vec::new();
    let no_dry_run = whoami.is_none();
    let mut unknown = no_dry_run;
    for (list, out) in [
        (REDMUTEX_COMMANDS, &mut missing),
        (REDISSON_EXTRA, &mut missing_redisson),
    ] {
        for command in list.iter().filter(|_| !no_dry_run) {
            match dry_run(conn, &user, command, name, &channel) {
                Some(true) => {}
                Some(false) => out.push(*command),
                None => unknown = true,
            }
        }
    }
    if unknown {
        // No ACL DRYRUN for this user: try the commands themselves, harmlessly.
        missing = probe(redis, name, &channel, REDMUTEX_COMMANDS);
        missing_redisson = probe(redis, name, &channel, REDISSON_EXTRA);
    }
    let grant = |cmds: &[&str]| {
        let plus: Vec<String> = cmds.iter().map(|c| format!("+{c}")).collect();
        format!("ACL SETUSER {user} {}", plus.join(" "))
    };
    if !missing.is_empty() {
        let mut all = missing.clone();
        all.extend(&missing_redisson);
        return check(
            "acl",
            Verdict::Fail,
            format!(
                "user `{user}` may not run, on key or channel `{name}`: {}",
                missing.join(" ")
            ),
            grant(&all),
        );
    }
    if !missing_redisson.is_empty() {
        return check(
            "acl",
            Verdict::Warn,
            format!(
                "user `{user}` has what redmutex needs; a Redisson client also needs: {}",
                missing_redisson.join(" ")
            ),
            grant(&missing_redisson),
        );
    }
    check(
        "acl",
        Verdict::Ok,
        format!("user `{user}` may run every command a redmutex or Redisson client sends"),
        "",
    )
}

/// Whether `user` may run `command` on `name` (`ACL DRYRUN`, Redis 7.0+); `None` when
/// the dry run itself is refused.
fn dry_run(
    conn: &mut redis::Connection,
    user: &str,
    command: &str,
    name: &str,
    channel: &str,
) -> Option<bool> {
    let mut cmd = redis::cmd("ACL");
    cmd.arg("DRYRUN").arg(user);
    let (main, sub) = command
        .split_once('|')
        .map_or((command, None), |(m, s)| (m, Some(s)));
    cmd.arg(main);
    if let Some(sub) = sub {
        cmd.arg(sub);
    }
    // Arguments of the right arity; `K` stands for the lock name, `C` for its channel.
    let args: &[&str] = match command {
        "ping" | "info" | "pubsub|numpat" => &[],
        "wait" => &["0", "0"],
        "evalsha" => &["0000000000000000000000000000000000000000", "1", "K"],
        "eval" => &["return 1", "1", "K"],
        "script|load" => &["return 1"],
        "client|setname" => &["x"],
        "publish" | "spublish" => &["C", "0"],
        "subscribe" | "unsubscribe" | "ssubscribe" | "sunsubscribe" | "pubsub|shardnumsub" => {
            &["C"]
        }
        "set" | "pexpire" | "incrby" | "decrby" | "zscore" | "zrem" | "hexists" | "hget"
        | "hdel" | "lindex" | "rpush" => &["K", "1"],
        "hset" | "hincrby" | "zadd" | "zincrby" | "lrange" | "zrange" | "zrangebyscore"
        | "zremrangebyscore" | "zcount" | "lrem" => &["K", "1", "1"],
        _ => &["K"],
    };
    for arg in args {
        cmd.arg(match *arg {
            "K" => name,
            "C" => channel,
            other => other,
        });
    }
    match cmd.query::<String>(conn) {
        Ok(reply) => Some(reply == "OK"),
        // An answer that is not OK names the refusal; the command itself is fine.
        Err(e) if e.code() == Some("NOPERM") => None,
        // No ACL DRYRUN at all (Redis 6.2 says "Unknown subcommand"), or an unknown
        // command: the probe decides.
        Err(e) if e.to_string().to_ascii_lowercase().contains("unknown") => None,
        Err(_) => Some(false),
    }
}

/// The scratch-key probe of every data command a lock script runs.
static PROBE: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(include_str!("../../../lua/cli/doctor_probe.lua"))
});

/// Which of `commands` the user may not run, found by running each in a harmless form
/// (for users that may not run ACL DRYRUN): data commands inside one scratch-key script,
/// the rest on their own.
fn probe<'a>(redis: &mut Redis, name: &str, channel: &str, commands: &[&'a str]) -> Vec<&'a str> {
    let mut refused: Vec<String> = Vec::new();
    let eval_allowed = run_allowed(redis, redis::cmd("EVAL").arg("return 1").arg(1).arg(name));
    if eval_allowed && commands.contains(&"eval") {
        let mut call = PROBE.prepare_invoke();
        for t in ["h", "s", "l", "z"] {
            call.key(format!("{{{name}}}:doctor-probe:{t}"));
        }
        refused.extend(
            call.invoke::<Vec<String>>(redis.on_key(name))
                .unwrap_or_default(),
        );
    }
    for command in commands {
        let allowed = match *command {
            "evalsha" => run_allowed(
                redis,
                redis::cmd("EVALSHA")
                    .arg("0000000000000000000000000000000000000000")
                    .arg(1)
                    .arg(name),
            ),
            "eval" => eval_allowed,
            "script|load" => run_allowed(redis, redis::cmd("SCRIPT").arg("LOAD").arg("return 1")),
            "ping" => run_allowed(redis, &redis::cmd("PING")),
            "info" => run_allowed(redis, redis::cmd("INFO").arg("server")),
            "wait" => run_allowed(redis, redis::cmd("WAIT").arg(0).arg(0)),
            "client|setname" => run_allowed(
                redis,
                redis::cmd("CLIENT")
                    .arg("SETNAME")
                    .arg(crate::connect::TOOL_CONNECTION_NAME),
            ),
            "pubsub|numpat" => run_allowed(redis, redis::cmd("PUBSUB").arg("NUMPAT")),
            "pubsub|shardnumsub" => {
                run_allowed(redis, redis::cmd("PUBSUB").arg("SHARDNUMSUB").arg(channel))
            }
            // A message nobody hears: the channel of the probe name, payload "0".
            "publish" => run_allowed(redis, redis::cmd("PUBLISH").arg(channel).arg("0")),
            "spublish" => run_allowed(redis, redis::cmd("SPUBLISH").arg(channel).arg("0")),
            "subscribe" | "unsubscribe" => subscribe_allowed(redis, "SUBSCRIBE", channel),
            "ssubscribe" | "sunsubscribe" => subscribe_allowed(redis, "SSUBSCRIBE", channel),
            // A data command: allowed when the probe script ran and did not name it.
            _ => eval_allowed,
        };
        if !allowed && !refused.iter().any(|r| r == command) {
            refused.push((*command).to_owned());
        }
    }
    commands
        .iter()
        .filter(|c| refused.iter().any(|r| r == *c))
        .copied()
        .collect()
}

/// Whether the server runs `cmd` for this user: any answer but an ACL refusal counts.
fn run_allowed(redis: &mut Redis, cmd: &redis::Cmd) -> bool {
    match cmd.query::<redis::Value>(redis.nodes().remove(0)) {
        Ok(_) => true,
        Err(e) => e.code() != Some("NOPERM"),
    }
}

/// Whether a fresh connection may subscribe to `channel` with `command`.
fn subscribe_allowed(redis: &mut Redis, command: &str, channel: &str) -> bool {
    let Ok(mut conn) = redis.subscriber(channel) else {
        return false;
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(3)));
    let packed = redis::cmd(command).arg(channel).get_packed_command();
    if conn.send_packed_command(&packed).is_err() {
        return false;
    }
    match conn.recv_response() {
        Ok(_) => true,
        Err(e) => e.code() != Some("NOPERM"),
    }
}

fn clock_offset(redis: &mut Redis) -> Check {
    let conn = redis.nodes().remove(0);
    let mut best: Option<(Duration, i64)> = None;
    for _ in 0..5 {
        let local_before = epoch_us();
        let started = Instant::now();
        let Ok((secs, micros)) = redis::cmd("TIME").query::<(i64, i64)>(conn) else {
            return check("clock", Verdict::Unknown, "TIME refused", "");
        };
        let rtt = started.elapsed();
        let server = secs * 1_000_000 + micros;
        let local_mid = local_before + rtt.as_micros() as i64 / 2;
        if best.is_none_or(|(r, _)| rtt < r) {
            best = Some((rtt, server - local_mid));
        }
    }
    let Some((rtt, offset_us)) = best else {
        return check("clock", Verdict::Unknown, "no TIME answer", "");
    };
    let offset_ms = offset_us / 1000;
    let found = format!(
        "server clock {} ours by {} (± {} round trip)",
        if offset_us >= 0 { "ahead of" } else { "behind" },
        clock::span(offset_ms.abs()),
        clock::span((rtt.as_micros() / 2000) as i64)
    );
    let fix = "fair-lock slots and permit leases compare the clients' wall clocks: run NTP on \
               every client and on the server";
    match offset_ms.abs() {
        0..=100 => check("clock", Verdict::Ok, found, ""),
        101..=1000 => check("clock", Verdict::Warn, found, fix),
        _ => check("clock", Verdict::Fail, found, fix),
    }
}

fn epoch_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}
