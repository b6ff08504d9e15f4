//! Sentinel rows: the local set of the test harness (`tests/harness/src/sentinel.rs`: one
//! master, two replicas, three sentinels). redmutex's uncontended cycle with replica
//! sync on (a `WAIT` for the replicas after each acquire and each release, Redisson's
//! `checkLockSyncedSlaves` and its unlock's `WAIT`, the defaults) and off, against two
//! floors measured in the same run, in interleaved slices: the raw acquire and release
//! scripts on one connection to the master, and the same with a `WAIT` after each. Then the
//! hand-off at 2 threads in floor round trips, and Redisson on the same set. Keys are
//! prefixed `sentinel_` (replica sync off: `sentinel_nosync_`, Redisson:
//! `sentinel_redisson_`, `sentinel_redisson_nosync_`).

use std::time::Instant;

use redmutex::{Client, Config};

use crate::cluster::{SLICE, ratios_to_redisson, slice_rate};
use crate::figures::{Figures, Sample};
use crate::handoff::{record_latencies, redmutex_handoff};
use crate::measure::{command_stats, percentile};
use crate::settings::Settings;
use crate::support::sentinel::{MASTER_NAME, SentinelSet, SentinelSpec};
use crate::uncontended::{raw_cycle_publishing, raw_cycle_then};

/// Progress phases [`sentinel`] announces.
pub(crate) fn phases(settings: &Settings) -> usize {
    if settings.sentinel {
        2 + 2 * usize::from(settings.java)
    } else {
        0
    }
}

/// All sentinel rows.
pub(crate) fn sentinel(settings: &Settings, fig: &mut Figures, samples: &mut Vec<Sample>) {
    crate::phase("sentinel: start, floors and uncontended");
    let started = Instant::now();
    let set = SentinelSet::start(SentinelSpec::default());
    fig.set("sentinel_start_s", started.elapsed().as_secs_f64());
    let synced = client(&set, true);
    let unsynced = client(&set, false);
    uncontended(&set, &synced, &unsynced, settings, fig);

    crate::phase("sentinel: hand-off, 2 threads");
    for (client, prefix) in [(&synced, "sentinel_"), (&unsynced, "sentinel_nosync_")] {
        handoff(client, prefix, settings, fig, samples);
    }
    drop((synced, unsynced));

    if settings.java {
        for (synced, prefix) in [
            (true, "sentinel_redisson_"),
            (false, "sentinel_redisson_nosync_"),
        ] {
            crate::phase(&format!(
                "sentinel: Java Redisson {}, checkLockSyncedSlaves {synced}",
                crate::REDISSON_VERSION
            ));
            let mut master = set.master().conn();
            let before = command_stats(&mut master);
            crate::redisson::topology(
                &set.redisson_yaml(),
                Some(synced),
                prefix,
                settings,
                fig,
                samples,
            );
            let after = command_stats(&mut master);
            fig.set(
                &format!("{prefix}waits_per_script"),
                waits_per_script(&before, &after),
            );
        }
        ratios_to_redisson(fig, "sentinel_", "sentinel_redisson_");
        ratios_to_redisson(fig, "sentinel_nosync_", "sentinel_redisson_nosync_");
    }
}

/// A client of the set with replica sync on or off, after acquires and releases.
fn client(set: &SentinelSet, sync: bool) -> Client {
    Client::new(
        Config::builder()
            .master_name(MASTER_NAME)
            .sentinel_addresses(set.sentinel_urls())
            .check_lock_synced_slaves(sync)
            .sync_releases(sync)
            .build(),
    )
    .unwrap()
}

/// `WAIT` calls per script call (`EVALSHA` + `EVAL`) between two `INFO commandstats`.
fn waits_per_script(
    before: &std::collections::BTreeMap<String, u64>,
    after: &std::collections::BTreeMap<String, u64>,
) -> f64 {
    let delta = |cmd: &str| {
        (after.get(cmd).copied().unwrap_or(0) - before.get(cmd).copied().unwrap_or(0)) as f64
    };
    delta("wait") / (delta("evalsha") + delta("eval"))
}

