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
//!
//! The kinds: `lock` (RLock), `fenced` (RFencedLock with a fenced write), `fair`
//! (RFairLock), `rw` (RReadWriteLock, two reads in three), `semaphore` (RSemaphore,
//! `--permits` permits) and `latch` (RCountDownLatch rounds, see [`latch_thread`]). Process `p0` also runs an observer thread for the lock kinds: it
//! reads the lock's existence (and a fair lock's queue) every few milliseconds, which the
//! liveness and fair-order checkers judge the waiters by.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// `lock` (RLock), `fenced` (RFencedLock with a fenced write), `fair` (RFairLock),
    /// `rw` (RReadWriteLock), `semaphore` (RSemaphore) or `latch` (RCountDownLatch).
    #[arg(long, default_value = "lock")]
    kind: String,
    /// `lease` (explicit leases), `watchdog` (renewed holds) or `handoff` (blocking
    /// acquires with leases, longer sections, and each thread rests one to two leases
    /// after its release, so that a released lock can only go to a waiter); `plain` for
    /// a semaphore (its permits have no lease) and the latch.
    #[arg(long, default_value = "lease")]
    mode: String,
    /// The semaphore's permits.
    #[arg(long, default_value_t = 2)]
    permits: u64,
    /// The worker processes of the cell (`latch-shared` counts down one latch from all
    /// of them).
    #[arg(long, default_value_t = 1)]
    processes: u64,
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
pub(crate) struct Recorder {
    pub(crate) out: BufWriter<File>,
    pub(crate) base: Map<String, Value>,
}

