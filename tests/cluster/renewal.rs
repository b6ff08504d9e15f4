//! Renewals batched per master: a few script calls per renewal period for hundreds of
//! locks spread over every slot, where per-slot batches would need one call per lock.

use std::time::{Duration, Instant};

use serial_test::serial;

use crate::support::cluster;
use crate::support::deploy::Deployment;
use crate::support::raw::{calls, pttl};
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

/// 600 locks held under a 1.5 s watchdog (a renewal every 500 ms), watched over eight
/// renewal rounds (each seen as the rise of one lock's TTL): at most locks/100 +
/// masters calls per period (one period of slack for a round that straddles the first
/// or last rise), and every lock stays held.
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
    let probe = locks[0].name().to_owned();
    let mut raw = c.raw(&probe);
    let mut await_round = || crate::support::await_renewal("round", || pttl(&mut raw, &probe));
    await_round();
    let before = script_calls(c);
    let started = Instant::now();
    let rounds = 8;
    for _ in 0..rounds {
        await_round();
    }
    let spent = script_calls(c) - before;
    let periods = rounds + 1;
    let bound = periods * (600 / 100 + masters);
    println!(
        "{spent} script calls in {rounds} renewal rounds ({:?}) for 600 locks over {masters} \
         masters (bound {bound} for {periods} periods)",
        started.elapsed()
    );
    assert!(spent <= bound, "{spent} > {bound}");
    assert!(spent >= 600 / 100, "nothing renewed? {spent}");
    for g in guards {
        crate::support::watched::assert_kept_or_cautious(g.loss(), "a renewed hold");
        g.unlock().unwrap();
    }
}