/// The master's `connected_slaves`.
fn replicas(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("replication").query(conn).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("connected_slaves:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// One thread, four sides alternating slice by slice in rotating order: the raw cycle,
/// the raw cycle with a `WAIT` (for every replica, the library's 1 s timeout) after the
/// acquire and after the release, and redmutex's lock+unlock with replica sync on and
/// off.
fn uncontended(
    set: &SentinelSet,
    synced: &Client,
    unsynced: &Client,
    settings: &Settings,
    fig: &mut Figures,
) {
    let master = set.master();
    let mut raw = master.conn();
    let mut raw_wait = master.conn();
    let n = replicas(&mut raw);
    fig.set("sentinel_replicas", n as f64);
    let mut cycle = raw_cycle_publishing("raw", "PUBLISH");
    let wait = move |conn: &mut redis::Connection| {
        let acked: u64 = redis::cmd("WAIT").arg(n).arg(1000).query(conn).unwrap();
        assert!(
            acked > 0 || n == 0,
            "no replica acknowledged the floor's write"
        );
    };
    let mut cycle_then_wait = raw_cycle_then("raw-wait", "PUBLISH", wait);
    let mut cycle_wait = move |conn: &mut redis::Connection, key: &str| {
        cycle_then_wait(conn, key);
        wait(conn);
    };
    let on = synced.get_lock("bench:sentinel:sync");
    let off = unsynced.get_lock("bench:sentinel:nosync");
    let (floor_key, wait_key) = ("bench:sentinel:floor", "bench:sentinel:floor-wait");
    // Warm all four: scripts loaded, connections open, the replica count read.
    for _ in 0..100 {
        cycle(&mut raw, floor_key);
        cycle_wait(&mut raw_wait, wait_key);
        on.lock().unwrap().unlock().unwrap();
        off.lock().unwrap().unlock().unwrap();
    }
    // What each side sends: WAITs per redmutex cycle, sync on and off.
    for (lock, prefix) in [(&on, "sentinel_"), (&off, "sentinel_nosync_")] {
        let before = command_stats(&mut raw);
        for _ in 0..200 {
            lock.lock().unwrap().unlock().unwrap();
        }
        let after = command_stats(&mut raw);
        // The two INFO calls are not scripts; 2 scripts per cycle.
        fig.set(
            &format!("{prefix}waits_per_cycle"),
            2.0 * waits_per_script(&before, &after),
        );
    }

    let slices = (2 * settings.span().as_millis() / (4 * SLICE.as_millis())).max(4) as usize;
    let mut rows: Vec<[f64; 4]> = Vec::with_capacity(slices);
    for i in 0..slices {
        let mut r = [0.0; 4];
        // Rotate the order so that no side always runs first.
        for k in 0..4 {
            let side = (i + k) % 4;
            r[side] = match side {
                0 => slice_rate(|| cycle(&mut raw, floor_key)),
                1 => slice_rate(|| cycle_wait(&mut raw_wait, wait_key)),
                2 => slice_rate(|| on.lock().unwrap().unlock().unwrap()),
                _ => slice_rate(|| off.lock().unwrap().unlock().unwrap()),
            };
        }
        rows.push(r);
    }
    let mean = |k: usize| rows.iter().map(|r| r[k]).sum::<f64>() / rows.len() as f64;
    // Time ratio side ÷ base: the base's rate over the side's, per slice, median.
    let median_ratio = |side: usize, base: usize| {
        let mut v: Vec<f64> = rows.iter().map(|r| r[base] / r[side]).collect();
        v.sort_by(f64::total_cmp);
        percentile(&v, 0.5)
    };
    let floor_rate = mean(0);
    fig.set("sentinel_floor_cycle_per_sec", floor_rate);
    fig.set("sentinel_floor_rtt_us", 1e6 / floor_rate / 2.0);
    fig.set("sentinel_floor_wait_cycle_us", 1e6 / mean(1));
    fig.set("sentinel_floor_wait_over_floor", median_ratio(1, 0));
    for (side, prefix) in [(2, "sentinel_"), (3, "sentinel_nosync_")] {
        fig.set(&format!("{prefix}uncontended_cycles_per_sec"), mean(side));
        fig.set(&format!("{prefix}uncontended_cycle_us"), 1e6 / mean(side));
        fig.set(
            &format!("{prefix}uncontended_cycle_over_floor"),
            median_ratio(side, 0),
        );
    }
    fig.set(
        "sentinel_uncontended_cycle_over_wait_floor",
        median_ratio(2, 1),
    );
}

/// Two threads of one client taking turns on one lock: hand-off latency in µs and in
/// the floor's round trips.
fn handoff(
    client: &Client,
    prefix: &str,
    settings: &Settings,
    fig: &mut Figures,
    samples: &mut Vec<Sample>,
) {
    let span = settings.handoff_span();
    let lat = redmutex_handoff(client, 2, span);
    let rtt = fig.get("sentinel_floor_rtt_us");
    for (q, p) in [("p50", 0.5), ("p99", 0.99)] {
        fig.set(
            &format!("{prefix}handoff_2t_{q}_rtt"),
            percentile(&lat.handoff, p) / rtt,
        );
    }
    let library = format!(
        "redmutex-{}",
        prefix.trim_end_matches('_').replace('_', "-")
    );
    record_latencies(fig, samples, prefix, &library, 2, span, lat);
}