impl Recorder {
    /// A recorder writing to a new file at `path`, every line with `base`'s fields.
    pub(crate) fn create(path: &std::path::Path, base: Map<String, Value>) -> Result<Self, String> {
        let file = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Self {
            out: BufWriter::new(file),
            base,
        })
    }

    pub(crate) fn record(&mut self, op: &str, kind: &str, extra: Value) -> Result<(), String> {
        let mut line = self.base.clone();
        line.insert("op".into(), op.into());
        line.insert("type".into(), kind.into());
        line.insert("ns".into(), mono_ns().into());
        if let Value::Object(extra) = extra {
            line.extend(extra);
        }
        writeln!(self.out, "{}", Value::Object(line)).map_err(|e| e.to_string())?;
        // A SIGKILLed worker's history ends where its buffer was last flushed. Its
        // acquires and releases reach the file before the next call is sent, so the
        // liveness checker can tell what a killed process held: a line lost in the
        // buffer belongs to a call that was not sent yet.
        if matches!(op, "acquire" | "release") {
            self.out.flush().map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

pub(crate) use redmutex::admin::rng::Rng;

/// Whether the worker-side seeded bug `name` is switched on (`REDMUTEX_VERIFY_BROKEN`,
/// as for the library's `verify-broken-*` bugs). These bugs live in the worker, not in
/// the library: they stand for mistakes of a program around the lock (see
/// `docs/verify.md`), and nothing but this hidden test subcommand runs them.
fn broken(name: &str) -> bool {
    // Compiled in only with its test-only feature, as the library's seeded bugs are.
    let built = (name == "clear-at-start" && cfg!(feature = "verify-broken-clear-at-start"))
        || (name == "latch-double-count-down"
            && cfg!(feature = "verify-broken-latch-double-count-down"));
    built
        && std::env::var("REDMUTEX_VERIFY_BROKEN")
            .is_ok_and(|v| v.split(',').any(|b| b.trim() == name))
}

pub(crate) fn run(args: &VerifyWorkerArgs) -> Result<(), String> {
    match (args.kind.as_str(), args.mode.as_str()) {
        ("lock" | "fenced" | "fair" | "rw" | "token", "lease" | "watchdog" | "handoff")
        | ("semaphore" | "latch", "plain")
        | ("latch", "shared")
        | ("semaphore", "lease") => {}
        (kind, mode) => {
            return Err(format!(
                "unknown workload {kind}-{mode} (lock, fenced, fair, rw, token with lease, \
                 watchdog or handoff; semaphore-plain, semaphore-lease, latch-plain, \
                 latch-shared)"
            ));
        }
    }
    let lease = Duration::from_millis(args.lease_ms);
    let (lock_target, direct_target) = direct_targets(args)?;
    if broken("clear-at-start") && !matches!(args.kind.as_str(), "semaphore" | "latch") {
        // The seeded bug: a start-up "cleanup" that deletes the lock's key as if it were
        // a stale lock of this service's previous life. After a SIGKILL the replacement
        // thus frees the dead holder's lock before its lease ends.
        let mut conn = Direct::connect(&direct_target)?;
        redis::cmd("DEL")
            .arg(&args.name)
            .query::<i64>(&mut conn)
            .map_err(|e| format!("clear-at-start: {e}"))?;
    }
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
    if args.kind == "semaphore" {
        // Every process sets the same count; only the first one's takes effect.
        if let Some(c) = clients.first() {
            let permits = u32::try_from(args.permits).map_err(|e| e.to_string())?;
            let name = args.name.as_str();
            if args.mode == "lease" {
                c.get_permit_expirable_semaphore(name)
                    .try_set_permits(permits)
            } else {
                c.get_semaphore(name).try_set_permits(permits)
            }
            .map_err(|e| format!("semaphore permits: {e}"))?;
        }
    }
    let end = Instant::now() + Duration::from_millis(args.millis);
    let rounds = Rounds {
        barrier: std::sync::Barrier::new(clients.len()),
        stop: AtomicBool::new(false),
    };
    let rounds = &rounds;
    std::thread::scope(|s| {
        let mut handles: Vec<_> = clients
            .iter()
            .enumerate()
            .map(|(k, client)| {
                if args.kind == "latch" {
                    s.spawn(move || latch_thread(args, client, k as u64, end, rounds))
                } else {
                    s.spawn(move || thread(args, client, k as u64, end))
                }
            })
            .collect();
        // One observer is enough; more would only load the host.
        if args.process == "p0" && !matches!(args.kind.as_str(), "semaphore" | "latch") {
            handles.push(s.spawn(move || observe(args, end)));
        }
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
/// count in the lock's hash, the other owners in it, and the lock's `PTTL`. `owner` is
/// the holder's client id (its fields are `<owner>:<n>`, and `<owner>:<n>:write` for a
/// writer) or a whole owner field.
pub(crate) fn snapshot(
    conn: &mut impl redis::ConnectionLike,
    occupancy: &str,
    name: &str,
    owner: &str,
    delta: i64,
) -> Result<Value, String> {
    let (occ, hash, pttl): (i64, Vec<(String, String)>, i64) = redis::pipe()
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
    let mine = |f: &str| f == owner || f.starts_with(&prefix);
    // A read-write lock's hash has a `mode` field beside the holders' counts.
    let mode = hash
        .iter()
        .find(|(f, _)| f == "mode")
        .map(|(_, m)| m.clone());
    let holders = || hash.iter().filter(|(f, _)| f != "mode");
    let held: i64 = holders()
        .filter(|(f, _)| mine(f))
        .map(|(_, n)| n.parse::<i64>().unwrap_or(0))
        .sum();
    let others: Vec<&str> = holders()
        .filter(|(f, _)| !mine(f))
        .map(|(f, _)| f.as_str())
        .collect();
    let mut snap = json!({"occupancy": occ, "held": held, "others": others, "pttl": pttl});
    if let Some(mode) = mode {
        snap["rw_mode"] = mode.into();
    }
    Ok(snap)
}

/// A token lock's snapshot: the occupancy after its update, whether the string key holds
/// this hold's `token`, the other token it holds if not, and its `PTTL`.
fn token_snapshot(
    conn: &mut impl redis::ConnectionLike,
    occupancy: &str,
    name: &str,
    token: &str,
    delta: i64,
) -> Result<Value, String> {
    let (occ, value, pttl): (i64, Option<String>, i64) = redis::pipe()
        .atomic()
        .cmd("INCRBY")
        .arg(occupancy)
        .arg(delta)
        .cmd("GET")
        .arg(name)
        .cmd("PTTL")
        .arg(name)
        .query(conn)
        .map_err(|e| format!("snapshot: {e}"))?;
    let held = value.as_deref() == Some(token);
    let others: Vec<String> = value.into_iter().filter(|_| !held).collect();
    Ok(json!({"occupancy": occ, "held": u64::from(held), "others": others, "pttl": pttl}))
}

/// A semaphore's snapshot: the occupancy after its update and the permits available.
/// An RSemaphore's permits have no owner and no lease, so a section always holds its own;
/// a permit-expirable semaphore's `permit` is held while its id is in the permits' sorted
/// set with a lease end (epoch ms, the same host's clock) after the server's `TIME`: an
/// expired one is the next acquire's to reclaim.
fn semaphore_snapshot(
    conn: &mut impl redis::ConnectionLike,
    occupancy: &str,
    name: &str,
    permit: Option<redmutex::PermitId>,
    delta: i64,
) -> Result<Value, String> {
    let timeouts = redmutex::admin::names::permit_timeouts(name);
    let id = permit.map_or(Vec::new(), |p| p.as_bytes().to_vec());
    let (occ, available, end, (secs, micros)): (i64, Option<i64>, Option<f64>, (u64, u64)) =
        redis::pipe()
            .atomic()
            .cmd("INCRBY")
            .arg(occupancy)
            .arg(delta)
            .cmd("GET")
            .arg(name)
            .cmd("ZSCORE")
            .arg(&timeouts)
            .arg(id)
            .cmd("TIME")
            .query(conn)
            .map_err(|e| format!("snapshot: {e}"))?;
    let now_ms = secs * 1000 + micros / 1000;
    let held = permit.is_none() || end.is_some_and(|e| e > now_ms as f64);
    Ok(
        json!({"occupancy": occ, "held": u64::from(held), "available": available,
              "lease_end": end, "server_ms": now_ms}),
    )
}

/// The observer: every few milliseconds, whether the lock exists and (a fair lock) who
/// queues for it, each with its send and reply times, until the run ends.
fn observe(args: &VerifyWorkerArgs, end: Instant) -> Result<(), String> {
    let path = args
        .history
        .join(format!("{}.{}-observer.jsonl", args.cell, args.process));
    let file = File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut rec = Recorder {
        out: BufWriter::new(file),
        base: base(args, args.threads, "observer"),
    };
    let mut conn = Direct::connect(&direct_targets(args)?.1)?;
    let queue = redmutex::admin::names::fair_queue(&args.name);
    let fair = args.kind == "fair";
    while Instant::now() < end {
        let sent = mono_ns();
        let (exists, waiting): (i64, Vec<String>) = redis::pipe()
            .atomic()
            .cmd("EXISTS")
            .arg(&args.name)
            .cmd("LRANGE")
            // The queue shares the lock's hash tag, so this stays one slot in a cluster;
            // for the other kinds it is just empty.
            .arg(queue.as_str())
            .arg(0)
            .arg(-1)
            .query(&mut conn)
            .map_err(|e| format!("observe: {e}"))?;
        let mut line = json!({"sent": sent, "free": exists == 0});
        if fair {
            line["queue"] = waiting.into();
        }
        rec.record("observe", "ok", line)?;
        // The observations' spacing sets how finely free stretches are measured, not
        // what they prove (see the liveness checker); this is no synchronisation.
        std::thread::sleep(Duration::from_millis(10));
    }
    rec.out.flush().map_err(|e| e.to_string())
}

/// The fields every line of one thread's history carries.
fn base(args: &VerifyWorkerArgs, k: u64, owner: &str) -> Map<String, Value> {
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
    base.insert("owner".into(), owner.into());
    base.insert("mode".into(), args.mode.as_str().into());
    base.insert("lease_ms".into(), args.lease_ms.into());
    if args.kind == "semaphore" {
        base.insert("access".into(), "permit".into());
        base.insert("permits".into(), args.permits.into());
    }
    base
}

/// The fenced resource (see the script): accepts only tokens at least the highest it
/// accepted, and keeps them in order for the fencing checker.
const FENCED_WRITE: &str = include_str!("../../../lua/verify/fenced_write.lua");

fn thread(args: &VerifyWorkerArgs, client: &Client, k: u64, end: Instant) -> Result<(), String> {
    let path = args
        .history
        .join(format!("{}.{}-t{k}.jsonl", args.cell, args.process));
    let file = File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut rec = Recorder {
        out: BufWriter::new(file),
        base: base(args, k, client.id()),
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
    let name = args.name.as_str();
    let lock = match args.kind.as_str() {
        "fenced" => Lockish::Fenced(client.get_fenced_lock(name)),
        "fair" => Lockish::Fair(client.get_fair_lock(name)),
        "rw" => Lockish::Rw(client.get_read_write_lock(name)),
        "semaphore" if args.mode == "lease" => {
            Lockish::Leased(client.get_permit_expirable_semaphore(name))
        }
        "semaphore" => Lockish::Semaphore(client.get_semaphore(name)),
        "token" => Lockish::Token(client.get_token_lock(name)),
        _ => Lockish::Plain(client.get_lock(name)),
    };
    let watchdog = args.mode == "watchdog";
    // `handoff`: explicit leases, longer sections, and a rest after each release.
    let handoff = args.mode == "handoff";
    while Instant::now() < end {
        // Hand-off waiters all block: a timed one gives up before it could show a long
        // free wait.
        let blocking = handoff || rng.below(2) == 0;
        // Readers two times in three, so that reads overlap often.
        let read = matches!(lock, Lockish::Rw(_)) && rng.below(3) != 0;
        let call = match (&lock, watchdog, blocking) {
            (Lockish::Semaphore(_), _, true) => "acquire",
            (Lockish::Semaphore(_), _, false) => "try_acquire_for",
            (Lockish::Leased(_), _, true) => "acquire_with_lease",
            (Lockish::Leased(_), _, false) => "try_acquire_with_lease",
            (_, true, true) => "lock",
            (_, true, false) => "try_lock_for",
            (_, false, true) => "lock_with_lease",
            (_, false, false) => "try_lock_with_lease",
        };
        let access = match (&lock, read) {
            (Lockish::Rw(_), true) => json!({"access": "read"}),
            (Lockish::Rw(_), false) => json!({"access": "write"}),
            _ => json!({}),
        };
        let with = |v: Value| merge(v, &access);
        rec.record("acquire", "invoke", with(json!({"call": call})))?;
        let guard = match lock.acquire(watchdog, blocking, read, wait, lease) {
            Ok(Some(g)) => g,
            Ok(None) => {
                rec.record("acquire", "fail", with(json!({"call": call})))?;
                continue;
            }
            Err(e) => {
                // Outcome unknown: the acquire may have run (a lost reply). The
                // checkers count it as a possible hold.
                rec.record(
                    "acquire",
                    "info",
                    with(json!({"call": call, "error": e.to_string()})),
                )?;
                continue;
            }
        };
        let token = guard.token();
        // A token lock's owner is the token drawn for this hold, not the thread.
        let token_str = guard.token_str();
        let token_field = token_str.as_deref().map_or(json!(token), |t| json!(t));
        rec.record(
            "acquire",
            "ok",
            with(json!({"call": call, "token": token_field})),
        )?;
        // Enter only while the guard trusts its hold; a holder that knows it lost
        // skips the section, as a correct program does.
        if guard.is_lost() {
            rec.record("section-skip", "ok", json!({"loss": loss_of(&guard)}))?;
            release(&mut rec, guard)?;
            continue;
        }
        rec.record("section-start", "invoke", with(json!({})))?;
        let mut snap = match lock {
            Lockish::Semaphore(_) | Lockish::Leased(_) => {
                semaphore_snapshot(&mut conn, &occupancy, name, guard.permit(), 1)?
            }
            Lockish::Token(_) => token_snapshot(
                &mut conn,
                &occupancy,
                name,
                token_str.as_deref().unwrap_or(""),
                1,
            )?,
            _ => snapshot(&mut conn, &occupancy, name, client.id(), 1)?,
        };
        snap = merge(snap, &access);
        // Read after the snapshot: a correct guard's lease end is no later than Redis's
        // expiry, so a hold Redis no longer had at the snapshot must read as lost now.
        snap["trusted"] = (!guard.is_lost()).into();
        rec.record("section-start", "ok", snap)?;
        // Mostly short sections; one in `long_every` (ten by default) runs past the
        // lease (an overstay in lease mode, renewals in watchdog mode). Hand-off
        // sections are longer, so that waiters queue up behind them.
        let hold_ms = if rng.below(args.long_every) == 0 {
            args.lease_ms * (50 + rng.below(80)) / 100
        } else if handoff {
            50 + rng.below(100)
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
            let value = unprotected_increment(&mut conn, &counter, Duration::from_millis(hold_ms))?;
            rec.record("write", "ok", json!({"value": value}))?;
        }
        rec.record("section-end", "invoke", json!({}))?;
        let mut snap = match lock {
            Lockish::Semaphore(_) | Lockish::Leased(_) => {
                semaphore_snapshot(&mut conn, &occupancy, name, guard.permit(), -1)?
            }
            Lockish::Token(_) => token_snapshot(
                &mut conn,
                &occupancy,
                name,
                token_str.as_deref().unwrap_or(""),
                -1,
            )?,
            _ => snapshot(&mut conn, &occupancy, name, client.id(), -1)?,
        };
        snap["trusted"] = (!guard.is_lost()).into();
        snap["loss"] = loss_of(&guard);
        rec.record("section-end", "ok", snap)?;
        release(&mut rec, guard)?;
        if handoff {
            // Think time, not synchronisation: the releaser stays away for one to two
            // leases, so the lock can only go to a waiter, and a waiter that nobody wakes
            // leaves it free (the liveness checker's case) until the lease it saw ends.
            std::thread::sleep(lease + Duration::from_millis(rng.below(args.lease_ms)));
        }
    }
    rec.out.flush().map_err(|e| e.to_string())
}

fn loss<K: redmutex::LockKind>(guard: &LockGuard<K>) -> Value {
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

/// The latch workload's rounds: the process's threads meet at the barrier before and
/// after each round's count is set; `stop`, set by thread 0 before the first meeting,
/// tells every thread after it that there is no next round.
struct Rounds {
    barrier: std::sync::Barrier,
    stop: AtomicBool,
}

/// One thread of the latch workload. Each round uses a fresh latch of this process,
/// `<name>:latch:<process>:<round>`: thread 0 sets its count to the number of counting
/// threads (all but the last), every thread meets the others once the count is set,
/// then the counting threads count down after a short random pause, and every thread
/// waits (at most 2 s) for the latch to open. The latch checker judges that no wait
/// returned before the last count-down could have run. A failure is recorded and the
/// round goes on, so that no thread leaves the others waiting at the barrier.
fn latch_thread(
    args: &VerifyWorkerArgs,
    client: &Client,
    k: u64,
    end: Instant,
    rounds: &Rounds,
) -> Result<(), String> {
    let path = args
        .history
        .join(format!("{}.{}-t{k}.jsonl", args.cell, args.process));
    let mut rec = Recorder::create(&path, base(args, k, client.id()))?;
    let mut rng = Rng((args.seed ^ (k + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1);
    let counters = args.threads.saturating_sub(1).max(1);
    let counts = k < counters;
    // `latch-shared`: one latch per round for every process, counted down by the
    // counting threads of all of them.
    let shared = args.mode == "shared";
    let count = if shared {
        counters * args.processes.max(1)
    } else {
        counters
    };
    let double = broken("latch-double-count-down");
    let mut failed: Option<String> = None;
    let mut note = |r: Result<(), String>| {
        if let Err(e) = r {
            failed.get_or_insert(e);
        }
    };
    for round in 0.. {
        if k == 0 && Instant::now() >= end {
            // Release: the barrier below orders this store before every thread's load.
            rounds.stop.store(true, Ordering::Release);
        }
        rounds.barrier.wait();
        if rounds.stop.load(Ordering::Acquire) {
            break;
        }
        let name = if shared {
            format!("{}:latch:shared:{round}", args.name)
        } else {
            format!("{}:latch:{}:{round}", args.name, args.process)
        };
        let latch = client.get_count_down_latch(name.as_str());
        let at = |v: Value| merge(json!({"name": name}), &v);
        // Shared: every process's thread 0 sets the count (the first one wins, the others
        // find it set), and its threads count down only after that returned. The latch
        // cannot open before every process's count-downs, so no process's set comes
        // after the latch opened (which would create it anew), and no count-down meets
        // a latch that is not set yet.
        if k == 0 {
            note(rec.record("latch-set", "invoke", at(json!({"count": count}))));
            let outcome = match latch.try_set_count(count) {
                Ok(true) => ("ok", json!({"count": count})),
                Ok(false) => ("fail", json!({"count": count})),
                Err(e) => ("info", json!({"count": count, "error": e.to_string()})),
            };
            note(rec.record("latch-set", outcome.0, at(outcome.1)));
        }
        rounds.barrier.wait();
        if counts {
            std::thread::sleep(Duration::from_millis(rng.below(30)));
            note(rec.record("count-down", "invoke", at(json!({}))));
            // The seeded bug counts down twice and records once: a count-down that a
            // retry after a lost reply ran a second time.
            let twice = if double { latch.count_down() } else { Ok(()) };
            let outcome = match twice.and_then(|()| latch.count_down()) {
                Ok(()) => ("ok", json!({})),
                Err(e) => ("info", json!({"error": e.to_string()})),
            };
            note(rec.record("count-down", outcome.0, at(outcome.1)));
        }
        note(rec.record("latch-wait", "invoke", at(json!({}))));
        let outcome = match latch.wait_for(Duration::from_secs(2)) {
            Ok(true) => ("ok", json!({})),
            Ok(false) => ("fail", json!({})),
            Err(e) => ("info", json!({"error": e.to_string()})),
        };
        note(rec.record("latch-wait", outcome.0, at(outcome.1)));
    }
    note(rec.out.flush().map_err(|e| e.to_string()));
    failed.map_or(Ok(()), Err)
}

/// `extra`'s fields added to `v` (both objects).
fn merge(mut v: Value, extra: &Value) -> Value {
    if let (Value::Object(v), Value::Object(e)) = (&mut v, extra) {
        v.extend(e.clone());
    }
    v
}

/// The lock kinds the worker runs, behind one acquire.
enum Lockish {
    Plain(redmutex::RLock),
    Fenced(redmutex::RFencedLock),
    Fair(redmutex::RFairLock),
    Rw(redmutex::RReadWriteLock),
    Semaphore(redmutex::RSemaphore),
    Leased(redmutex::RPermitExpirableSemaphore),
    Token(redmutex::TokenLock),
}

/// A guard of any kind.
enum Guard {
    Plain(LockGuard<redmutex::Reentrant>),
    Fenced(LockGuard<redmutex::Fenced>),
    Fair(LockGuard<redmutex::Fair>),
    Read(LockGuard<redmutex::Read>),
    Write(LockGuard<redmutex::Write>),
    Token(redmutex::TokenLockGuard),
    Permits(redmutex::RSemaphorePermits),
    /// A leased permit, and when its lease ends by this worker's clock, dated from
    /// before the acquire was sent: no later than the lease end Redis scores it with.
    Leased(
        redmutex::RPermitExpirableSemaphore,
        redmutex::PermitId,
        Instant,
    ),
}

impl Lockish {
    fn acquire(
        &self,
        watchdog: bool,
        blocking: bool,
        read: bool,
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
            Self::Fair(l) => go!(l, Guard::Fair),
            Self::Rw(l) if read => go!(l.read_lock(), Guard::Read),
            Self::Rw(l) => go!(l.write_lock(), Guard::Write),
            Self::Token(l) => go!(l, Guard::Token),
            Self::Semaphore(s) if blocking => s.acquire().map(|p| Some(Guard::Permits(p))),
            Self::Semaphore(s) => s.try_acquire_for(wait).map(|p| p.map(Guard::Permits)),
            Self::Leased(s) => {
                let until = Instant::now() + lease;
                let id = if blocking {
                    s.acquire_with_lease(lease).map(Some)
                } else {
                    s.try_acquire_with_lease(wait, lease)
                };
                id.map(|id| id.map(|id| Guard::Leased(s.clone(), id, until)))
            }
        }
    }
}

impl Guard {
    /// A leased permit's id (the semaphore snapshot reads its lease end).
    fn permit(&self) -> Option<redmutex::PermitId> {
        match self {
            Self::Leased(_, id, _) => Some(*id),
            _ => None,
        }
    }

    fn token(&self) -> Option<u64> {
        match self {
            Self::Fenced(g) => Some(g.token()),
            _ => None,
        }
    }

    /// A token lock's token: the value its hold wrote into the string key.
    fn token_str(&self) -> Option<String> {
        match self {
            Self::Token(g) => Some(g.token().to_owned()),
            _ => None,
        }
    }

    fn is_lost(&self) -> bool {
        match self {
            Self::Plain(g) => g.is_lost(),
            Self::Fenced(g) => g.is_lost(),
            Self::Fair(g) => g.is_lost(),
            Self::Read(g) => g.is_lost(),
            Self::Write(g) => g.is_lost(),
            Self::Token(g) => g.is_lost(),
            // Permits have no lease: they stay taken until released.
            Self::Permits(_) => false,
            Self::Leased(_, _, until) => Instant::now() >= *until,
        }
    }

    fn unlock(self) -> Result<(), Error> {
        match self {
            Self::Plain(g) => g.unlock(),
            Self::Fenced(g) => g.unlock(),
            Self::Fair(g) => g.unlock(),
            Self::Read(g) => g.unlock(),
            Self::Write(g) => g.unlock(),
            Self::Token(g) => g.unlock(),
            Self::Permits(p) => p.release(),
            Self::Leased(s, id, _) => s.release(id),
        }
    }
}

fn loss_of(guard: &Guard) -> Value {
    match guard {
        Guard::Plain(g) => loss(g),
        Guard::Fenced(g) => loss(g),
        Guard::Fair(g) => loss(g),
        Guard::Read(g) => loss(g),
        Guard::Write(g) => loss(g),
        Guard::Token(g) => loss(g),
        Guard::Permits(_) | Guard::Leased(..) => Value::Null,
    }
}

/// The protected resource's write: `GET` the counter, wait `pause`, `SET` it one higher.
/// Not atomic on purpose: two holders inside at once lose an update, which the final
/// count (and the history's `value`s) show. Returns the value written.
pub(crate) fn unprotected_increment(
    conn: &mut impl redis::ConnectionLike,
    counter: &str,
    pause: Duration,
) -> Result<i64, String> {
    let value: Option<i64> = redis::cmd("GET")
        .arg(counter)
        .query(conn)
        .map_err(|e| e.to_string())?;
    if !pause.is_zero() {
        std::thread::sleep(pause);
    }
    let value = value.unwrap_or(0) + 1;
    redis::cmd("SET")
        .arg(counter)
        .arg(value)
        .query::<()>(conn)
        .map_err(|e| e.to_string())?;
    Ok(value)
}
