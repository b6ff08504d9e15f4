//! Rates, percentiles and Redis's own command statistics.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Operations per second of `op` on one thread for `span`, after a short warm-up.
pub(crate) fn rate(span: Duration, mut op: impl FnMut()) -> f64 {
    let warm = Instant::now();
    while warm.elapsed() < span / 10 {
        op();
    }
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < span {
        op();
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// Operations per second of `threads` threads together, each running `make(t)`'s
/// operation (with its own connection) in a loop for `span`, after a short warm-up.
pub(crate) fn rate_threads<F>(
    threads: usize,
    span: Duration,
    make: impl Fn(usize) -> F + Sync,
) -> f64
where
    F: FnMut(),
{
    let total = AtomicU64::new(0);
    let warm_end = Instant::now() + span / 10;
    let start = Mutex::new(None::<Instant>);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (total, make, start) = (&total, &make, &start);
            s.spawn(move || {
                let mut op = make(t);
                while Instant::now() < warm_end {
                    op();
                }
                let begin = *start.lock().get_or_insert_with(Instant::now);
                let end = begin + span;
                let mut n = 0;
                while Instant::now() < end {
                    op();
                    n += 1;
                }
                total.fetch_add(n, Ordering::Relaxed);
            });
        }
    });
    let begin = start.lock().unwrap();
    total.load(Ordering::Relaxed) as f64 / begin.elapsed().as_secs_f64().max(span.as_secs_f64())
}

/// CPU nanoseconds this process's threads have run so far (every thread's
/// `/proc/self/task/*/schedstat`, which the kernel keeps in ns; `/proc/self/stat` counts
/// 10 ms ticks, too coarse for a 25 ms slice). A thread that exits takes its count with
/// it, so measure only across spans in which the process starts and ends no thread.
/// `None` where `/proc` has no such files.
pub(crate) fn process_cpu_ns() -> Option<u64> {
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let Ok(text) = std::fs::read_to_string(task.ok()?.path().join("schedstat")) else {
            // The thread ended between the listing and the read: it ran nothing since.
            continue;
        };
        total += text.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}

/// CPU used by this process while `measure` runs, and how many operations it ran:
/// `measure` gets a counting wrapper of `op` to pass to [`rate`] or a loop of its own.
/// Returns `measure`'s result, the CPU ns and the operations (warm-up included, as the
/// CPU is).
pub(crate) fn with_cpu<T, O: FnMut()>(
    mut op: O,
    measure: impl FnOnce(&mut dyn FnMut()) -> T,
) -> (T, Option<u64>, u64) {
    let mut n = 0u64;
    let mut counted = || {
        op();
        n += 1;
    };
    let before = process_cpu_ns();
    let out = measure(&mut counted);
    let after = process_cpu_ns();
    let cpu = before.zip(after).map(|(b, a)| a.saturating_sub(b));
    (out, cpu, n)
}

/// The `q` quantile of sorted samples, by nearest rank (NaN for none).
pub(crate) fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[(((sorted.len() - 1) as f64) * q).round() as usize]
}

/// Calls per command (INFO commandstats).
pub(crate) fn command_stats(conn: &mut redis::Connection) -> BTreeMap<String, u64> {
    command_times(conn)
        .into_iter()
        .map(|(cmd, (calls, _))| (cmd, calls))
        .collect()
}

/// Calls and server-side µs per command (INFO commandstats).
pub(crate) fn command_times(conn: &mut redis::Connection) -> BTreeMap<String, (u64, u64)> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    info.lines()
        .filter_map(|l| {
            let (cmd, rest) = l.strip_prefix("cmdstat_")?.split_once(":calls=")?;
            let mut fields = rest.split(',');
            let calls = fields.next()?.parse().ok()?;
            let usec = fields.next()?.strip_prefix("usec=")?.parse().ok()?;
            Some((cmd.to_owned(), (calls, usec)))
        })
        .collect()
}
