//! Cluster rows: the local 3 + 3 Redis Cluster of the test harness (`tests/harness`),
//! redmutex's uncontended cycle and hand-off against the cluster's own floor (two
//! script round trips on one raw connection to the key's master, measured in the same
//! run, in interleaved slices), and what the watchdog costs per renewal period for
//! many locks spread over the three shards. Every key is prefixed `cluster_`.

use std::time::{Duration, Instant};

use redmutex::{Client, Config};

use crate::figures::{Figures, Sample};
use crate::handoff::{record_latencies, redmutex_handoff};
use crate::measure::percentile;
use crate::settings::Settings;
use crate::support::cluster::{self, Cluster};
use crate::uncontended::raw_cycle_publishing;

/// Length of one measurement slice; floor and redmutex alternate slice by slice.
pub(crate) const SLICE: Duration = Duration::from_millis(25);

/// All cluster rows; skipped (with a note) when the selected server's `redis-cli` is
/// missing.
pub(crate) fn cluster(settings: &Settings, fig: &mut Figures, samples: &mut Vec<Sample>) {
    let cli_path = &redmutex::admin::servers::selected_or_panic().cli;
    let cli = std::process::Command::new(cli_path)
        .arg("--version")
        .output();
    if !cli.is_ok_and(|o| o.status.success()) {
        eprintln!("cluster rows skipped: cannot run {}", cli_path.display());
        return;
    }
    crate::phase("cluster: start, floor and uncontended");
    let started = Instant::now();
    let c = Cluster::start(cluster::ClusterSpec::default());
    fig.set("cluster_start_s", started.elapsed().as_secs_f64());
    // Replica sync off, after acquires and releases: these rows compare with the
    // two-script floor, which sends no WAIT (the sentinel rows measure the cost of WAIT
    // against a floor that has one, and `release_sync_cost` the release's WAIT here).
    let client = Client::new(
        Config::builder()
            .cluster_nodes(c.urls())
            .check_lock_synced_slaves(false)
            .sync_releases(false)
            .build(),
    )
    .unwrap();
    uncontended(&c, &client, settings, fig);
    release_sync_cost(&c, &client, settings, fig);
    handoff(&client, settings, fig, samples);
    if settings.java {
        redisson(&c, settings, fig, samples);
    }
    watchdog(&c, settings, fig);
}

/// Redisson on the same cluster (its harness YAML), and redmutex's time ratios to it.
fn redisson(c: &Cluster, settings: &Settings, fig: &mut Figures, samples: &mut Vec<Sample>) {
    crate::phase(&format!(
        "cluster: Java Redisson {}",
        crate::REDISSON_VERSION
    ));
    crate::redisson::topology(
        &c.redisson_yaml(),
        None,
        "cluster_redisson_",
        settings,
        fig,
        samples,
    );
    ratios_to_redisson(fig, "cluster_", "cluster_redisson_");
}

/// redmutex's time over Redisson's for the cycle and the hand-off p50/p99 (below 1:
/// redmutex is faster): `<ours>..._over_redisson` from `<ours>` and `<theirs>` figures.
pub(crate) fn ratios_to_redisson(fig: &mut Figures, ours: &str, theirs: &str) {
    for m in [
        "uncontended_cycle_us",
        "handoff_2t_p50_us",
        "handoff_2t_p99_us",
    ] {
        let r = fig.get(&format!("{ours}{m}")) / fig.get(&format!("{theirs}{m}"));
        fig.set(
            &format!("{ours}{}_over_redisson", m.trim_end_matches("_us")),
            r,
        );
    }
}

