//! The verification harness's runner (`redmutex verify-run`, hidden; `scripts/verify.sh`
//! calls it): for each cell (topology × nemesis × workload) it starts a server and the
//! fault proxy, runs `verify-worker` processes against one lock while a seeded nemesis
//! injects faults (each written into the history with its timestamps), then runs the
//! checkers over the whole history and writes `report.json` and `report.md`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

use crate::proxy::FaultProxy;
use crate::server::RedisServer;
use crate::verify_check;
use crate::verify_worker::{Rng, mono_ns};

/// (Test helper.) Runs the verification matrix and checks its history.
#[derive(Debug, clap::Args)]
pub(crate) struct VerifyRunArgs {
    /// The run directory: `history/`, `report.json` and `report.md` go there.
    #[arg(long)]
    out: PathBuf,
    /// Only `single` is built so far.
    #[arg(long, default_value = "single")]
    topology: String,
    /// Comma-separated: none, sigstop, proxy, slow (every reply delayed by half the
    /// lease, for the whole cell).
    #[arg(long, default_value = "sigstop,proxy")]
    nemesis: String,
    /// Comma-separated: lock-lease, lock-watchdog, fenced-lease, fenced-watchdog.
    #[arg(long, default_value = "lock-lease,lock-watchdog,fenced-lease")]
    workloads: String,
    /// Seconds per cell.
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Short cells (5 s each) for CI and the test suite.
    #[arg(long)]
    quick: bool,
    #[arg(long, default_value_t = 2)]
    processes: u64,
    #[arg(long, default_value_t = 3)]
    threads: u64,
    /// The lease (or watchdog timeout) in milliseconds.
    #[arg(long, default_value_t = 600)]
    lease_ms: u64,
    /// A seeded bug to switch on in the workers (`no-owner-check`), for the self-test;
    /// needs a build with the `verify-broken-no-owner-check` feature.
    #[arg(long)]
    broken: Option<String>,
    /// Redisson history workers beside the Rust ones on the `lock-*` workloads:
    /// comma-separated `VERSION=CLASSPATH` pairs (a `classpath.txt` path written by
    /// `tests/interop/build.sh`, or the classpath itself); one Java process per version.
    #[arg(long)]
    java: Option<String>,
    /// One Rust section in this many runs 50-130 % of the lease.
    #[arg(long, default_value_t = 10)]
    long_every: u64,
}

pub(crate) fn run(args: &VerifyRunArgs) -> Result<(), crate::fail::Failure> {
    let violations = run_matrix(args).map_err(crate::fail::Failure::runtime)?;
    if violations > 0 {
        return Err(crate::fail::Failure::runtime(format!(
            "{violations} violations; see {}",
            args.out.join("report.md").display()
        )));
    }
    Ok(())
}

fn run_matrix(args: &VerifyRunArgs) -> Result<u64, String> {
    let topologies: Vec<&str> = if args.topology == "all" {
        vec!["single"]
    } else {
        vec![args.topology.as_str()]
    };
    for t in &topologies {
        if *t != "single" {
            return Err(format!(
                "topology {t:?} is not built yet (only single; see docs/verify.md)"
            ));
        }
    }
    let history = args.out.join("history");
    std::fs::create_dir_all(&history).map_err(|e| format!("{}: {e}", history.display()))?;
    let seconds = if args.quick { 5 } else { args.seconds };
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut rng = Rng(args.seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
    for topology in &topologies {
        for nemesis in args.nemesis.split(',').map(str::trim) {
            if !matches!(nemesis, "none" | "sigstop" | "proxy" | "slow") {
                return Err(format!(
                    "unknown nemesis {nemesis:?} (none, sigstop, proxy, slow)"
                ));
            }
            for workload in args.workloads.split(',').map(str::trim) {
                let Some((kind, mode)) = workload.split_once('-') else {
                    return Err(format!("unknown workload {workload:?}"));
                };
                let cell = format!("{topology}-{nemesis}-{workload}");
                let cell_seed = rng.below(u64::MAX);
                let started = Instant::now();
                run_cell(&Cell {
                    args,
                    exe: &exe,
                    history: &history,
                    cell: &cell,
                    kind,
                    mode,
                    nemesis,
                    seconds,
                    seed: cell_seed,
                })?;
                eprintln!("cell {cell}: {:.1} s", started.elapsed().as_secs_f64());
            }
        }
    }
    verify_check::check_dir(&args.out)
}

struct Cell<'a> {
    args: &'a VerifyRunArgs,
    exe: &'a Path,
    history: &'a Path,
    cell: &'a str,
    kind: &'a str,
    mode: &'a str,
    nemesis: &'a str,
    seconds: u64,
    seed: u64,
}

