//! What a client costs besides its lock calls: watchdog renewals and memory per held
//! lock, and the traffic of an idle client.

use std::time::{Duration, Instant};

use redmutex::{Client, Config};

use crate::alloc::{live_bytes_during, rss_bytes};
use crate::figures::Figures;
use crate::measure::{command_stats, percentile};
use crate::server::Server;
use crate::settings::Settings;

/// Holds many locks under a short watchdog timeout (3 s; 1.5 s in quick mode): renewal
/// EVALs per period and memory per held lock.
pub(crate) fn watchdog_cost(server: &Server, settings: &Settings, fig: &mut Figures) {
    let n = if settings.quick { 1_000 } else { 10_000 };
    let periods = if settings.quick { 2 } else { 5 };
    let lease = if settings.quick {
        Duration::from_millis(1_500)
    } else {
        Duration::from_secs(3)
    };
    let client = Client::new(
        Config::builder()
            .address(server.url.as_str())
            .lock_watchdog_timeout(lease)
            .build(),
    )
    .unwrap();
    let names: Vec<String> = (0..n).map(|i| format!("bench:wd:{i}")).collect();
    hold_all(&client, &names, fig);

    let period = lease / 3;
    // Sample the EVAL count every 5 ms and split it into ticks: bursts of renewals
    // separated by quiet time. Only ticks that start and end inside the window count.
    let window = period * (periods + 1);
    let (start, series) = sample_evals(server, window);
    let complete = complete_ticks(start, &series);
    let mut per_tick: Vec<f64> = complete.iter().map(|t| t.2 as f64).collect();
    per_tick.sort_by(f64::total_cmp);
    let intervals: Vec<f64> = complete
        .windows(2)
        .map(|w| w[1].0.duration_since(w[0].0).as_secs_f64() * 1e3)
        .collect();
    let total = series.last().map_or(0, |s| s.1) - series[0].1;
    for name in &names {
        client.get_lock(name.as_str()).unlock().unwrap();
    }
    fig.set("watchdog_evals_per_period", percentile(&per_tick, 0.5));
    fig.set("watchdog_ticks_seen", per_tick.len() as f64);
    fig.set(
        "watchdog_tick_interval_ms",
        intervals.iter().sum::<f64>() / intervals.len() as f64,
    );
    fig.set(
        "watchdog_tick_ms",
        complete
            .iter()
            .map(|t| t.1.duration_since(t.0).as_secs_f64() * 1e3)
            .sum::<f64>()
            / complete.len() as f64,
    );
    fig.set(
        "watchdog_evals_per_sec",
        total as f64
            / series
                .last()
                .map_or(1.0, |s| s.0.duration_since(start).as_secs_f64()),
    );
    fig.set("watchdog_period_ms", period.as_millis() as f64);
}

/// Takes every lock of `names` under the watchdog and records what holding them costs
/// the client in memory.
fn hold_all(client: &Client, names: &[String], fig: &mut Figures) {
    let n = names.len();
    // Warm the client up (pool connection, thread-locals, script cache) with one cycle.
    client
        .get_lock("bench:wd:warm")
        .lock()
        .unwrap()
        .unlock()
        .unwrap();
    let rss_before = rss_bytes();
    let heap = live_bytes_during(|| {
        for name in names {
            // The RLock handle is dropped: only the client keeps anything per held lock.
            client.get_lock(name.as_str()).lock().unwrap().detach();
        }
    });
    let rss_after = rss_bytes();
    fig.set("watchdog_locks", n as f64);
    fig.set("memory_heap_bytes_per_held_lock", heap as f64 / n as f64);
    fig.set(
        "memory_rss_bytes_per_held_lock",
        (rss_after - rss_before) / n as f64,
    );
    fig.set("watchdog_renewing", client.renewing_count() as f64);
}

/// The server's EVAL and EVALSHA count, every 5 ms for `window`: when it started, and
/// (time, count) samples.
fn sample_evals(server: &Server, window: Duration) -> (Instant, Vec<(Instant, u64)>) {
    let mut raw = server.conn();
    let evals = |raw: &mut redis::Connection| {
        let s = command_stats(raw);
        s.get("evalsha").copied().unwrap_or(0) + s.get("eval").copied().unwrap_or(0)
    };
    let start = Instant::now();
    let mut series = vec![(start, evals(&mut raw))];
    while start.elapsed() < window {
        std::thread::sleep(Duration::from_millis(5));
        series.push((Instant::now(), evals(&mut raw)));
    }
    (start, series)
}

/// A burst of renewals: (start, end, EVALs).
pub(crate) type Tick = (Instant, Instant, u64);

/// The bursts in `series` separated by at least 50 ms of quiet, without the first if it
/// may have begun before the window or the last if it may not have ended.
pub(crate) fn complete_ticks(start: Instant, series: &[(Instant, u64)]) -> Vec<Tick> {
    let mut ticks: Vec<Tick> = Vec::new();
    let mut open: Option<Tick> = None;
    let quiet = Duration::from_millis(50);
    for w in series.windows(2) {
        let ((t0, c0), (t1, c1)) = (w[0], w[1]);
        if c1 > c0 {
            match &mut open {
                Some((_, end, n)) if t0.duration_since(*end) < quiet => {
                    *end = t1;
                    *n += c1 - c0;
                }
                _ => {
                    if let Some(done) = open.take() {
                        ticks.push(done);
                    }
                    open = Some((t0, t1, c1 - c0));
                }
            }
        }
    }
    let last_sample = series.last().map(|s| s.0).unwrap_or(start);
    if let Some(done) = open.take()
        && last_sample.duration_since(done.1) >= quiet
    {
        ticks.push(done);
    }
    // The first burst may have begun before the window.
    ticks
        .into_iter()
        .filter(|t| t.0 > start + Duration::from_millis(5))
        .collect()
}

/// An idle client (holding nothing): commands it sends in a quiet period.
pub(crate) fn idle_client(server: &Server, settings: &Settings, fig: &mut Figures) {
    let idle_span = if settings.quick {
        Duration::from_millis(500)
    } else {
        Duration::from_secs(5)
    };
    let mut raw = server.conn();
    let idle = server.client();
    // Let the client's start-up commands (connection set-up) land first.
    std::thread::sleep(Duration::from_millis(100));
    let before = command_stats(&mut raw);
    std::thread::sleep(idle_span);
    let after = command_stats(&mut raw);
    drop(idle);
    // Our own INFO call is one of them.
    let sent: u64 = after
        .iter()
        .map(|(cmd, n)| n - before.get(cmd).copied().unwrap_or(0))
        .sum::<u64>()
        .saturating_sub(1);
    fig.set("idle_commands", sent as f64);
    fig.set(
        "idle_commands_per_sec",
        sent as f64 / idle_span.as_secs_f64(),
    );
    fig.set("idle_seconds", idle_span.as_secs_f64());
}
