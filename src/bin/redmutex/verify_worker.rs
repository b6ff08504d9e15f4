//! The verification harness's Rust worker (`redmutex verify-worker`, hidden): threads
//! contending on one lock through a (possibly faulted) connection, each writing a history
//! of every operation as JSON lines (format in `docs/verify.md`).
//!
//! Each thread has its own `Client`, so its owner field is `<client id>:<n>` and the
//! client id alone names the holder in the lock's hash. Each critical section reads and
//! writes a protected key on a separate direct connection that no fault touches, and
//! takes its entry and exit snapshots in one `MULTI` with the lock's state (occupancy
//! counter, the lock's hash, its `PTTL`), so the checkers judge each holder by its own
//! hold as Redis saw it at that instant.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use redmutex::{Client, Error, LockGuard};
use serde_json::{Map, Value, json};

use crate::verify_direct::{self, Direct, Target};

/// (lock client's target, direct connection's target) from the topology options.
fn direct_targets(args: &VerifyWorkerArgs) -> Result<(Target, Target), String> {
    verify_direct::targets(
        &args.url,
        &args.direct,
        args.sentinels.as_deref(),
        &args.master_name,
        args.cluster.as_deref(),
        &args.name,
    )
}

/// `CLOCK_MONOTONIC` in nanoseconds: the clock Java's `System.nanoTime` reads on Linux,
/// so histories of Rust and Java processes on one host share one time line.
pub(crate) fn mono_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| (t.tv_sec() as u64) * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// (Test helper.) One verification worker process; see the module doc.
#[derive(Debug, clap::Args)]
pub(crate) struct VerifyWorkerArgs {
    /// Where the lock traffic goes (the fault proxy) on a single server.
    #[arg(long, default_value = "")]
    url: String,
    /// The fault-free connection for snapshots and the protected key on a single server.
    #[arg(long, default_value = "")]
    direct: String,
    /// A Sentinel set instead: the sentinels' URLs, comma-separated. The lock client and
    /// the direct connection find the master through them (`--url`, `--direct` unused).
    #[arg(long)]
    sentinels: Option<String>,
    /// The master's name the sentinels monitor.
    #[arg(long, default_value = "mymaster")]
    master_name: String,
    /// A Redis Cluster instead: seed nodes' URLs, comma-separated. The direct connection
    /// follows the master of the lock's slot.
    #[arg(long)]
    cluster: Option<String>,
    /// The lock's name.
    #[arg(long)]
    name: String,
    /// `lock` (RLock) or `fenced` (RFencedLock with a fenced write).
    #[arg(long, default_value = "lock")]
    kind: String,
    /// `lease` (explicit leases) or `watchdog` (renewed holds).
    #[arg(long, default_value = "lease")]
    mode: String,
    #[arg(long, default_value_t = 3)]
    threads: u64,
    #[arg(long, default_value_t = 5000)]
    millis: u64,
    /// The lease, or the watchdog timeout, in milliseconds.
    #[arg(long, default_value_t = 800)]
    lease_ms: u64,
    /// The history directory; this process writes `<cell>.<process>-t<k>.jsonl` there,
    /// and `<cell>.<process>.owners` (its pid and client ids) once its clients exist.
    #[arg(long)]
    history: PathBuf,
    #[arg(long)]
    cell: String,
    #[arg(long)]
    process: String,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// One section in this many lasts 50-130 % of the lease (the rest 1-8 ms).
    #[arg(long, default_value_t = 10)]
    long_every: u64,
}

/// Appends one thread's operations to its history file.
struct Recorder {
    out: BufWriter<File>,
    base: Map<String, Value>,
}

impl Recorder {
    fn record(&mut self, op: &str, kind: &str, extra: Value) -> Result<(), String> {
        let mut line = self.base.clone();
        line.insert("op".into(), op.into());
        line.insert("type".into(), kind.into());
        line.insert("ns".into(), mono_ns().into());
        if let Value::Object(extra) = extra {
            line.extend(extra);
        }
        writeln!(self.out, "{}", Value::Object(line)).map_err(|e| e.to_string())
    }
}

