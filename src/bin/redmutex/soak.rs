//! One soak worker process: clients × threads doing random lock operations on a small
//! set of names for a while, recording every critical section with an occupancy counter
//! that a direct (fault-free) connection keeps, so an overlap cannot go unseen.

use std::io::Write;
use std::time::{Duration, Instant};

use redmutex::{Client, Config, Error};

#[derive(Debug, Default, Clone)]
struct Tally {
    sections: u64,
    overlaps: u64,
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
        self.overlaps += o.overlaps;
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
}

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
        "sections={} overlaps={} losses={} errors={} forced={} idle_workers={idle} \
         starved_windows={starved} windows={windows} least_in_a_window={least} thread_sections={}",
        total.sections,
        total.overlaps,
        total.losses,
        total.errors,
        total.forced,
        threads.join("/")
    );
    Ok(())
}

/// A small xorshift generator: the soak only needs variety, not quality.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// When the run started and ends, and how many full windows it has.
struct Run {
    start: Instant,
    end: Instant,
    windows: usize,
}

fn worker(client: &Client, direct: &str, prefix: &str, seed: u64, run: &Run) -> Tally {
    let end = run.end;
    let mut tally = Tally {
        windows: vec![0; run.windows],
        ..Tally::default()
    };
    let Ok(mut conn) = redis::Client::open(direct).and_then(|c| c.get_connection()) else {
        tally.errors += 1;
        return tally;
    };
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let lease = Duration::from_secs(2);
    let wait = Duration::from_millis(300);
    while Instant::now() < end {
        let name = format!("{prefix}:lock:{}", rng.below(3));
        let lock = client.get_lock(name.clone());
        let attempt: Result<Option<_>, Error> = match rng.below(6) {
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
        let guard = match attempt {
            Ok(Some(g)) => g,
            Ok(None) => continue,
            Err(_) => {
                tally.errors += 1;
                continue;
            }
        };
        // Enter only while the guard still trusts its lease.
        if guard.is_lost() {
            tally.losses += 1;
            let _ = guard.unlock();
            continue;
        }
        let occupancy = format!("{name}:inside");
        let window = (run.start.elapsed().as_secs() / WINDOW.as_secs()) as usize;
        if let Some(n) = tally.windows.get_mut(window) {
            *n += 1;
        }
        match section(&mut conn, &occupancy, &format!("{name}:counter")) {
            Ok(true) => tally.sections += 1,
            Ok(false) => {
                // Two inside at once: a violation, unless this holder had lost the lock.
                if guard.is_lost() {
                    tally.losses += 1;
                } else {
                    tally.overlaps += 1;
                }
                tally.sections += 1;
            }
            Err(_) => tally.errors += 1,
        }
        match guard.unlock() {
            Ok(()) => {}
            Err(e) if e.is_not_held() => tally.losses += 1,
            Err(_) => tally.errors += 1,
        }
    }
    tally
}

/// One critical section: enter (occupancy must become 1), a non-atomic increment, leave.
fn section(
    conn: &mut redis::Connection,
    occupancy: &str,
    counter: &str,
) -> redis::RedisResult<bool> {
    let inside: i64 = redis::cmd("INCR").arg(occupancy).query(conn)?;
    let value: Option<i64> = redis::cmd("GET").arg(counter).query(conn)?;
    redis::cmd("SET")
        .arg(counter)
        .arg(value.unwrap_or(0) + 1)
        .query::<()>(conn)?;
    redis::cmd("DECR").arg(occupancy).query::<i64>(conn)?;
    Ok(inside == 1)
}
