//! `redmutex verify`: the fault-free part of the verification harness (docs/verify.md)
//! against the operator's own deployment.
//!
//! For each lock kind in turn, N Rust worker threads (the `verify-worker` code, run in
//! this process) and, when asked and possible, the Redisson history worker contend on one
//! fresh name, recording every operation; the harness's checkers then judge the recorded
//! history as they judge the harness's own runs. Every name is `{<prefix>:<kind>}`: the
//! braces are a hash tag, so on a cluster each kind's keys share one slot, and every key
//! the run writes contains `{<prefix>:`. The run refuses a prefix that already has keys,
//! so that deleting what matches afterwards deletes only what it wrote.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::{Value, json};

use crate::connect::{ConnectOpts, Redis};
use crate::fail::{DOCTOR_FAILED, Failure};
use crate::{verify_check, verify_worker};

/// The kinds `--kinds` takes, in the order they run.
const KINDS: [&str; 5] = ["lock", "fair", "rw", "fenced", "semaphore"];

/// Check that locks exclude, hand off and wake up on this deployment
///
/// Runs worker threads on each lock kind in turn (each on a fresh name under --prefix),
/// records every operation, and checks the history as `scripts/verify.sh` does, but
/// injects no fault. Deletes every key it wrote. A login or TLS works with --url only.
/// Exit 0: no violation; 3: at least one. See docs/verify.md, "For operators".
#[derive(Debug, clap::Args)]
pub(crate) struct VerifyArgs {
    /// The kinds to run, comma-separated: lock (RLock), fair (RFairLock), rw
    /// (RReadWriteLock), fenced (RFencedLock), semaphore (RSemaphore).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "lock,fair,rw,fenced,semaphore"
    )]
    kinds: Vec<String>,
    /// The lock kinds' mode: watchdog (renewed holds), lease (explicit leases; one section
    /// in ten runs past its lease, a reported overstay) or handoff (blocking acquires,
    /// longer sections, rests between them). A semaphore's permits have no lease.
    #[arg(long, default_value = "watchdog")]
    mode: String,
    /// Rust worker threads per kind, each with its own client.
    #[arg(long, default_value_t = 4)]
    threads: u64,
    /// Seconds per kind.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// The lease, or the watchdog timeout, in milliseconds.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    lease_ms: u64,
    /// The names' prefix; no key containing `{PREFIX:` may exist yet [default:
    /// redmutex-verify:<random>].
    #[arg(long)]
    prefix: Option<String>,
    /// Where the history and report.json / report.md go [default: a new directory in
    /// the system's temporary directory].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Redisson history workers beside the Rust ones on the lock kind (one server only):
    /// comma-separated VERSION=CLASSPATH pairs, a classpath or a classpath.txt written by
    /// tests/interop/build.sh; skipped, with a line saying why, when no Java runs here.
    #[arg(long, value_name = "VERSION=CLASSPATH,...")]
    java: Option<String>,
    /// The seed of the workers' random choices (printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    connect: ConnectOpts,
}

/// `verify-worker`'s options, parsed from the list this command builds, so that the
/// worker runs in this process with its own argument checks and no child's command
/// line shows a password.
#[derive(Debug, Parser)]
#[command(no_binary_name = true)]
struct WorkerCli {
    #[command(flatten)]
    args: verify_worker::VerifyWorkerArgs,
}

/// Where the workers connect, as `verify-worker` options.
struct Topology {
    /// `single`, `sentinel` or `cluster` (the cells' first word).
    label: &'static str,
    args: Vec<String>,
    /// One server's URL (the Java worker's), with its login.
    url: Option<String>,
    has_login: bool,
}

