//! One soak worker process: clients × threads doing random lock operations on a small
//! set of names for a while. Each thread writes a history (the verification harness's
//! JSON lines, `docs/verify.md`) of its acquires, releases and critical sections, whose
//! entry and exit snapshots read the lock on a direct (fault-free) connection; the test
//! judges it with the harness's checkers, each holder by its own hold.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use redmutex::{Client, Config, Error, Owner};
use serde_json::{Map, Value, json};

use crate::verify_worker::{Recorder, Rng, snapshot};

#[derive(Debug, Default, Clone)]
struct Tally {
    sections: u64,
    losses: u64,
    errors: u64,
    forced: u64,
    /// Sections completed in each full 10 s window of the run (see [`WINDOW`]).
    windows: Vec<u64>,
}

/// The starvation check's window: every thread must complete a section in each one.
const WINDOW: Duration = Duration::from_secs(10);

impl Tally {
    fn add(&mut self, o: &Self) {
        self.sections += o.sections;
        self.losses += o.losses;
        self.errors += o.errors;
        self.forced += o.forced;
    }
}

/// (Test helper.) One soak worker process: random lock operations for a while, each
/// critical section checked by an occupancy counter on a direct connection.
#[derive(Debug, clap::Args)]
pub(crate) struct SoakArgs {
    #[arg(long)]
    url: String,
    #[arg(long)]
    direct: String,
    #[arg(long)]
    prefix: String,
    #[arg(long, default_value_t = 2)]
    clients: u64,
    #[arg(long, default_value_t = 3)]
    threads: u64,
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// The history directory: each thread writes `soak.<label>-t<k>.jsonl` there.
    #[arg(long)]
    history: PathBuf,
    /// This process's name in the history.
    #[arg(long, default_value = "w0")]
    label: String,
}

/// The soak's cell in the history (topology, nemesis, workload).
const CELL: &str = "single-soak-lock-mixed";

