//! Renewals batched per master: a few script calls per renewal period for hundreds of
//! locks spread over every slot, where per-slot batches would need one call per lock.

use std::time::{Duration, Instant};

use serial_test::serial;

use crate::support::cluster;
use crate::support::deploy::Deployment;
use crate::support::raw::calls;
use crate::support::unique;

/// Script calls (`EVALSHA` and `EVAL`) all masters ran so far.
fn script_calls(c: &cluster::Cluster) -> u64 {
    c.masters()
        .iter()
        .map(|m| {
            let mut conn = m.conn();
            calls(&mut conn, "evalsha") + calls(&mut conn, "eval")
        })
        .sum()
}

/// 600 locks held under a 1.5 s watchdog (a renewal every 500 ms) over 4 s: at most
/// locks/100 + masters calls per period, and every lock stays held.
#[test]
#[serial(cluster)]
fn renewals_cost_about_locks_per_100_plus_masters_calls_per_period() {
    let c = cluster::shared();
    let masters = c.masters().len() as u64;
    let client = c.client_with(|b| b.lock_watchdog_timeout(Duration::from_millis(1500)));
    let locks: Vec<_> = (0..600)
        .map(|i| client.get_lock(format!("{}:{i}", unique("renew"))))
        .collect();
    let guards: Vec<_> = locks.iter().map(|l| l.lock().unwrap()).collect();
    let before = script_calls(c);
    let started = Instant::now();
    // Time passing is the measurement.
    std::thread::sleep(Duration::from_secs(4));
    let spent = script_calls(c) - before;
    let periods = started.elapsed().as_millis() as u64 / 500 + 1;
    let bound = periods * (600 / 100 + masters);
    println!(
        "{spent} script calls in {periods} renewal periods for 600 locks over {masters} masters (bound {bound})"
    );
    assert!(spent <= bound, "{spent} > {bound}");
    assert!(spent >= 600 / 100, "nothing renewed? {spent}");
    for g in guards {
        assert!(!g.is_lost());
        g.unlock().unwrap();
    }
}