pub(crate) fn run(args: &VerifyArgs) -> Result<(), Failure> {
    for (i, kind) in args.kinds.iter().enumerate() {
        if args.kinds[..i].contains(kind) {
            return Err(Failure::usage(format!("--kinds: {kind} named twice")));
        }
        if !KINDS.contains(&kind.as_str()) {
            return Err(Failure::usage(format!(
                "--kinds: unknown kind {kind:?} (lock, fair, rw, fenced, semaphore)"
            )));
        }
    }
    if !matches!(args.mode.as_str(), "watchdog" | "lease" | "handoff") {
        return Err(Failure::usage(format!(
            "--mode: unknown mode {:?} (watchdog, lease, handoff)",
            args.mode
        )));
    }
    if args.seconds == 0 || args.threads == 0 || args.lease_ms < 100 {
        return Err(Failure::usage(
            "--seconds and --threads must be at least 1, --lease-ms at least 100",
        ));
    }
    let prefix = match &args.prefix {
        Some(p) if p.is_empty() || p.contains(['{', '}']) => {
            return Err(Failure::usage(
                "--prefix must be non-empty and without braces (the names add their own hash tag)",
            ));
        }
        Some(p) => p.clone(),
        None => format!("redmutex-verify:{:08x}", random() as u32),
    };
    let seed = args.seed.unwrap_or_else(random);
    let topology = topology(&args.connect)?;
    let mut redis = Redis::open(&args.connect)?;
    let pattern = format!("*{{{}:*", glob_escape(&prefix));
    let before = keys(&mut redis, &pattern)?;
    if !before.is_empty() {
        return Err(Failure::usage(format!(
            "{} keys matching {pattern:?} exist already (e.g. {:?}): choose another --prefix",
            before.len(),
            before[0]
        )));
    }
    let out = match &args.out {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("redmutex-verify-{:08x}", random() as u32)),
    };
    let history = out.join("history");
    // The checkers read every file there: another run's would be judged with this one.
    if std::fs::read_dir(&history).is_ok_and(|mut d| d.next().is_some()) {
        return Err(Failure::usage(format!(
            "{} holds another run's history: choose a new --out directory",
            history.display()
        )));
    }
    std::fs::create_dir_all(&history)
        .map_err(|e| Failure::runtime(format!("{}: {e}", history.display())))?;
    let java = java_plan(args, &topology);

    let mut removed = 0;
    let mut failed: Option<Failure> = None;
    for (i, kind) in args.kinds.iter().enumerate() {
        let mode = if kind == "semaphore" {
            "plain"
        } else {
            args.mode.as_str()
        };
        let run = KindRun {
            kind,
            mode,
            name: format!("{{{prefix}:{kind}}}"),
            cell: format!("{}-none-{kind}-{mode}", topology.label),
            seed: seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        };
        let outcome = run_kind(args, &topology, &java, &history, &run);
        // Clean up even after a failure: the keys are the operator's to keep tidy.
        removed += delete(&mut redis, &pattern)?;
        if let Err(e) = outcome {
            failed = Some(e);
            break;
        }
    }
    let left = keys(&mut redis, &pattern)?;
    if let Some(failure) = failed {
        return Err(failure);
    }
    let ops = verify_check::read_history(&history).map_err(Failure::runtime)?;
    let (report, violations) = verify_check::report(&ops);
    let kinds: Vec<Value> = args
        .kinds
        .iter()
        .map(|kind| {
            let mode = if kind == "semaphore" {
                "plain"
            } else {
                args.mode.as_str()
            };
            let cell = format!("{}-none-{kind}-{mode}", topology.label);
            kind_figures(&report, &ops, kind, mode, &cell)
        })
        .collect();
    let not_tested = not_tested(&mut redis, &topology, &java);
    let summary = json!({
        "target": redis.shown(),
        "user": redis.user(),
        "topology": topology.label,
        "prefix": prefix,
        "seed": seed,
        "threads": args.threads,
        "seconds": args.seconds,
        "lease_ms": args.lease_ms,
        "java": java.note,
        "kinds": kinds,
        "keys": {"pattern": pattern, "removed": removed, "left": left.len()},
        "not_tested": not_tested,
        "violations": violations,
        "out": out.display().to_string(),
    });
    let write = |file: &str, text: String| {
        std::fs::write(out.join(file), text)
            .map_err(|e| Failure::runtime(format!("{}: {e}", out.join(file).display())))
    };
    write("report.json", format!("{report:#}\n"))?;
    write("summary.json", format!("{summary:#}\n"))?;
    write("report.md", verify_check::markdown(&report))?;
    if args.json {
        println!("{summary:#}");
    } else {
        print!("{}", human(&summary));
    }
    if !left.is_empty() {
        return Err(Failure::runtime(format!(
            "{} keys matching {pattern:?} are left after the cleanup (e.g. {:?})",
            left.len(),
            left[0]
        )));
    }
    if violations > 0 {
        return Err(Failure {
            code: DOCTOR_FAILED,
            message: format!("{violations} violations; see {}/report.md", out.display()),
        });
    }
    Ok(())
}

