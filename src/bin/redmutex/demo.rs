//! The contention demo: several processes, each with several clients and threads, take
//! turns on one lock and increment a counter non-atomically; the count must come out
//! exact and no two critical sections may overlap.

use std::time::Instant;

use crate::launch::{Worker, report_field};
use crate::server::RedisServer;

/// Run the contention demo
///
/// Several processes, each with several clients and threads, take turns on one lock and
/// increment a counter non-atomically; the count must come out exact. Without --url it
/// starts a throwaway redis-server (the one REDMUTEX_SERVER names: redis-7.0, the default,
/// redis-6.2, redis-8.2 or valkey-8.1, fetched by scripts/servers.sh).
#[derive(Debug, clap::Args)]
pub(crate) struct DemoArgs {
    /// A Redis server to use instead of a throwaway one.
    #[arg(long)]
    url: Option<String>,
    /// Worker processes.
    #[arg(long, default_value_t = 2)]
    processes: u64,
    /// Clients per process.
    #[arg(long, default_value_t = 2)]
    clients: u64,
    /// Threads per client.
    #[arg(long, default_value_t = 8)]
    threads: u64,
    /// Critical sections per thread.
    #[arg(long, default_value_t = 200)]
    iterations: u64,
}

pub(crate) fn run(args: &DemoArgs) -> Result<(), String> {
    let (processes, clients, threads, iterations) =
        (args.processes, args.clients, args.threads, args.iterations);
    let server;
    let url = match args.url.as_deref() {
        Some(url) => url.to_owned(),
        None => {
            server = RedisServer::start(&[])?;
            println!(
                "started a throwaway redis-server (pid {}, {} = {}) at {}",
                server.pid(),
                redmutex::admin::servers::ENV,
                redmutex::admin::servers::selected()?.name(),
                server.url()
            );
            server.url()
        }
    };
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let tag = format!("{}:{stamp}", std::process::id());
    let lock = format!("redmutex:demo:{tag}");
    let counter = format!("redmutex:demo-counter:{tag}");
    let expected = processes * clients * threads * iterations;
    println!(
        "{processes} processes × {clients} clients × {threads} threads × {iterations} critical sections on lock `{lock}`"
    );
    let worker = Worker {
        url: &url,
        lock: &lock,
        counter: &counter,
        clients,
        threads,
        iterations,
    };
    let started = Instant::now();
    let overlaps = run_workers(&worker, processes)?;
    let elapsed = started.elapsed();
    let count = take_count(&url, &counter)?;
    println!(
        "{expected} hand-offs in {:.2} s: {:.0} critical sections/s",
        elapsed.as_secs_f64(),
        expected as f64 / elapsed.as_secs_f64()
    );
    println!("counter = {count} (expected {expected}), overlapping sections = {overlaps}");
    if count != expected || overlaps != 0 {
        return Err("mutual exclusion was violated".into());
    }
    println!("ok: the count is exact");
    Ok(())
}

/// Starts `processes` copies of `worker`, waits for them all, prints their reports and
/// returns the overlaps they saw in total.
fn run_workers(worker: &Worker<'_>, processes: u64) -> Result<u64, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let children: Vec<_> = (0..processes)
        .map(|_| {
            worker
                .command(&exe)
                .spawn()
                .map_err(|e| format!("cannot start a worker: {e}"))
        })
        .collect::<Result<_, _>>()?;
    let mut overlaps = 0;
    for (i, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        let line = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if !out.status.success() {
            return Err(format!("worker {i} failed: {line}"));
        }
        println!("  worker {i}: {line}");
        overlaps += report_field(&line, "overlaps")
            .ok_or_else(|| format!("worker {i} reported no overlaps: {line}"))?;
    }
    Ok(overlaps)
}

/// Reads the shared counter and deletes it with its occupancy key.
fn take_count(url: &str, counter: &str) -> Result<u64, String> {
    let mut conn = redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .map_err(|e| e.to_string())?;
    let count: Option<u64> = redis::cmd("GET")
        .arg(counter)
        .query(&mut conn)
        .map_err(|e| e.to_string())?;
    let _: () = redis::cmd("DEL")
        .arg(counter)
        .arg(format!("{counter}:inside"))
        .query(&mut conn)
        .map_err(|e| e.to_string())?;
    Ok(count.unwrap_or(0))
}
