//! Scheduled-job de-duplication: every worker fires the same cron tick, exactly one runs
//! the job and the others skip it (they do not wait). The runner leaves the lock to expire
//! after the period instead of releasing it, so a second firing of the same tick within
//! the period (a worker whose clock is late, a retried trigger) skips too.
//!
//! Redisson users write this as `lock.tryLock(0, period, MILLISECONDS)` and never unlock;
//! here it is `try_lock_with_lease(Duration::ZERO, period)` and `detach()`.
//!
//! `cargo run --example job_dedup` runs it against a throwaway redis-server and checks
//! the count; the test suite runs it the same way (`cargo test`).

#[path = "../src/bin/redmutex/server.rs"]
#[allow(dead_code, reason = "the spawner serves the demo and the tests too")]
mod server;

use std::sync::Barrier;
use std::time::{Duration, Instant};

use redmutex::Client;

const WORKERS: usize = 4;
/// The job's period: no second run of a tick within it.
const PERIOD: Duration = Duration::from_millis(800);

/// What one worker did with one tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tick {
    Ran,
    Skipped,
}

/// One worker's handling of a tick of `job`: run it if no other worker has this period.
fn fire(client: &Client, job: &str, runs: &mut redis::Connection) -> redmutex::Result<Tick> {
    let lock = client.get_lock(format!("job:{job}"));
    // No wait: another worker has the tick, so skip. The lease is the period.
    let Some(guard) = lock.try_lock_with_lease(Duration::ZERO, PERIOD)? else {
        return Ok(Tick::Skipped);
    };
    // The job itself (here: count the runs).
    redis::cmd("INCR")
        .arg(format!("runs:{job}"))
        .query::<i64>(runs)?;
    // Keep the lock until the period ends: releasing it now would let a late firing of
    // the same tick run the job again.
    guard.detach();
    Ok(Tick::Ran)
}

/// Every worker fires once, all at the same moment; the outcomes.
fn tick(clients: &[Client], url: &str, job: &str) -> Result<Vec<Tick>, String> {
    let barrier = Barrier::new(clients.len());
    std::thread::scope(|s| {
        let handles: Vec<_> = clients
            .iter()
            .map(|client| {
                let barrier = &barrier;
                s.spawn(move || -> Result<Tick, String> {
                    let mut runs = redis::Client::open(url)
                        .and_then(|c| c.get_connection())
                        .map_err(|e| e.to_string())?;
                    barrier.wait();
                    fire(client, job, &mut runs).map_err(|e| e.to_string())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| "a worker panicked".to_owned())?)
            .collect()
    })
}

fn count(outcomes: &[Tick], which: Tick) -> usize {
    outcomes.iter().filter(|t| **t == which).count()
}

fn run() -> Result<(), String> {
    let redis = server::RedisServer::start(&[])?;
    let url = redis.url();
    let clients: Vec<Client> = (0..WORKERS)
        .map(|_| Client::open(&url).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let job = "nightly-report";
    let mut conn = redis::Client::open(url.as_str())
        .and_then(|c| c.get_connection())
        .map_err(|e| e.to_string())?;

    let first = tick(&clients, &url, job)?;
    println!("tick 1: {first:?}");
    if count(&first, Tick::Ran) != 1 || count(&first, Tick::Skipped) != WORKERS - 1 {
        return Err(format!(
            "tick 1 should run once and skip {}: {first:?}",
            WORKERS - 1
        ));
    }
    // The same tick again, within the period: everyone skips.
    let again = tick(&clients, &url, job)?;
    println!("tick 1 fired again within the period: {again:?}");
    if count(&again, Tick::Skipped) != WORKERS {
        return Err(format!("a repeat within the period ran the job: {again:?}"));
    }
    // After the period the lock is gone by itself and the next tick runs once.
    let end = Instant::now() + PERIOD * 20;
    loop {
        let exists: bool = redis::cmd("EXISTS")
            .arg(format!("job:{job}"))
            .query(&mut conn)
            .map_err(|e| e.to_string())?;
        if !exists {
            break;
        }
        if Instant::now() > end {
            return Err("the lock never expired".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let next = tick(&clients, &url, job)?;
    println!("tick 2, after the period: {next:?}");
    if count(&next, Tick::Ran) != 1 {
        return Err(format!("tick 2 should run once: {next:?}"));
    }
    let runs: i64 = redis::cmd("GET")
        .arg(format!("runs:{job}"))
        .query(&mut conn)
        .map_err(|e| e.to_string())?;
    if runs != 2 {
        return Err(format!("the job ran {runs} times over two ticks"));
    }
    println!("ok: {WORKERS} workers, two ticks, the job ran {runs} times");
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("job_dedup FAILED: {e}");
        std::process::exit(1);
    }
}
