//! One worker process: clients × threads taking one lock and incrementing a counter
//! with a non-atomic GET then SET, plus an occupancy check that catches any overlap.

use std::time::{Duration, Instant};

use redmutex::{Client, Config};

/// What one worker did.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub(crate) sections: u64,
    pub(crate) overlaps: u64,
    pub(crate) waited: u64,
    pub(crate) waits_us: Vec<u64>,
}

/// (Test helper.) One contention worker process: clients × threads taking one lock and
/// incrementing a counter non-atomically; prints one `key=value` report line.
#[derive(Debug, clap::Args)]
pub(crate) struct WorkerArgs {
    #[arg(long)]
    url: String,
    #[arg(long)]
    lock: String,
    #[arg(long)]
    counter: String,
    #[arg(long, default_value_t = 2)]
    clients: u64,
    #[arg(long, default_value_t = 8)]
    threads: u64,
    #[arg(long, default_value_t = 200)]
    iterations: u64,
}

pub(crate) fn run(args: &WorkerArgs) -> Result<(), String> {
    let report = contend(
        &args.url,
        &args.lock,
        &args.counter,
        args.clients,
        args.threads,
        args.iterations,
    )?;
    // One line the parent parses.
    println!(
        "sections={} overlaps={} waited={} wait_p50_us={} wait_p99_us={}",
        report.sections,
        report.overlaps,
        report.waited,
        percentile(&report.waits_us, 0.50),
        percentile(&report.waits_us, 0.99)
    );
    Ok(())
}

/// Runs the contention loop in this process.
pub(crate) fn contend(
    url: &str,
    lock: &str,
    counter: &str,
    clients: u64,
    threads: u64,
    iterations: u64,
) -> Result<Report, String> {
    let clients: Vec<Client> = (0..clients)
        .map(|_| Client::new(Config::builder().address(url).build()).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let inside = format!("{counter}:inside");
    let reports = std::thread::scope(|s| {
        let handles: Vec<_> = clients
            .iter()
            .flat_map(|client| (0..threads).map(move |_| client))
            .map(|client| {
                let inside = inside.as_str();
                s.spawn(move || section_loop(client, lock, counter, inside, iterations))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| "a worker thread panicked".to_owned())?
            })
            .collect::<Result<Vec<Report>, String>>()
    })?;
    let mut total = Report::default();
    for r in reports {
        total.sections += r.sections;
        total.overlaps += r.overlaps;
        total.waited += r.waited;
        total.waits_us.extend(r.waits_us);
    }
    total.waits_us.sort_unstable();
    Ok(total)
}

fn section_loop(
    client: &Client,
    name: &str,
    counter: &str,
    inside: &str,
    iterations: u64,
) -> Result<Report, String> {
    let lock = client.get_lock(name);
    let mut conn = redis::Client::open(client.config().address())
        .and_then(|c| c.get_connection())
        .map_err(|e| e.to_string())?;
    let mut report = Report::default();
    for _ in 0..iterations {
        let started = Instant::now();
        let guard = lock.lock().map_err(|e| e.to_string())?;
        let waited = started.elapsed();
        if waited > Duration::from_millis(1) {
            report.waited += 1;
        }
        report.waits_us.push(waited.as_micros() as u64);
        // Occupancy: anyone else inside at the same time would make this exceed 1.
        let occupants: i64 = redis::cmd("INCR")
            .arg(inside)
            .query(&mut conn)
            .map_err(|e| e.to_string())?;
        if occupants != 1 {
            report.overlaps += 1;
        }
        let value: Option<i64> = redis::cmd("GET")
            .arg(counter)
            .query(&mut conn)
            .map_err(|e| e.to_string())?;
        redis::cmd("SET")
            .arg(counter)
            .arg(value.unwrap_or(0) + 1)
            .query::<()>(&mut conn)
            .map_err(|e| e.to_string())?;
        redis::cmd("DECR")
            .arg(inside)
            .query::<i64>(&mut conn)
            .map_err(|e| e.to_string())?;
        guard.unlock().map_err(|e| e.to_string())?;
        report.sections += 1;
    }
    Ok(report)
}

/// The `q` quantile of sorted samples (0 for none).
pub(crate) fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}