/// A random number from the clock and the pid: enough to keep two runs' names apart.
fn random() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut rng = verify_worker::Rng((nanos ^ u64::from(std::process::id()) << 32) | 1);
    rng.below(u64::MAX)
}

/// `text` with glob characters escaped, for `SCAN MATCH`.
fn glob_escape(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The keys matching `pattern` on every master.
fn keys(redis: &mut Redis, pattern: &str) -> Result<Vec<String>, Failure> {
    crate::inspect::scan_keys(redis, pattern, "scanning the run's keys")
}

/// Deletes the keys matching `pattern`; how many went.
fn delete(redis: &mut Redis, pattern: &str) -> Result<usize, Failure> {
    let found = keys(redis, pattern)?;
    let mut removed = 0;
    for key in &found {
        // One key per command: on a cluster each goes to its own slot's master.
        let n: usize = redis::cmd("DEL")
            .arg(key)
            .query(redis.on_key(key))
            .map_err(|e| Failure::redis_on(&format!("deleting `{key}`"), e))?;
        removed += n;
    }
    Ok(removed)
}

/// The workers' topology from the connection options. The workers' direct connections
/// dial the nodes a cluster or the sentinels announce with plain `redis://` and no
/// login, so a login or TLS works on one server only.
fn topology(opts: &ConnectOpts) -> Result<Topology, Failure> {
    let unsupported = |what: &str| {
        Failure::usage(format!(
            "verify runs its workers with a login or TLS on one server only (--url), not on \
             {what}: its snapshot connections dial the announced nodes without them"
        ))
    };
    let password = opts
        .password
        .clone()
        .or_else(|| std::env::var("REDMUTEX_PASSWORD").ok());
    let as_url = |a: &str| {
        let a = a.trim();
        if a.contains("://") {
            a.to_owned()
        } else {
            format!("redis://{a}")
        }
    };
    let has_login = |u: &str| u.starts_with("rediss://") || u.contains('@');
    let (cluster, sentinels, master, url) = if opts.redisson_yaml.is_some() {
        let config = opts.config_tuned(|b| b)?;
        if config.has_password() || config.username().is_some() {
            // The library keeps the password write-only, so the workers cannot get it.
            return Err(Failure::usage(
                "verify cannot hand the login of a Redisson YAML file to its workers: use \
                 --url with --user and --password (or REDMUTEX_PASSWORD) on one server",
            ));
        }
        if config.is_cluster() {
            (config.node_addresses().to_vec(), Vec::new(), None, None)
        } else if config.is_sentinel() {
            (
                Vec::new(),
                config.sentinel_addresses().to_vec(),
                config.master_name().map(str::to_owned),
                None,
            )
        } else {
            (
                Vec::new(),
                Vec::new(),
                None,
                Some(config.address().to_owned()),
            )
        }
    } else if !opts.cluster.is_empty() {
        (
            opts.cluster.iter().map(|a| as_url(a)).collect(),
            Vec::new(),
            None,
            None,
        )
    } else if !opts.sentinel.is_empty() {
        (
            Vec::new(),
            opts.sentinel.iter().map(|a| as_url(a)).collect(),
            opts.master.clone(),
            None,
        )
    } else {
        let url = opts
            .url
            .clone()
            .or_else(|| std::env::var("REDMUTEX_URL").ok())
            .unwrap_or_else(|| "redis://127.0.0.1:6379/".to_owned());
        (Vec::new(), Vec::new(), None, Some(url))
    };
    if let Some(url) = url {
        let url = with_login(&url, opts.user.as_deref(), password.as_deref());
        return Ok(Topology {
            label: "single",
            args: vec!["--url".into(), url.clone(), "--direct".into(), url.clone()],
            has_login: has_login(&url),
            url: Some(url),
        });
    }
    if opts.user.is_some() || password.is_some() {
        return Err(unsupported(
            "a cluster or a sentinel set with --user or --password",
        ));
    }
    if !cluster.is_empty() {
        if cluster.iter().any(|u| has_login(u)) {
            return Err(unsupported(
                "a cluster with credentials or rediss:// in its seeds",
            ));
        }
        return Ok(Topology {
            label: "cluster",
            args: vec!["--cluster".into(), cluster.join(",")],
            url: None,
            has_login: false,
        });
    }
    if sentinels.iter().any(|u| u.starts_with("rediss://")) {
        return Err(unsupported("sentinels over rediss://"));
    }
    Ok(Topology {
        label: "sentinel",
        args: vec![
            "--sentinels".into(),
            sentinels.join(","),
            "--master-name".into(),
            master.unwrap_or_default(),
        ],
        url: None,
        has_login: false,
    })
}

/// `url` with `user` and `password` as its login (percent-encoded), when given.
fn with_login(url: &str, user: Option<&str>, password: Option<&str>) -> String {
    if user.is_none() && password.is_none() {
        return url.to_owned();
    }
    let (scheme, rest) = url.split_once("://").unwrap_or(("redis", url));
    let (old, host) = match rest.split_once('/') {
        Some((authority, _)) => match authority.rsplit_once('@') {
            Some((info, _)) => (Some(info), &rest[info.len() + 1..]),
            None => (None, rest),
        },
        None => match rest.rsplit_once('@') {
            Some((info, host)) => (Some(info), host),
            None => (None, rest),
        },
    };
    let (old_user, old_password) = old.map_or(("", None), |info| match info.split_once(':') {
        Some((u, p)) => (u, Some(p.to_owned())),
        None => (info, None),
    });
    let encode = |s: &str| {
        s.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect::<String>()
    };
    let user = user.map_or(old_user.to_owned(), encode);
    let password = password.map(encode).or(old_password);
    match password {
        Some(p) => format!("{scheme}://{user}:{p}@{host}"),
        None => format!("{scheme}://{user}@{host}"),
    }
}

/// Which Java workers run, and the line that says so.
struct JavaPlan {
    peers: Vec<(String, String)>,
    note: String,
}

fn java_plan(args: &VerifyArgs, topology: &Topology) -> JavaPlan {
    let none = |note: &str| JavaPlan {
        peers: Vec::new(),
        note: note.to_owned(),
    };
    let Some(spec) = args.java.as_deref().filter(|s| !s.is_empty()) else {
        return none("not run: no --java VERSION=CLASSPATH given");
    };
    if !args.kinds.iter().any(|k| k == "lock") {
        return none("not run: the Redisson history worker runs the lock kind only");
    }
    if topology.url.is_none() {
        return none("not run: the Redisson history worker connects to one server only");
    }
    if topology.has_login {
        return none(
            "not run: the Redisson history worker takes its URL on its command line, \
             which would show the login to other users",
        );
    }
    if args.mode == "handoff" {
        return none("not run: the Redisson history worker has no handoff mode");
    }
    let runs = Command::new("java")
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !runs {
        return none("skipped: no Java runtime answers `java -version` here");
    }
    let mut peers = Vec::new();
    for pair in spec.split(',') {
        let Some((version, cp)) = pair.split_once('=') else {
            return none(&format!(
                "skipped: --java wants VERSION=CLASSPATH, got {pair:?}"
            ));
        };
        let cp = if cp.ends_with(".txt") {
            match std::fs::read_to_string(cp) {
                Ok(text) => text.trim().to_owned(),
                Err(e) => return none(&format!("skipped: {cp}: {e}")),
            }
        } else {
            cp.to_owned()
        };
        peers.push((version.to_owned(), cp));
    }
    let versions: Vec<&str> = peers.iter().map(|(v, _)| v.as_str()).collect();
    JavaPlan {
        note: format!("run on the lock kind: Redisson {}", versions.join(", ")),
        peers,
    }
}

/// One kind's run: its lock name, its cell in the history, its workers' seed.
struct KindRun<'a> {
    kind: &'a str,
    mode: &'a str,
    name: String,
    cell: String,
    seed: u64,
}

