//! The verification harness's runner (`redmutex-verify-run`; `scripts/verify.sh` calls
//! it, `tests/process/verify.rs` calls [`run`]): for each cell (topology × nemesis ×
//! workload) it runs `redmutex verify-worker` processes against one lock on a single
//! server, a Sentinel set or a Redis Cluster while a seeded nemesis injects faults (each
//! written into the history with its start and end), then runs `redmutex verify-check`
//! over the whole history, which writes `report.json` and `report.md`.
//!
//! It lives in the harness, not in the `redmutex` binary, so that it starts and drives
//! the Sentinel set and the Cluster with the harness's own spawners (`sentinel.rs`,
//! `cluster.rs`: failover, kill, migration, healing) instead of copies of them.

use std::cell::RefCell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

use crate::cluster::{self, Cluster, ClusterSpec};
use crate::proxy::FaultProxy;
use crate::sentinel::{SentinelSet, SentinelSpec};
use crate::server::RedisServer;
use redmutex::admin::rng::Rng;

mod nemesis;
mod plan;
mod topology;

use plan::plan;
pub use plan::{NEMESES, QUICK};
use topology::{Shared, Topo};

/// What to run (the options of `redmutex-verify-run`).
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// The run directory: `history/`, `report.json` and `report.md` go there.
    #[arg(long)]
    pub out: PathBuf,
    /// `single`, `sentinel`, `cluster`, a comma-separated list of them, or `all`.
    #[arg(long, default_value = "single")]
    pub topology: String,
    /// Comma-separated nemeses (see [`NEMESES`]), `default` (each topology's own set)
    /// or `all` (every nemesis that applies to the topology). A nemesis that does not
    /// apply to a topology is skipped there.
    #[arg(long, default_value = "default")]
    pub nemesis: String,
    /// Comma-separated `<kind>-<mode>` workloads of `redmutex verify-worker`: lock-lease,
    /// lock-watchdog, fenced-lease, fenced-watchdog.
    #[arg(long, default_value = "lock-lease,lock-watchdog,fenced-lease")]
    pub workloads: String,
    /// Explicit cells instead of the product above: comma-separated
    /// `topology/nemesis/workload`; `quick` is the CI-sized subset ([`QUICK`]).
    #[arg(long)]
    pub cells: Option<String>,
    /// Seconds per cell.
    #[arg(long, default_value_t = 20)]
    pub seconds: u64,
    /// The seed of every nemesis and worker (printed, so a run can be repeated).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Short cells (5 s each on a single server, 8 s on Sentinel and Cluster, where a
    /// failover takes seconds) for CI and the test suite, instead of `--seconds`.
    #[arg(long)]
    pub quick: bool,
    /// Rust worker processes per cell.
    #[arg(long, default_value_t = 2)]
    pub processes: u64,
    /// Threads (each with its own client) per worker process.
    #[arg(long, default_value_t = 3)]
    pub threads: u64,
    /// The lease (or watchdog timeout) in milliseconds.
    #[arg(long, default_value_t = 600)]
    pub lease_ms: u64,
    /// A seeded bug to switch on in the workers (`no-owner-check`, `lease-from-reply`),
    /// for the self-tests; needs a build with its `verify-broken-*` feature.
    #[arg(long)]
    pub broken: Option<String>,
    /// Redisson history workers beside the Rust ones in every cell whose workload the
    /// Java worker knows (every lock kind and both semaphores, on every topology):
    /// comma-separated `VERSION=CLASSPATH` pairs (a `classpath.txt` path written by
    /// `tests/interop/build.sh`, or the classpath itself).
    #[arg(long)]
    pub java: Option<String>,
    /// go-redsync and redis-py history workers beside the Rust ones on the `token-lease`
    /// workload of the single topology: comma-separated `go=PATH` (the `redsyncpeer`
    /// binary of `tests/interop/go/build.sh`) and `python=PATH` (the `peer` launcher of
    /// `tests/interop/python/build.sh`).
    #[arg(long)]
    pub token_peers: Option<String>,
    /// One Rust section in this many runs 50-130 % of the lease.
    #[arg(long, default_value_t = 10)]
    pub long_every: u64,
    /// The `redmutex` binary (its `verify-worker` and `verify-check`); by default the one
    /// beside this program, or beside the test executable's `deps/` directory.
    #[arg(long)]
    pub redmutex: Option<PathBuf>,
}