/// A small xorshift generator: variety, seeded, not quality.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

pub(crate) fn run(args: &VerifyWorkerArgs) -> Result<(), String> {
    if !matches!(args.kind.as_str(), "lock" | "fenced") {
        return Err(format!("unknown kind {:?} (lock, fenced)", args.kind));
    }
    if !matches!(args.mode.as_str(), "lease" | "watchdog") {
        return Err(format!("unknown mode {:?} (lease, watchdog)", args.mode));
    }
    let lease = Duration::from_millis(args.lease_ms);
    let (lock_target, _) = direct_targets(args)?;
    let clients: Vec<Client> = (0..args.threads)
        .map(|_| {
            Client::new(verify_direct::client_config(&lock_target, lease))
                .map_err(|e| e.to_string())
        })
        .collect::<Result<_, _>>()?;
    // The runner reads this file to find which process holds the lock (SIGSTOP nemesis),
    // and waits for it before faulting anything, so start-up never meets a fault.
    let owners: Vec<String> = clients.iter().map(|c| c.id().to_owned()).collect();
    let owners_path = args
        .history
        .join(format!("{}.{}.owners", args.cell, args.process));
    let tmp = owners_path.with_extension("tmp");
    std::fs::write(
        &tmp,
        format!("{}\n{}\n", std::process::id(), owners.join("\n")),
    )
    .and_then(|()| std::fs::rename(&tmp, &owners_path))
    .map_err(|e| e.to_string())?;
    let end = Instant::now() + Duration::from_millis(args.millis);
    std::thread::scope(|s| {
        let handles: Vec<_> = clients
            .iter()
            .enumerate()
            .map(|(k, client)| s.spawn(move || thread(args, client, k as u64, end)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| "a worker thread panicked".to_owned())?
            })
            .collect::<Result<Vec<()>, String>>()
    })?;
    Ok(())
}

/// What one `MULTI` snapshot saw: the occupancy after its update, this holder's hold
/// count in the lock's hash, the other owners in it, and the lock's `PTTL`.
fn snapshot(
    conn: &mut impl redis::ConnectionLike,
    occupancy: &str,
    name: &str,
    owner: &str,
    delta: i64,
) -> Result<Value, String> {
    let (occ, hash, pttl): (i64, Vec<(String, i64)>, i64) = redis::pipe()
        .atomic()
        .cmd("INCRBY")
        .arg(occupancy)
        .arg(delta)
        .cmd("HGETALL")
        .arg(name)
        .cmd("PTTL")
        .arg(name)
        .query(conn)
        .map_err(|e| format!("snapshot: {e}"))?;
    let prefix = format!("{owner}:");
    let held: i64 = hash
        .iter()
        .filter(|(f, _)| f.starts_with(&prefix))
        .map(|(_, n)| *n)
        .sum();
    let others: Vec<&str> = hash
        .iter()
        .filter(|(f, _)| !f.starts_with(&prefix))
        .map(|(f, _)| f.as_str())
        .collect();
    Ok(json!({"occupancy": occ, "held": held, "others": others, "pttl": pttl}))
}

/// The fenced resource: accepts a write only with a token at least the highest it has
/// accepted (an equal one is the same grant writing again), atomically; keeps the
/// accepted tokens in order so the checker can read what it accepted.
const FENCED_WRITE: &str = r"
local top = tonumber(redis.call('GET', KEYS[1]) or '0')
local token = tonumber(ARGV[1])
if token < top then return {0, top} end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('INCR', KEYS[2])
redis.call('RPUSH', KEYS[3], ARGV[1])
return {1, top}
";