pub(crate) fn run(args: &SoakArgs) -> Result<(), String> {
    let (url, direct, prefix) = (args.url.clone(), args.direct.clone(), args.prefix.clone());
    let (clients, threads, seconds) = (args.clients, args.threads, args.seconds);
    let clients: Vec<Client> = (0..clients)
        .map(|_| {
            Client::new(
                Config::builder()
                    .address(url.as_str())
                    .lock_watchdog_timeout(Duration::from_secs(3))
                    .response_timeout(Duration::from_millis(500))
                    .connection_timeout(Duration::from_secs(1))
                    .retry_delay(Duration::from_millis(20))
                    .retry_max_delay(Duration::from_millis(100))
                    .build(),
            )
            .map_err(|e| e.to_string())
        })
        .collect::<Result<_, _>>()?;
    // Every pool is filled now: tell the test, which starts its faults only then (a
    // proxy faulted during `Client::new` fails the worker before it ran a section).
    println!("ready");
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    let start = Instant::now();
    let end = start + Duration::from_secs(seconds);
    // Full windows only; a run shorter than one window is one window.
    let windows = (seconds / WINDOW.as_secs()).max(1) as usize;
    let per_worker: Vec<Tally> = std::thread::scope(|s| {
        let handles: Vec<_> = clients
            .iter()
            .flat_map(|c| (0..threads).map(move |t| (c, t)))
            .enumerate()
            .map(|(i, (client, _))| {
                let (direct, prefix) = (direct.as_str(), prefix.as_str());
                let run = Run {
                    start,
                    end,
                    windows,
                    history: &args.history,
                    label: &args.label,
                };
                s.spawn(move || worker(client, direct, prefix, i as u64, &run))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let mut total = Tally::default();
    let idle = per_worker.iter().filter(|t| t.sections == 0).count();
    for t in &per_worker {
        total.add(t);
    }
    // A (thread, window) pair without a section is a starved window.
    let starved: usize = per_worker
        .iter()
        .map(|t| t.windows.iter().filter(|n| **n == 0).count())
        .sum();
    let threads: Vec<String> = per_worker.iter().map(|t| t.sections.to_string()).collect();
    let least = per_worker
        .iter()
        .flat_map(|t| t.windows.iter().copied())
        .min()
        .unwrap_or(0);
    println!(
        "sections={} losses={} errors={} forced={} idle_workers={idle} \
         starved_windows={starved} windows={windows} least_in_a_window={least} thread_sections={}",
        total.sections,
        total.losses,
        total.errors,
        total.forced,
        threads.join("/")
    );
    Ok(())
}

/// When the run started and ends, how many full windows it has, and where its history
/// goes.
struct Run<'a> {
    start: Instant,
    end: Instant,
    windows: usize,
    history: &'a Path,
    label: &'a str,
}

/// Thread `k`'s recorder. A soak writes hundreds of thousands of lines, so each carries
/// only what the exclusion and loss-honesty checkers read (no write or release lines
/// either): about 30 MB for the default minute.
fn recorder(run: &Run<'_>, k: u64) -> Result<Recorder, String> {
    let mut base = Map::new();
    for (key, value) in [
        ("cell", CELL.into()),
        ("process", run.label.into()),
        ("thread", k.into()),
        ("language", "rust".into()),
    ] {
        base.insert(key.to_owned(), value);
    }
    let path = run.history.join(format!("{CELL}.{}-t{k}.jsonl", run.label));
    Recorder::create(&path, base)
}

fn worker(client: &Client, direct: &str, prefix: &str, seed: u64, run: &Run<'_>) -> Tally {
    let mut tally = Tally {
        windows: vec![0; run.windows],
        ..Tally::default()
    };
    if let Err(e) = work(client, direct, prefix, seed, run, &mut tally) {
        eprintln!("soak worker thread {seed}: {e}");
        tally.errors += 1;
    }
    tally
}

/// One line of thread history with the lock's name.
fn at(name: &str, extra: Value) -> Value {
    let mut v = json!({"name": name});
    if let (Value::Object(v), Value::Object(e)) = (&mut v, extra) {
        v.extend(e);
    }
    v
}

fn work(
    client: &Client,
    direct: &str,
    prefix: &str,
    seed: u64,
    run: &Run<'_>,
    tally: &mut Tally,
) -> Result<(), String> {
    let end = run.end;
    let mut rec = recorder(run, seed)?;
    // This thread's own owner field: threads share clients here, so each snapshot
    // counts exactly this field, and each holder is judged by its own hold.
    let field = format!("{}:{}", client.id(), Owner::current_thread().id());
    let mut conn = redis::Client::open(direct)
        .and_then(|c| c.get_connection())
        .map_err(|e| e.to_string())?;
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let lease = Duration::from_secs(2);
    let wait = Duration::from_millis(300);
    while Instant::now() < end {
        let name = format!("{prefix}:lock:{}", rng.below(3));
        let lock = client.get_lock(name.clone());
        let choice = rng.below(6);
        let call = [
            "lock",
            "try_lock",
            "try_lock_for",
            "lock_with_lease",
            "try_lock_with_lease",
        ]
        .get(choice as usize)
        .copied();
        if let Some(call) = call {
            rec.record("acquire", "invoke", at(&name, json!({"call": call})))?;
        }
        let attempt: Result<Option<_>, Error> = match choice {
            0 => lock.lock().map(Some),
            1 => lock.try_lock(),
            2 => lock.try_lock_for(wait),
            3 => lock.lock_with_lease(lease).map(Some),
            4 => lock.try_lock_with_lease(wait, lease),
            _ => {
                // force_unlock breaks exclusion on purpose, so it works on its own names.
                let forced = client.get_lock(format!("{prefix}:force:{}", rng.below(2)));
                match rng.below(2) {
                    0 => {
                        if let Ok(Some(g)) = forced.try_lock() {
                            let _ = g.unlock();
                        }
                    }
                    _ => {
                        if forced.force_unlock().is_err() {
                            tally.errors += 1;
                        }
                        tally.forced += 1;
                    }
                }
                continue;
            }
        };
        let call = call.unwrap_or("");
        let guard = match attempt {
            Ok(Some(g)) => g,
            Ok(None) => {
                rec.record("acquire", "fail", at(&name, json!({"call": call})))?;
                continue;
            }
            Err(e) => {
                // Outcome unknown: the checkers count it as a possible hold.
                rec.record(
                    "acquire",
                    "info",
                    at(&name, json!({"call": call, "error": e.to_string()})),
                )?;
                tally.errors += 1;
                continue;
            }
        };
        rec.record("acquire", "ok", at(&name, json!({"call": call})))?;
        // Enter only while the guard still trusts its lease.
        if guard.is_lost() {
            rec.record("section-skip", "ok", at(&name, json!({})))?;
            tally.losses += 1;
            let _ = guard.unlock();
            continue;
        }
        let occupancy = format!("{name}:inside");
        let window = (run.start.elapsed().as_secs() / WINDOW.as_secs()) as usize;
        if let Some(n) = tally.windows.get_mut(window) {
            *n += 1;
        }
        // The section: entry snapshot, a non-atomic increment, exit snapshot, each
        // snapshot read with the guard's trust right after its reply (docs/verify.md).
        let held = |snap: Value| json!({"held": snap["held"], "trusted": !guard.is_lost()});
        let snap = snapshot(&mut conn, &occupancy, &name, &field, 1)?;
        rec.record("section-start", "ok", at(&name, held(snap)))?;
        let counter = format!("{name}:counter");
        crate::verify_worker::unprotected_increment(&mut conn, &counter, Duration::ZERO)?;
        rec.record("section-end", "invoke", at(&name, json!({})))?;
        let snap = snapshot(&mut conn, &occupancy, &name, &field, -1)?;
        rec.record("section-end", "ok", at(&name, held(snap)))?;
        tally.sections += 1;
        match guard.unlock() {
            Ok(()) => {}
            Err(e) if e.is_not_held() => tally.losses += 1,
            Err(_) => tally.errors += 1,
        }
    }
    rec.out.flush().map_err(|e| e.to_string())
}