impl Options {
    /// The defaults for a run into `out` (what the command line gives without options).
    pub fn new(out: impl Into<PathBuf>) -> Self {
        Self {
            out: out.into(),
            topology: "single".into(),
            nemesis: "default".into(),
            workloads: "lock-lease,lock-watchdog,fenced-lease".into(),
            cells: None,
            seconds: 20,
            seed: 1,
            quick: false,
            processes: 2,
            threads: 3,
            lease_ms: 600,
            broken: None,
            java: None,
            token_peers: None,
            long_every: 10,
            redmutex: None,
        }
    }
}

/// Parses the runner's command line (`args` without the program name), as
/// `redmutex-verify-run` does.
pub fn parse(args: &[&str]) -> Result<Options, String> {
    use clap::Parser as _;
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        options: Options,
    }
    Cli::try_parse_from(std::iter::once("redmutex-verify-run").chain(args.iter().copied()))
        .map(|c| c.options)
        .map_err(|e| e.to_string())
}

/// `CLOCK_MONOTONIC` in nanoseconds, the clock of the workers' histories.
fn mono_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| (t.tv_sec() as u64) * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// The `redmutex` binary: beside this program, or beside the test executable's `deps/`.
fn redmutex_exe(o: &Options) -> Result<PathBuf, String> {
    if let Some(p) = &o.redmutex {
        return Ok(p.clone());
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let name = format!("redmutex{}", std::env::consts::EXE_SUFFIX);
    let dir = exe.parent();
    for d in [dir, dir.and_then(Path::parent)].into_iter().flatten() {
        if d.join(&name).is_file() {
            return Ok(d.join(&name));
        }
    }
    Err(format!(
        "no {name} beside {}: build it with `--features cli` or pass --redmutex",
        exe.display()
    ))
}

/// Runs the matrix and checks its history; returns the number of violations (the
/// report is in `o.out`). An `Err` is a run that could not be carried out.
pub fn run(o: &Options) -> Result<u64, String> {
    let cells = plan(o)?;
    if cells.is_empty() {
        return Err("no cell to run".into());
    }
    let history = o.out.join("history");
    std::fs::create_dir_all(&history).map_err(|e| format!("{}: {e}", history.display()))?;
    let exe = redmutex_exe(o)?;
    let mut rng = Rng(o.seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
    let mut shared: Option<(String, Shared)> = None;
    for c in &cells {
        let seconds = match (o.quick, c.topology.as_str()) {
            (true, "single") => 5,
            (true, _) => 8,
            (false, _) => o.seconds,
        };
        if c.topology != "single" && shared.as_ref().is_none_or(|(t, _)| *t != c.topology) {
            // The previous topology's servers stop before these start.
            drop(shared.take());
            let started = Instant::now();
            let s = if c.topology == "sentinel" {
                Shared::Sentinel(SentinelSet::start(SentinelSpec::default()))
            } else {
                Shared::Cluster(Cluster::start(ClusterSpec::default()))
            };
            eprintln!(
                "{} started in {:.1} s",
                c.topology,
                started.elapsed().as_secs_f64()
            );
            shared = Some((c.topology.clone(), s));
        }
        let cell = format!("{}-{}-{}", c.topology, c.nemesis, c.workload);
        let cell_seed = rng.below(u64::MAX);
        let started = Instant::now();
        let (kind, mode) = c.workload.split_once('-').unwrap_or(("lock", "lease"));
        let cx = Cx {
            o,
            exe: &exe,
            history: &history,
            cell: &cell,
            kind,
            mode,
            nemesis: &c.nemesis,
            seconds,
            seed: cell_seed,
        };
        match &shared {
            Some((_, s)) if c.topology != "single" => {
                s.heal();
                run_cell(&cx, &Topo::Shared(s))?;
            }
            _ => {
                // A restart without persistence forgets every lock (`restart_volatile`
                // shows what that does); a crash of a server that fsyncs each write keeps
                // them, so the restart nemesis asks whether the library rides out a
                // crash, not whether Redis forgets.
                let extra: &[&str] = if c.nemesis == "restart" {
                    &["--appendonly", "yes", "--appendfsync", "always"]
                } else {
                    &[]
                };
                let server = RedisServer::start(extra)?;
                let proxy = FaultProxy::start(server.port());
                let server = RefCell::new(server);
                run_cell(&cx, &Topo::Single { server, proxy })?;
            }
        }
        eprintln!("cell {cell}: {:.1} s", started.elapsed().as_secs_f64());
    }
    drop(shared);
    check(&exe, &o.out)
}

/// Runs `redmutex verify-check` over the run directory; returns its violation count.
fn check(exe: &Path, out: &Path) -> Result<u64, String> {
    let status = Command::new(exe)
        .arg("verify-check")
        .arg(out)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    let text = std::fs::read_to_string(out.join("report.json"))
        .map_err(|e| format!("verify-check ({status}) wrote no report.json: {e}"))?;
    let report: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("report.json: {e}"))?;
    report["violations"]
        .as_u64()
        .ok_or_else(|| format!("report.json has no violation count ({status})"))
}

/// One cell's settings.
struct Cx<'a> {
    o: &'a Options,
    exe: &'a Path,
    history: &'a Path,
    cell: &'a str,
    kind: &'a str,
    mode: &'a str,
    nemesis: &'a str,
    seconds: u64,
    seed: u64,
}