/// Kills the worker processes if the cell fails half-way, so none outlives the run.
struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            if c.try_wait().ok().flatten().is_none() {
                let _ = kill(Pid::from_raw(c.id() as i32), Signal::SIGCONT);
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

fn run_cell(c: &Cell<'_>) -> Result<(), String> {
    let server = RedisServer::start(&[])?;
    let proxy = FaultProxy::start(server.port());
    let name = format!("verify:{}:{{lock}}", c.cell);
    let mut workers = Workers(Vec::new());
    // Java first: a JVM takes seconds to start, and the Rust workers' run time starts
    // at once, so the Java workers are ready before the Rust ones begin.
    let mut labels: Vec<String> = Vec::new();
    if c.kind == "lock" {
        for (i, (version, cp)) in java_peers(c.args.java.as_deref())?.iter().enumerate() {
            let label = format!("java{}", version.replace('.', "_"));
            let mut cmd = Command::new("java");
            cmd.arg("-cp")
                .arg(cp)
                .arg("dev.redmutex.interop.History")
                .args([&proxy.url(), &server.url(), &name, c.mode])
                .arg(c.args.threads.to_string())
                // Longer than the Rust workers' run, which starts once the JVMs are up.
                .arg((c.seconds * 1000 + 2000).to_string())
                .arg(c.args.lease_ms.to_string())
                .arg(c.history)
                .args([c.cell, &label])
                .arg((c.seed ^ (100 + i as u64)).to_string())
                .stdout(Stdio::null())
                // Redisson logs every fault it meets; keep that beside the history.
                .stderr(log_file(c, &label)?);
            workers
                .0
                .push(cmd.spawn().map_err(|e| format!("cannot start java: {e}"))?);
            labels.push(label);
        }
    }
    let mut owners = wait_for_owners(c, &labels, &mut workers)?;
    let rust: Vec<String> = (0..c.args.processes).map(|p| format!("p{p}")).collect();
    for p in 0..c.args.processes {
        let mut cmd = Command::new(c.exe);
        cmd.args([
            "verify-worker",
            "--url",
            &proxy.url(),
            "--direct",
            &server.url(),
        ])
        .args(["--name", &name, "--kind", c.kind, "--mode", c.mode])
        .args(["--threads", &c.args.threads.to_string()])
        .args(["--millis", &(c.seconds * 1000).to_string()])
        .args(["--lease-ms", &c.args.lease_ms.to_string()])
        .arg("--history")
        .arg(c.history)
        .args(["--cell", c.cell, "--process", &format!("p{p}")])
        .args(["--seed", &(c.seed ^ p).to_string()])
        .args(["--long-every", &c.args.long_every.to_string()])
        .stdout(Stdio::null());
        if let Some(b) = &c.args.broken {
            cmd.env("REDMUTEX_VERIFY_BROKEN", b);
        }
        workers.0.push(
            cmd.spawn()
                .map_err(|e| format!("cannot start a worker: {e}"))?,
        );
    }
    // Fault nothing before every worker has its clients (their owner files exist).
    owners.extend(wait_for_owners(c, &rust, &mut workers)?);
    let mut log = std::fs::File::create(c.history.join(format!("{}.nemesis.jsonl", c.cell)))
        .map_err(|e| e.to_string())?;
    let mut record = |fault: &str, kind: &str, extra: serde_json::Value| {
        let mut line = json!({"cell": c.cell, "process": "nemesis", "language": "none",
            "name": name, "op": "nemesis", "type": kind, "ns": mono_ns(), "fault": fault});
        if let (Some(l), serde_json::Value::Object(e)) = (line.as_object_mut(), extra) {
            l.extend(e);
        }
        let _ = writeln!(log, "{line}");
    };
    let mut direct = redis::Client::open(server.url())
        .and_then(|cl| cl.get_connection())
        .map_err(|e| e.to_string())?;
    let mut rng = Rng(c.seed | 1);
    let lease = Duration::from_millis(c.args.lease_ms);
    if c.nemesis == "slow" {
        // Every reply slowed by half the lease (under the 500 ms response timeout) for
        // the whole cell: a guard that dates its lease from the reply trusts that much
        // past Redis's expiry.
        let down = Duration::from_millis((c.args.lease_ms / 2).min(400));
        record("slow", "invoke", json!({"ms": down.as_millis() as u64}));
        proxy.delay(Duration::ZERO, down);
    }
    let all_done = |w: &mut Workers| {
        w.0.iter_mut()
            .all(|ch| ch.try_wait().ok().flatten().is_some())
    };
    while !all_done(&mut workers) {
        std::thread::sleep(Duration::from_millis(200 + rng.below(400)));
        match c.nemesis {
            "sigstop" => {
                // Stop the process that holds the lock right now, past its lease.
                let fields: Vec<String> = redis::cmd("HKEYS")
                    .arg(&name)
                    .query(&mut direct)
                    .unwrap_or_default();
                let Some(pid) = fields.iter().find_map(|f| {
                    owners
                        .iter()
                        .find(|(_, ids)| ids.iter().any(|id| f.starts_with(&format!("{id}:"))))
                        .map(|(pid, _)| *pid)
                }) else {
                    continue;
                };
                let stop = lease + Duration::from_millis(100 + rng.below(400));
                record(
                    "sigstop",
                    "invoke",
                    json!({"pid": pid, "ms": stop.as_millis() as u64}),
                );
                let _ = kill(Pid::from_raw(pid), Signal::SIGSTOP);
                std::thread::sleep(stop);
                let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
                record("sigstop", "ok", json!({"pid": pid}));
            }
            "proxy" => {
                let (fault, ms) = match rng.below(4) {
                    0 => {
                        let (up, down) = (rng.below(30), 50 + rng.below(250));
                        proxy.delay(Duration::from_millis(up), Duration::from_millis(down));
                        ("delay", 400)
                    }
                    1 => {
                        proxy.reset();
                        ("reset", 0)
                    }
                    2 => {
                        proxy.blackhole();
                        ("blackhole", 150)
                    }
                    _ => {
                        proxy.freeze();
                        ("freeze", 150)
                    }
                };
                record(fault, "invoke", json!({"ms": ms}));
                std::thread::sleep(Duration::from_millis(ms));
                proxy.pass();
                record(fault, "ok", json!({}));
            }
            _ => {}
        }
    }
    if c.nemesis == "slow" {
        record("slow", "ok", json!({}));
    }
    proxy.pass();
    for w in &mut workers.0 {
        let status = w.wait().map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(format!("a worker of cell {} failed: {status}", c.cell));
        }
    }
    Ok(())
}

