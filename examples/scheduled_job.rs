//! A scheduled job that a fleet fires on every node and that runs once per tick: every
//! worker fires the same cron tick, exactly one runs the job and the others skip it (they
//! do not wait). The lock is ShedLock's (`TaskLock`), so Spring services whose
//! `@SchedulerLock(name = "nightly-report")` runs on ShedLock's Redis provider take part
//! in the same election. `lock_at_least_for` is the period: the job finishes in
//! milliseconds, but the lock stays until the period ends, so a second firing of the same
//! tick (a worker whose clock is late, a retried trigger) skips too. `lock_at_most_for`
//! frees the task if a worker dies in the job.
//!
//! `cargo run --example scheduled_job` runs it against a throwaway redis-server and
//! checks the count; the test suite runs it the same way (`cargo test`).

// A throwaway redis-server, started as the test suite starts its own.
use redmutex_harness::server;

use std::sync::Barrier;
use std::time::{Duration, Instant};

use redmutex::{Client, TaskLock};

const WORKERS: usize = 4;
/// The job's period: no second run of a tick within it.
const PERIOD: Duration = Duration::from_millis(800);
/// A worker that dies in the job holds the task at most this long.
const AT_MOST: Duration = Duration::from_secs(60);

/// What one worker did with one tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tick {
    Ran,
    Skipped,
}

/// One worker's handling of a tick of `job`: run it if no other worker has this period.
fn fire(client: &Client, job: &str, runs: &mut redis::Connection) -> redmutex::Result<Tick> {
    let task = client
        .get_task_lock(job)
        .lock_at_most_for(AT_MOST)
        .lock_at_least_for(PERIOD);
    // No wait: another worker has the tick (or had it less than a period ago), so skip.
    let ran = task.run_if_free(|| -> redmutex::Result<()> {
        // The job itself (here: count the runs), which may check that it runs locked,
        // as ShedLock's LockAssert.assertLocked() does.
        TaskLock::assert_locked()?;
        redis::cmd("INCR")
            .arg(format!("runs:{job}"))
            .query::<i64>(runs)?;
        Ok(())
    })?;
    match ran {
        Some(job_result) => job_result.map(|()| Tick::Ran),
        None => Ok(Tick::Skipped),
    }
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
            .arg(format!("job-lock:default:{job}"))
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
        eprintln!("scheduled_job FAILED: {e}");
        std::process::exit(1);
    }
}