/// Ops per second of `op` run for one slice.
pub(crate) fn slice_rate(mut op: impl FnMut()) -> f64 {
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < SLICE {
        op();
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// One thread: the raw two-script cycle on the key's master, and redmutex's lock+unlock
/// through the cluster client, alternating slices.
fn uncontended(c: &Cluster, client: &Client, settings: &Settings, fig: &mut Figures) {
    let name = "bench:cluster:uncontended";
    // The floor's key in the lock's slot: both sides on the same master, whose load
    // would otherwise tilt the ratio.
    let floor_key = &cluster::key_for_slot(cluster::key_slot(name), "bench:cluster:floor:");
    let mut raw = c.master_for_key(floor_key).conn();
    let mut cycle = raw_cycle_publishing("raw", "SPUBLISH");
    let lock = client.get_lock(name);
    // Warm both: scripts loaded, connections open.
    for _ in 0..100 {
        cycle(&mut raw, floor_key);
        lock.lock().unwrap().unlock().unwrap();
    }
    let slices = (settings.span().as_millis() / (2 * SLICE.as_millis())).max(4) as usize;
    let mut rows = Vec::with_capacity(slices);
    for i in 0..slices {
        let mut floor = || slice_rate(|| cycle(&mut raw, floor_key));
        let ours = || slice_rate(|| lock.lock().unwrap().unlock().unwrap());
        // Rotate the order so neither side always runs first.
        let (f, o) = if i % 2 == 0 {
            (floor(), ours())
        } else {
            let o = ours();
            (floor(), o)
        };
        rows.push((f, o));
    }
    let mean = |k: fn(&(f64, f64)) -> f64| rows.iter().map(k).sum::<f64>() / rows.len() as f64;
    let floor_rate = mean(|r| r.0);
    let ours_rate = mean(|r| r.1);
    let mut ratios: Vec<f64> = rows.iter().map(|(f, o)| f / o).collect();
    ratios.sort_by(f64::total_cmp);
    fig.set("cluster_floor_cycle_per_sec", floor_rate);
    fig.set("cluster_floor_rtt_us", 1e6 / floor_rate / 2.0);
    fig.set("cluster_uncontended_cycles_per_sec", ours_rate);
    fig.set("cluster_uncontended_cycle_us", 1e6 / ours_rate);
    fig.set(
        "cluster_uncontended_cycle_over_floor",
        percentile(&ratios, 0.5),
    );
}

/// What the `WAIT` after each release (`sync_releases`, on by default as in Redisson
/// 4.7.0) costs an uncontended cycle: the default client's cycle time over that of
/// `without` (the same settings with it off), in interleaved slices on one key.
fn release_sync_cost(c: &Cluster, without: &Client, settings: &Settings, fig: &mut Figures) {
    let with = Client::new(
        Config::builder()
            .cluster_nodes(c.urls())
            .check_lock_synced_slaves(false)
            .build(),
    )
    .unwrap();
    let name = "bench:cluster:release-sync";
    let (on, off) = (with.get_lock(name), without.get_lock(name));
    for _ in 0..100 {
        on.lock().unwrap().unlock().unwrap();
        off.lock().unwrap().unlock().unwrap();
    }
    let slices = (settings.span().as_millis() / (2 * SLICE.as_millis())).max(4) as usize;
    let mut ratios = Vec::with_capacity(slices);
    for i in 0..slices {
        let rate = |l: &redmutex::RLock| slice_rate(|| l.lock().unwrap().unlock().unwrap());
        // Rotate the order so neither side always runs first.
        let (with_rate, without_rate) = if i % 2 == 0 {
            (rate(&on), rate(&off))
        } else {
            let w = rate(&off);
            (rate(&on), w)
        };
        ratios.push(without_rate / with_rate);
    }
    ratios.sort_by(f64::total_cmp);
    fig.set(
        "cluster_sync_releases_cycle_ratio",
        percentile(&ratios, 0.5),
    );
}

/// Two threads of one client taking turns on one lock: hand-off latency in µs and in
/// the cluster floor's round trips.
fn handoff(client: &Client, settings: &Settings, fig: &mut Figures, samples: &mut Vec<Sample>) {
    crate::phase("cluster hand-off, 2 threads");
    let span = settings.handoff_span();
    let lat = redmutex_handoff(client, 2, span);
    let rtt = fig.get("cluster_floor_rtt_us");
    fig.set(
        "cluster_handoff_2t_p50_rtt",
        percentile(&lat.handoff, 0.5) / rtt,
    );
    fig.set(
        "cluster_handoff_2t_p99_rtt",
        percentile(&lat.handoff, 0.99) / rtt,
    );
    let mut cluster_samples = Vec::new();
    record_latencies(
        fig,
        &mut cluster_samples,
        "cluster_",
        "redmutex-cluster",
        2,
        span,
        lat,
    );
    samples.extend(cluster_samples);
}

/// Script calls (`EVALSHA` + `EVAL`) the masters ran so far.
fn script_calls(c: &Cluster) -> u64 {
    c.masters()
        .iter()
        .map(|m| {
            let stats = crate::measure::command_stats(&mut m.conn());
            stats.get("evalsha").copied().unwrap_or(0) + stats.get("eval").copied().unwrap_or(0)
        })
        .sum()
}

/// `locks` locks held under a 3 s watchdog (a renewal round every second) by one
/// client: script calls per round, counted over rounds seen as the rise of one lock's
/// TTL, against the target of locks/100 + shards.
fn watchdog(c: &Cluster, settings: &Settings, fig: &mut Figures) {
    crate::phase("cluster watchdog");
    let locks = if settings.quick { 1_000 } else { 10_000 };
    let shards = c.masters().len();
    let client = Client::new(
        Config::builder()
            .cluster_nodes(c.urls())
            .lock_watchdog_timeout(Duration::from_secs(3))
            .build(),
    )
    .unwrap();
    let guards: Vec<_> = (0..locks)
        .map(|i| {
            client
                .get_lock(format!("bench:cluster:wd:{i}"))
                .lock()
                .unwrap()
        })
        .collect();
    let probe = "bench:cluster:wd:0";
    let mut raw = c.master_for_key(probe).conn();
    let mut pttl = || -> i64 { redis::cmd("PTTL").arg(probe).query(&mut raw).unwrap() };
    // The TTL only falls between renewals: a sample above the one before is a round.
    let mut await_round = || {
        let mut last = pttl();
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            assert!(Instant::now() < end, "no renewal round within 30 s");
            std::thread::sleep(Duration::from_millis(5));
            let now = pttl();
            if now > last {
                return;
            }
            last = now;
        }
    };
    await_round();
    let before = script_calls(c);
    let rounds = if settings.quick { 2 } else { 5 };
    for _ in 0..rounds {
        await_round();
    }
    let per_round = (script_calls(c) - before) as f64 / f64::from(rounds);
    let lost = guards.iter().filter(|g| g.is_lost()).count();
    fig.set("cluster_watchdog_locks", locks as f64);
    fig.set("cluster_watchdog_shards", shards as f64);
    fig.set("cluster_watchdog_evals_per_period", per_round);
    fig.set("cluster_watchdog_target", (locks / 100 + shards) as f64);
    fig.set("cluster_watchdog_lost", lost as f64);
    for g in guards {
        g.unlock().unwrap();
    }
}