/// The worker processes of a cell; kills any still running if the cell fails half-way,
/// so none outlives the run.
struct Workers {
    children: Vec<Child>,
    /// Pids the kill_worker nemesis SIGKILLed: their exit is no failure.
    killed: Vec<u32>,
}

impl Drop for Workers {
    fn drop(&mut self) {
        for c in &mut self.children {
            if c.try_wait().ok().flatten().is_none() {
                let _ = kill(Pid::from_raw(c.id() as i32), Signal::SIGCONT);
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

impl Workers {
    fn all_done(&mut self) -> bool {
        self.children
            .iter_mut()
            .all(|ch| ch.try_wait().ok().flatten().is_some())
    }
}

/// The nemesis log of one cell: one JSON line per fault start (`invoke`) and end (`ok`).
struct Log<'a> {
    file: std::fs::File,
    cell: &'a str,
    name: &'a str,
}

impl Log<'_> {
    fn record(&mut self, fault: &str, kind: &str, extra: serde_json::Value) {
        let mut line = json!({"cell": self.cell, "process": "nemesis", "language": "none",
            "name": self.name, "op": "nemesis", "type": kind, "ns": mono_ns(), "fault": fault});
        if let (Some(l), serde_json::Value::Object(e)) = (line.as_object_mut(), extra) {
            l.extend(e);
        }
        let _ = writeln!(self.file, "{line}");
    }
}

fn worker_command(c: &Cx<'_>, topo: &Topo<'_>, name: &str, label: &str, millis: u64) -> Command {
    let mut cmd = Command::new(c.exe);
    cmd.arg("verify-worker")
        .args(topo.worker_args())
        .args(["--name", name, "--kind", c.kind, "--mode", c.mode])
        .args(["--threads", &c.o.threads.to_string()])
        .args(["--processes", &c.o.processes.to_string()])
        .args(["--millis", &millis.to_string()])
        .args(["--lease-ms", &c.o.lease_ms.to_string()])
        .arg("--history")
        .arg(c.history)
        .args(["--cell", c.cell, "--process", label])
        .args(["--seed", &(c.seed ^ crc(label)).to_string()])
        .args(["--long-every", &c.o.long_every.to_string()])
        .stdout(Stdio::null());
    if let Some(b) = &c.o.broken {
        cmd.env("REDMUTEX_VERIFY_BROKEN", b);
    }
    cmd
}

/// A stable number per worker label, to vary the workers' seeds.
fn crc(label: &str) -> u64 {
    u64::from(cluster::crc16(label.as_bytes()))
}

fn run_cell(c: &Cx<'_>, topo: &Topo<'_>) -> Result<(), String> {
    let name = format!("verify:{}:{{lock}}", c.cell);
    let mut workers = Workers {
        children: Vec::new(),
        killed: Vec::new(),
    };
    // Java first: a JVM takes seconds to start, and the Rust workers' run time starts
    // at once, so the Java workers are ready before the Rust ones begin.
    let mut labels: Vec<String> = Vec::new();
    if java_supports(c.kind, c.mode) {
        let (lock_target, direct_target) = topo.java_targets();
        for (i, (version, cp)) in java_peers(c.o.java.as_deref())?.iter().enumerate() {
            let label = format!("java{}", version.replace('.', "_"));
            let mut cmd = Command::new("java");
            // The fenced resource's script, shared with the Rust worker.
            cmd.arg(format!("-Dverify.lua={}", lua_dir().display()))
                .arg("-cp")
                .arg(cp)
                .arg("dev.redmutex.interop.History")
                .args([&lock_target, &direct_target, &name, c.kind, c.mode])
                .arg(c.o.threads.to_string())
                // Longer than the Rust workers' run, which starts once the JVMs are up.
                .arg((c.seconds * 1000 + 2000).to_string())
                .arg(c.o.lease_ms.to_string())
                .arg(c.history)
                .args([c.cell, &label])
                .arg((c.seed ^ (100 + i as u64)).to_string())
                .stdout(Stdio::null())
                // Redisson logs every fault it meets; keep that beside the history.
                .stderr(log_file(c, &label)?);
            workers
                .children
                .push(cmd.spawn().map_err(|e| format!("cannot start java: {e}"))?);
            labels.push(label);
        }
    }
    if let Topo::Single { server, proxy } = topo
        && c.kind == "token"
        && c.mode == "lease"
    {
        for (i, (label, exe)) in token_peers(c.o.token_peers.as_deref())?.iter().enumerate() {
            let mut cmd = Command::new(exe);
            cmd.arg("history")
                .args([&proxy.url(), &server.borrow().url(), &name, c.mode])
                .arg(c.o.threads.to_string())
                .arg((c.seconds * 1000).to_string())
                .arg(c.o.lease_ms.to_string())
                .arg(c.history)
                .args([c.cell, label])
                .arg((c.seed ^ (200 + i as u64)).to_string())
                .stdout(Stdio::null())
                .stderr(log_file(c, label)?);
            workers.children.push(
                cmd.spawn()
                    .map_err(|e| format!("cannot start {}: {e}", exe.display()))?,
            );
            labels.push(label.clone());
        }
    }
    let mut owners = wait_for_owners(c, &labels, &mut workers)?;
    let rust: Vec<String> = (0..c.o.processes).map(|p| format!("p{p}")).collect();
    let millis = c.seconds * 1000;
    for label in &rust {
        let child = worker_command(c, topo, &name, label, millis)
            .spawn()
            .map_err(|e| format!("cannot start a worker: {e}"))?;
        workers.children.push(child);
    }
    // Fault nothing before every worker has its clients (their owner files exist).
    owners.extend(wait_for_owners(c, &rust, &mut workers)?);
    let end = Instant::now() + Duration::from_millis(millis);
    let file = std::fs::File::create(c.history.join(format!("{}.nemesis.jsonl", c.cell)))
        .map_err(|e| e.to_string())?;
    let mut log = Log {
        file,
        cell: c.cell,
        name: &name,
    };
    let mut rng = Rng(c.seed | 1);
    let lease = Duration::from_millis(c.o.lease_ms);
    if c.nemesis == "slow"
        && let Topo::Single { proxy, .. } = topo
    {
        // Every reply slowed by half the lease (under the 500 ms response timeout) for
        // the whole cell: a guard that dates its lease from the reply trusts that much
        // past Redis's expiry.
        let down = Duration::from_millis((c.o.lease_ms / 2).min(400));
        log.record("slow", "invoke", json!({"ms": down.as_millis() as u64}));
        proxy.delay(Duration::ZERO, down);
    }
    let mut spawned = 0;
    // A cluster master votes for the replica of one master at most once per twice the
    // node timeout, so a manual failover sooner after the last one gets no votes and
    // times out: space a cluster's failovers wider than that.
    let spacing = match topo {
        Topo::Shared(Shared::Cluster(cl)) => {
            Duration::from_millis(cl.spec().node_timeout_ms * 2 + 500)
        }
        _ => Duration::ZERO,
    };
    let mut last_failover: Option<Instant> = None;
    // A worker blocked in a wait that never ends (a fair-lock waiter whose queue slot
    // lasts minutes) would keep the cell, and its nemesis, going: past OVERRUN the
    // nemesis stops, and the workers left are killed below.
    let overdue = end + OVERRUN;
    while !workers.all_done() {
        if Instant::now() > overdue {
            break;
        }
        // Failovers take seconds and are followed by healing; give the workers a quiet
        // stretch between them.
        let gap = if matches!(
            c.nemesis,
            "failover" | "failover_raw" | "kill_master" | "migrate"
        ) {
            500 + rng.below(1000)
        } else {
            200 + rng.below(400)
        };
        std::thread::sleep(Duration::from_millis(gap));
        if workers.all_done() {
            break;
        }
        if matches!(c.nemesis, "failover" | "failover_raw" | "kill_master")
            && let Some(t) = last_failover
        {
            let wait = spacing.saturating_sub(t.elapsed());
            if Instant::now() + wait >= end {
                continue;
            }
            std::thread::sleep(wait);
        }
        match c.nemesis {
            "sigstop" => {
                // Stop the process that holds the lock right now, past its lease.
                let Ok(mut conn) = topo.lock_node(&name) else {
                    continue;
                };
                let fields: Vec<String> = redis::cmd("HKEYS")
                    .arg(&name)
                    .query(&mut conn)
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
                log.record(
                    "sigstop",
                    "invoke",
                    json!({"pid": pid, "ms": stop.as_millis() as u64}),
                );
                let _ = kill(Pid::from_raw(pid), Signal::SIGSTOP);
                std::thread::sleep(stop);
                let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
                log.record("sigstop", "ok", json!({"pid": pid}));
            }
            "proxy" => {
                let Topo::Single { proxy, .. } = topo else {
                    continue;
                };
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
                log.record(fault, "invoke", json!({"ms": ms}));
                std::thread::sleep(Duration::from_millis(ms));
                proxy.pass();
                log.record(fault, "ok", json!({}));
            }
            "restart" | "restart_volatile" => {
                let Topo::Single { server, .. } = topo else {
                    continue;
                };
                nemesis::restart_single(server, c.nemesis, &mut log)?;
            }
            "pause" => nemesis::pause(topo, &name, &mut rng, c.o.lease_ms, &mut log),
            "pubsub_kill" => nemesis::pubsub_kill(topo, &mut log),
            "script_flush" => nemesis::script_flush(topo, &mut log),
            "starve" => nemesis::starve(&mut rng, c.o.lease_ms, &mut log),
            "kill_worker" => {
                // SIGKILL one Rust worker (its hold, if any, stays until its lease
                // ends) and start a fresh one for the rest of the cell.
                let live: Vec<usize> = (0..workers.children.len())
                    .filter(|&i| {
                        workers.children[i].try_wait().ok().flatten().is_none()
                            && !workers.killed.contains(&workers.children[i].id())
                    })
                    .filter(|&i| i >= labels.len())
                    .collect();
                let left = end.saturating_duration_since(Instant::now());
                if live.is_empty() || left < Duration::from_secs(1) {
                    continue;
                }
                let i = live[rng.below(live.len() as u64) as usize];
                let pid = workers.children[i].id();
                // Rust workers follow the Java ones in `children`, as p0, p1, ... and
                // then the replacements in the order they were started.
                let victim = format!("p{}", i - labels.len());
                log.record(
                    "kill_worker",
                    "invoke",
                    json!({"pid": pid, "victim": victim}),
                );
                let _ = workers.children[i].kill();
                let _ = workers.children[i].wait();
                workers.killed.push(pid);
                let label = format!("p{}", c.o.processes + spawned);
                spawned += 1;
                let child = worker_command(c, topo, &name, &label, left.as_millis() as u64)
                    .spawn()
                    .map_err(|e| format!("cannot start a worker: {e}"))?;
                workers.children.push(child);
                owners.extend(wait_for_owners(
                    c,
                    std::slice::from_ref(&label),
                    &mut workers,
                )?);
                log.record(
                    "kill_worker",
                    "ok",
                    json!({"pid": pid, "replacement": label}),
                );
            }
            "failover" => {
                nemesis::failover(topo, &name, &mut log);
                last_failover = Some(Instant::now());
            }
            "failover_raw" => {
                nemesis::failover_raw(topo, &mut log);
                last_failover = Some(Instant::now());
            }
            "kill_master" => {
                nemesis::kill_master(topo, &name, &mut log);
                last_failover = Some(Instant::now());
            }
            "migrate" => nemesis::migrate(topo, &name, &mut rng, &mut log),
            "freeze_replicas" => nemesis::freeze_replicas(topo, &name, &mut rng, &mut log),
            _ => {}
        }
    }
    if c.nemesis == "slow"
        && let Topo::Single { proxy, .. } = topo
    {
        log.record("slow", "ok", json!({}));
        proxy.pass();
    }
    // A worker still running well after its cell ended is stuck: a waiter that never got
    // the lock (a fair lock's blocking wait lasts its 5-minute thread wait). It is killed,
    // so that the run ends and its history is judged, and the run fails, unless a seeded
    // bug is on (the fair queue-jump bug can strand every waiter of its queue). Std has
    // no timed wait on a child, hence the polling.
    let mut overran = Vec::new();
    for w in &mut workers.children {
        let status = loop {
            if let Some(status) = w.try_wait().map_err(|e| e.to_string())? {
                break Some(status);
            }
            if Instant::now() >= overdue {
                let _ = w.kill();
                let _ = w.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        match status {
            None => overran.push(w.id()),
            Some(status) if !status.success() && !workers.killed.contains(&w.id()) => {
                return Err(format!("a worker of cell {} failed: {status}", c.cell));
            }
            Some(_) => {}
        }
    }
    if !overran.is_empty() {
        let what = format!(
            "workers {overran:?} of cell {} were still running {} s after it ended; killed",
            c.cell,
            OVERRUN.as_secs()
        );
        if c.o.broken.is_none() {
            return Err(what);
        }
        eprintln!("verify-run: {what} (a seeded bug is on)");
    }
    Ok(())
}

/// How long past its cell's end a worker may run before the runner kills it.
const OVERRUN: Duration = Duration::from_secs(30);

/// Waits until each worker wrote its owner file; returns (pid, client ids) per worker.
fn wait_for_owners(
    c: &Cx<'_>,
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
            let killed = workers.killed.clone();
            if workers.children.iter_mut().any(|w| {
                !killed.contains(&w.id())
                    && w.try_wait().ok().flatten().is_some_and(|s| !s.success())
            }) {
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

/// Whether the Java history worker runs the workload `kind-mode`: every lock kind in
/// every mode and both semaphores; not the latch (its rounds meet at a per-process
/// barrier the Java worker does not have).
fn java_supports(kind: &str, mode: &str) -> bool {
    match kind {
        "lock" | "fenced" | "fair" | "rw" => matches!(mode, "lease" | "watchdog" | "handoff"),
        "semaphore" => matches!(mode, "plain" | "lease"),
        // Its own latches per process: a shared latch would need every process's counting
        // threads in its count.
        "latch" => mode == "plain",
        _ => false,
    }
}

/// The repository's `lua/verify` directory (the fenced resource's script).
fn lua_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../lua/verify")
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

/// The `--token-peers` pairs: (label `go` or `python`, program).
fn token_peers(spec: Option<&str>) -> Result<Vec<(String, PathBuf)>, String> {
    let Some(spec) = spec.filter(|s| !s.is_empty()) else {
        return Ok(Vec::new());
    };
    spec.split(',')
        .map(|pair| match pair.split_once('=') {
            Some((l @ ("go" | "python"), path)) => Ok((l.to_owned(), PathBuf::from(path))),
            _ => Err(format!(
                "--token-peers wants go=PATH or python=PATH, got {pair:?}"
            )),
        })
        .collect()
}

/// `<run>/logs/<cell>.<label>.stderr`, for a worker's own log output.
fn log_file(c: &Cx<'_>, label: &str) -> Result<std::fs::File, String> {
    let dir = c.history.parent().unwrap_or(c.history).join("logs");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join(format!("{}.{label}.stderr", c.cell));
    std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))
}