/// One kind's run: the Java workers (lock kind), then the Rust worker threads in this
/// process, until both are done.
fn run_kind(
    args: &VerifyArgs,
    topology: &Topology,
    java: &JavaPlan,
    history: &Path,
    run: &KindRun<'_>,
) -> Result<(), Failure> {
    let KindRun {
        kind,
        mode,
        ref name,
        ref cell,
        seed,
    } = *run;
    let (name, cell) = (name.as_str(), cell.as_str());
    let mut children: Vec<Child> = Vec::new();
    let result = (|| {
        if kind == "lock" {
            for (i, (version, cp)) in java.peers.iter().enumerate() {
                let label = format!("java{}", version.replace('.', "_"));
                let url = topology.url.as_deref().unwrap_or_default();
                let logs = history.parent().unwrap_or(history).join("logs");
                std::fs::create_dir_all(&logs)?;
                let log = std::fs::File::create(logs.join(format!("{cell}.{label}.stderr")))?;
                let child = Command::new("java")
                    .arg("-cp")
                    .arg(cp)
                    .arg("dev.redmutex.interop.History")
                    // The lock kind only: the fenced kind's resource script
                    // (`-Dverify.lua`) lives in the source tree, not beside the tool.
                    .args([url, url, name, "lock", mode])
                    .arg(args.threads.to_string())
                    // Longer than the Rust run, which starts once the JVMs are up.
                    .arg((args.seconds * 1000 + 2000).to_string())
                    .arg(args.lease_ms.to_string())
                    .arg(history)
                    .args([cell, &label])
                    .arg((seed ^ (100 + i as u64)).to_string())
                    .stdout(Stdio::null())
                    .stderr(log)
                    .spawn()
                    .map_err(|e| Failure::runtime(format!("cannot start java: {e}")))?;
                children.push(child);
                wait_for_owners(history, cell, &label, children.last_mut())?;
            }
        }
        let mut list: Vec<String> = topology.args.clone();
        for (flag, value) in [
            ("--name", name.to_owned()),
            ("--kind", kind.to_owned()),
            ("--mode", mode.to_owned()),
            ("--threads", args.threads.to_string()),
            ("--millis", (args.seconds * 1000).to_string()),
            ("--lease-ms", args.lease_ms.to_string()),
            ("--history", history.display().to_string()),
            ("--cell", cell.to_owned()),
            ("--process", "p0".to_owned()),
            ("--seed", seed.to_string()),
        ] {
            list.push(flag.to_owned());
            list.push(value);
        }
        let worker = WorkerCli::try_parse_from(&list)
            .map_err(|e| Failure::usage(format!("verify-worker options: {e}")))?;
        verify_worker::run(&worker.args)
            .map_err(|e| Failure::runtime(format!("the {kind} workers failed: {e}")))?;
        for child in &mut children {
            let status = child.wait()?;
            if !status.success() {
                return Err(Failure::runtime(format!(
                    "the Redisson worker of the {kind} run failed ({status}); see {}",
                    history.parent().unwrap_or(history).join("logs").display()
                )));
            }
        }
        Ok(())
    })();
    // A failure above may leave a JVM running: it is ours, so end it by its handle.
    for child in &mut children {
        if child.try_wait().ok().flatten().is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
    result
}

/// Waits until the Java worker `label` wrote its owner file (its clients exist), so
/// that the Rust run's time starts with the JVM ready.
fn wait_for_owners(
    history: &Path,
    cell: &str,
    label: &str,
    child: Option<&mut Child>,
) -> Result<(), Failure> {
    let path = history.join(format!("{cell}.{label}.owners"));
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut child = child;
    while !path.exists() {
        if let Some(c) = child.as_mut()
            && let Ok(Some(status)) = c.try_wait()
        {
            return Err(Failure::runtime(format!(
                "the Redisson worker {label} ended at start-up ({status})"
            )));
        }
        if Instant::now() > deadline {
            return Err(Failure::runtime(format!(
                "the Redisson worker {label} did not start within 60 s"
            )));
        }
        // A file appearing is no event this process can wait on without a watcher; the
        // poll only paces the start-up check.
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Percentiles of hand-offs: from a release being sent to the next grant, when that
/// grant went to a call that was already waiting as the release was sent (the lock
/// went from one holder to a waiter), in milliseconds.
fn hand_offs(ops: &[verify_check::Op], cell: &str) -> Value {
    let mut grants: Vec<(u64, u64, String)> = Vec::new();
    let mut releases: Vec<(u64, String)> = Vec::new();
    let mut pending: std::collections::BTreeMap<String, u64> = Default::default();
    let mut mine: Vec<&verify_check::Op> = ops.iter().filter(|o| o.cell == cell).collect();
    mine.sort_by_key(|o| o.ns);
    for o in mine {
        let who = format!("{}/{}", o.process, o.thread);
        match (o.op.as_str(), o.kind.as_str()) {
            ("acquire", "invoke") => {
                pending.insert(who, o.ns);
            }
            ("acquire", "ok") => {
                if let Some(sent) = pending.remove(&who) {
                    grants.push((sent, o.ns, who));
                }
            }
            ("acquire", _) => {
                pending.remove(&who);
            }
            ("release", "invoke") => releases.push((o.ns, who)),
            _ => {}
        }
    }
    grants.sort_by_key(|g| g.1);
    let mut waits: Vec<u64> = releases
        .iter()
        .filter_map(|(sent, who)| {
            let next = grants.iter().find(|g| g.1 > *sent)?;
            (next.0 < *sent && &next.2 != who).then(|| next.1 - sent)
        })
        .collect();
    waits.sort_unstable();
    let ms = |ns: u64| (ns as f64 / 1e5).round() / 10.0;
    let at = |q: f64| {
        waits
            .get(((waits.len() as f64 - 1.0) * q).round() as usize)
            .map_or(Value::Null, |&w| ms(w).into())
    };
    json!({"count": waits.len(), "p50_ms": at(0.5), "p99_ms": at(0.99),
           "max_ms": waits.last().map_or(Value::Null, |&w| ms(w).into())})
}

/// One kind's figures from the checkers' report and the history.
fn kind_figures(
    report: &Value,
    ops: &[verify_check::Op],
    kind: &str,
    mode: &str,
    cell: &str,
) -> Value {
    let checker = |name: &str| report["checkers"][name].get(cell).cloned();
    let figures = |name: &str| {
        checker(name).map(|c| {
            let mut c = c;
            if let Some(o) = c.as_object_mut() {
                o.remove("evidence");
            }
            c
        })
    };
    let mut violations = 0;
    let mut evidence: Vec<Value> = Vec::new();
    let mut checks = serde_json::Map::new();
    for name in [
        "exclusion",
        "loss_honesty",
        "fencing",
        "permits",
        "liveness",
        "fair_order",
    ] {
        if let Some(c) = checker(name) {
            violations += c["violations"].as_u64().unwrap_or(0);
            if let Some(e) = c["evidence"].as_array() {
                evidence.extend(e.iter().take(5).cloned());
            }
            checks.insert(name.to_owned(), figures(name).unwrap_or(Value::Null));
        }
    }
    let cellinfo = &report["cells"][cell];
    json!({
        "kind": kind,
        "mode": mode,
        "cell": cell,
        "sections": cellinfo["sections"],
        "java_sections": cellinfo["java_sections"],
        "losses_reported": cellinfo["losses_reported"],
        "unknown_outcomes": cellinfo["unknown_outcomes"],
        "checkers": checks,
        "hand_off": hand_offs(ops, cell),
        "violations": violations,
        "evidence": evidence,
    })
}

/// What this run could not test on this deployment, in plain words.
fn not_tested(redis: &mut Redis, topology: &Topology, java: &JavaPlan) -> Vec<String> {
    let mut out = vec![
        "no faults were injected: failovers, lost replies, paused or killed holders and \
         network faults are scripts/verify.sh's (docs/verify.md), on test servers"
            .to_owned(),
        format!(
            "ACL: every worker ran as user `{}`; other users' permissions and ACL refusals \
             were not tried (`redmutex doctor` checks them)",
            redis.user()
        ),
        "every worker ran on this host, with this host's clock; clients on other hosts \
         were not part of the run"
            .to_owned(),
    ];
    if topology.label == "cluster" {
        if redis.publish_command().contains("SPUBLISH") {
            out.push(
                "pub/sub: the workers woke through the library's default subscription mode \
                 on this cluster; the other mode (plain SUBSCRIBE or sharded) was not tried"
                    .to_owned(),
            );
        } else {
            out.push(
                "pub/sub: this cluster has no sharded pub/sub (Redis before 7); only plain \
                 SUBSCRIBE wake-ups were tested"
                    .to_owned(),
            );
        }
    } else {
        out.push("sharded pub/sub: not used outside a cluster, not tested".to_owned());
    }
    out.push(format!("Java (Redisson) workers: {}", java.note));
    out
}

/// The summary for a person: one line per kind, then the keys and what was not tested.
fn human(s: &Value) -> String {
    let mut text = format!(
        "redmutex verify: {} ({}, user {}), {} Rust threads per kind, {} s per kind, lease {} \
         ms, prefix {}, seed {}\n\n",
        s["target"].as_str().unwrap_or(""),
        s["topology"].as_str().unwrap_or(""),
        s["user"].as_str().unwrap_or(""),
        s["threads"],
        s["seconds"],
        s["lease_ms"],
        s["prefix"].as_str().unwrap_or(""),
        s["seed"],
    );
    text.push_str(&format!(
        "{:<10} {:<9} {:>9} {:>5}  {:<28} {:<13} {:<22} {:<20} {:<15} {:>6}\n",
        "kind",
        "mode",
        "sections",
        "java",
        "exclusion ovl/overst/viol",
        "loss honesty",
        "kind's own check",
        "wake-up (free/bound)",
        "hand-off p50/p99",
        "lost"
    ));
    for k in s["kinds"].as_array().into_iter().flatten() {
        let c = &k["checkers"];
        let n = |v: &Value| v.as_u64().unwrap_or(0);
        let exclusion = format!(
            "{} / {} / {}",
            n(&c["exclusion"]["overlaps"]),
            n(&c["exclusion"]["overstays"]),
            n(&c["exclusion"]["violations"])
        );
        let own = if let Some(f) = c.get("fencing") {
            format!("fencing: {} viol", n(&f["violations"]))
        } else if let Some(p) = c.get("permits") {
            format!("permits: {} viol", n(&p["violations"]))
        } else if let Some(f) = c.get("fair_order") {
            format!("fair order: {} viol", n(&f["violations"]))
        } else {
            "-".to_owned()
        };
        let wake = match c.get("liveness") {
            Some(l) => format!(
                "{} viol ({}/{} ms)",
                n(&l["violations"]),
                n(&l["longest_free_wait_ms"]),
                n(&l["bound_ms"])
            ),
            None => "-".to_owned(),
        };
        let h = &k["hand_off"];
        let hand = if n(&h["count"]) == 0 {
            "none seen".to_owned()
        } else {
            format!("{} / {} ms", h["p50_ms"], h["p99_ms"])
        };
        text.push_str(&format!(
            "{:<10} {:<9} {:>9} {:>5}  {:<28} {:<13} {:<22} {:<20} {:<15} {:>6}\n",
            k["kind"].as_str().unwrap_or(""),
            k["mode"].as_str().unwrap_or(""),
            n(&k["sections"]),
            n(&k["java_sections"]),
            exclusion,
            format!("{} viol", n(&c["loss_honesty"]["violations"])),
            own,
            wake,
            hand,
            n(&k["losses_reported"]),
        ));
        for e in k["evidence"].as_array().into_iter().flatten() {
            text.push_str(&format!("    {}\n", e.as_str().unwrap_or("")));
        }
    }
    text.push_str(
        "\n(overlaps that are overstays were holders past their lease whose guards reported \
         the loss; only violations are errors. wake-up: the longest wait while the lock \
         was free, against its bound; lost: sections whose guard reported the loss)\n",
    );
    text.push_str(&format!(
        "keys: {} the run left deleted, {} left now (pattern {})\n",
        s["keys"]["removed"],
        s["keys"]["left"],
        s["keys"]["pattern"].as_str().unwrap_or("")
    ));
    text.push_str("not tested here:\n");
    for line in s["not_tested"].as_array().into_iter().flatten() {
        text.push_str(&format!("  - {}\n", line.as_str().unwrap_or("")));
    }
    text.push_str(&format!(
        "history and reports: {}\n{} violations\n",
        s["out"].as_str().unwrap_or(""),
        s["violations"]
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_login_goes_into_the_url_percent_encoded() {
        assert_eq!(with_login("redis://h:1/", None, None), "redis://h:1/");
        assert_eq!(
            with_login("redis://h:1/0", Some("ops"), Some("p@ss word")),
            "redis://ops:p%40ss%20word@h:1/0"
        );
        assert_eq!(
            with_login("redis://old:pw@h:1", None, Some("new")),
            "redis://old:new@h:1"
        );
        assert_eq!(
            with_login("rediss://u@h:1/2", None, Some("x")),
            "rediss://u:x@h:1/2"
        );
    }

    #[test]
    fn glob_characters_are_escaped_for_scan() {
        assert_eq!(glob_escape("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
    }
}