fn thread(args: &VerifyWorkerArgs, client: &Client, k: u64, end: Instant) -> Result<(), String> {
    let path = args
        .history
        .join(format!("{}.{}-t{k}.jsonl", args.cell, args.process));
    let file = File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut base = Map::new();
    base.insert("cell".into(), args.cell.as_str().into());
    base.insert("process".into(), args.process.as_str().into());
    base.insert("thread".into(), k.into());
    base.insert("language".into(), "rust".into());
    base.insert(
        "version".into(),
        format!("redmutex {}", env!("CARGO_PKG_VERSION")).into(),
    );
    base.insert("kind".into(), args.kind.as_str().into());
    base.insert("name".into(), args.name.as_str().into());
    base.insert("owner".into(), client.id().into());
    base.insert("mode".into(), args.mode.as_str().into());
    base.insert("lease_ms".into(), args.lease_ms.into());
    let mut rec = Recorder {
        out: BufWriter::new(file),
        base,
    };
    let mut conn = Direct::connect(&direct_targets(args)?.1)?;
    let mut rng = Rng((args.seed ^ (k + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1);
    let lease = Duration::from_millis(args.lease_ms);
    let wait = Duration::from_millis(300);
    let occupancy = format!("{}:verify:inside", args.name);
    let counter = format!("{}:verify:counter", args.name);
    let fence = [
        format!("{}:verify:fence", args.name),
        format!("{}:verify:accepted", args.name),
        format!("{}:verify:accepted-tokens", args.name),
    ];
    let fenced_write = redis::Script::new(FENCED_WRITE);
    let lock = if args.kind == "fenced" {
        Lockish::Fenced(client.get_fenced_lock(args.name.as_str()))
    } else {
        Lockish::Plain(client.get_lock(args.name.as_str()))
    };
    let watchdog = args.mode == "watchdog";
    while Instant::now() < end {
        let blocking = rng.below(2) == 0;
        let call = match (watchdog, blocking) {
            (true, true) => "lock",
            (true, false) => "try_lock_for",
            (false, true) => "lock_with_lease",
            (false, false) => "try_lock_with_lease",
        };
        rec.record("acquire", "invoke", json!({"call": call}))?;
        let guard = match lock.acquire(watchdog, blocking, wait, lease) {
            Ok(Some(g)) => g,
            Ok(None) => {
                rec.record("acquire", "fail", json!({"call": call}))?;
                continue;
            }
            Err(e) => {
                // Outcome unknown: the acquire may have run (a lost reply). The
                // checkers count it as a possible hold.
                rec.record(
                    "acquire",
                    "info",
                    json!({"call": call, "error": e.to_string()}),
                )?;
                continue;
            }
        };
        let token = guard.token();
        rec.record("acquire", "ok", json!({"call": call, "token": token}))?;
        // Enter only while the guard trusts its hold; a holder that knows it lost
        // skips the section, as a correct program does.
        if guard.is_lost() {
            rec.record("section-skip", "ok", json!({"loss": loss_of(&guard)}))?;
            release(&mut rec, guard)?;
            continue;
        }
        rec.record("section-start", "invoke", json!({}))?;
        let mut snap = snapshot(&mut conn, &occupancy, &args.name, client.id(), 1)?;
        // Read after the snapshot: a correct guard's lease end is no later than Redis's
        // expiry, so a hold Redis no longer had at the snapshot must read as lost now.
        snap["trusted"] = (!guard.is_lost()).into();
        rec.record("section-start", "ok", snap)?;
        // Mostly short sections; one in `long_every` (ten by default) runs past the lease (an overstay in lease
        // mode, renewals in watchdog mode).
        let hold_ms = if rng.below(args.long_every) == 0 {
            args.lease_ms * (50 + rng.below(80)) / 100
        } else {
            1 + rng.below(8)
        };
        if let Some(token) = token.filter(|_| args.kind == "fenced") {
            std::thread::sleep(Duration::from_millis(hold_ms));
            rec.record("write", "invoke", json!({"token": token}))?;
            let (accepted, top): (i64, u64) = fenced_write
                .key(&fence[0])
                .key(&fence[1])
                .key(&fence[2])
                .arg(token)
                .invoke(&mut conn)
                .map_err(|e| format!("fenced write: {e}"))?;
            let kind = if accepted == 1 { "ok" } else { "fail" };
            rec.record("write", kind, json!({"token": token, "top": top}))?;
        } else {
            rec.record("write", "invoke", json!({}))?;
            let value: Option<i64> = redis::cmd("GET")
                .arg(&counter)
                .query(&mut conn)
                .map_err(|e| e.to_string())?;
            std::thread::sleep(Duration::from_millis(hold_ms));
            let value = value.unwrap_or(0) + 1;
            redis::cmd("SET")
                .arg(&counter)
                .arg(value)
                .query::<()>(&mut conn)
                .map_err(|e| e.to_string())?;
            rec.record("write", "ok", json!({"value": value}))?;
        }
        rec.record("section-end", "invoke", json!({}))?;
        let mut snap = snapshot(&mut conn, &occupancy, &args.name, client.id(), -1)?;
        snap["trusted"] = (!guard.is_lost()).into();
        snap["loss"] = loss_of(&guard);
        rec.record("section-end", "ok", snap)?;
        release(&mut rec, guard)?;
    }
    rec.out.flush().map_err(|e| e.to_string())
}

fn loss<K: redmutex::HeldLock>(guard: &LockGuard<K>) -> Value {
    match guard.loss() {
        None => Value::Null,
        Some(l) => format!("{l:?}").into(),
    }
}

fn release(rec: &mut Recorder, guard: Guard) -> Result<(), String> {
    rec.record("release", "invoke", json!({}))?;
    match guard.unlock() {
        Ok(()) => rec.record("release", "ok", json!({})),
        Err(e) if e.is_not_held() => rec.record("release", "fail", json!({"error": e.to_string()})),
        // Unknown: the release may or may not have run; the hold then ends at its lease.
        Err(e) => rec.record("release", "info", json!({"error": e.to_string()})),
    }
}

/// The two lock kinds the worker runs, behind one acquire.
enum Lockish {
    Plain(redmutex::RLock),
    Fenced(redmutex::RFencedLock),
}

/// A guard of either kind.
enum Guard {
    Plain(LockGuard<redmutex::Reentrant>),
    Fenced(LockGuard<redmutex::Fenced>),
}

impl Lockish {
    fn acquire(
        &self,
        watchdog: bool,
        blocking: bool,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<Guard>, Error> {
        macro_rules! go {
            ($l:expr, $g:path) => {
                match (watchdog, blocking) {
                    (true, true) => $l.lock().map(Some),
                    (true, false) => $l.try_lock_for(wait),
                    (false, true) => $l.lock_with_lease(lease).map(Some),
                    (false, false) => $l.try_lock_with_lease(wait, lease),
                }
                .map(|g| g.map($g))
            };
        }
        match self {
            Self::Plain(l) => go!(l, Guard::Plain),
            Self::Fenced(l) => go!(l, Guard::Fenced),
        }
    }
}

impl Guard {
    fn token(&self) -> Option<u64> {
        match self {
            Self::Plain(_) => None,
            Self::Fenced(g) => Some(g.token()),
        }
    }

    fn is_lost(&self) -> bool {
        match self {
            Self::Plain(g) => g.is_lost(),
            Self::Fenced(g) => g.is_lost(),
        }
    }

    fn unlock(self) -> Result<(), Error> {
        match self {
            Self::Plain(g) => g.unlock(),
            Self::Fenced(g) => g.unlock(),
        }
    }
}

fn loss_of(guard: &Guard) -> Value {
    match guard {
        Guard::Plain(g) => loss(g),
        Guard::Fenced(g) => loss(g),
    }
}