/// Waits until each worker wrote its owner file; returns (pid, client ids) per worker.
fn wait_for_owners(
    c: &Cell<'_>,
    labels: &[String],
    workers: &mut Workers,
) -> Result<Vec<(i32, Vec<String>)>, String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut out = Vec::new();
    for label in labels {
        let path = c.history.join(format!("{}.{label}.owners", c.cell));
        loop {
            if let Ok(text) = std::fs::read_to_string(&path) {
                let mut lines = text.lines();
                let pid = lines.next().and_then(|l| l.parse().ok()).unwrap_or(0);
                out.push((pid, lines.map(str::to_owned).collect()));
                break;
            }
            if workers
                .0
                .iter_mut()
                .any(|w| w.try_wait().ok().flatten().is_some_and(|s| !s.success()))
            {
                return Err(format!("a worker of cell {} failed at start-up", c.cell));
            }
            if Instant::now() > deadline {
                return Err(format!("no worker of cell {} started within 60 s", c.cell));
            }
            // A file appearing is not an event we can wait on without a watcher crate;
            // this poll only paces the start-up check.
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Ok(out)
}

/// The `--java` pairs: (version, classpath), reading a `classpath.txt` path.
fn java_peers(spec: Option<&str>) -> Result<Vec<(String, String)>, String> {
    let Some(spec) = spec.filter(|s| !s.is_empty()) else {
        return Ok(Vec::new());
    };
    spec.split(',')
        .map(|pair| {
            let (version, cp) = pair
                .split_once('=')
                .ok_or_else(|| format!("--java wants VERSION=CLASSPATH, got {pair:?}"))?;
            let cp = if cp.ends_with(".txt") {
                std::fs::read_to_string(cp)
                    .map_err(|e| format!("{cp}: {e}"))?
                    .trim()
                    .to_owned()
            } else {
                cp.to_owned()
            };
            Ok((version.to_owned(), cp))
        })
        .collect()
}

/// `<run>/logs/<cell>.<label>.stderr`, for a worker's own log output.
fn log_file(c: &Cell<'_>, label: &str) -> Result<std::fs::File, String> {
    let dir = c.history.parent().unwrap_or(c.history).join("logs");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join(format!("{}.{label}.stderr", c.cell));
    std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))
}
