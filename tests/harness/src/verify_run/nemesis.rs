//! The nemeses beyond SIGSTOP and the fault proxy: server restart, `CLIENT PAUSE`,
//! pub/sub kills, `SCRIPT FLUSH`, CPU starvation, and the Sentinel and Cluster failovers,
//! master kills and slot migration. Each writes its start and end into the cell's
//! nemesis log.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::json;

use super::topology::{Shared, Topo};
use super::{Log, Rng};
use crate::cluster::{self, Failover};
use crate::server::RedisServer;

/// Restarts the single server in place (SIGKILL, then the same port, directory and
/// arguments), recording the crash's start and the moment it answers again.
///
/// `fault` is `restart` (the cell's server fsyncs every write, so the crash keeps every
/// acknowledged lock) or `restart_volatile` (no persistence: the server comes back
/// empty, every live lock forgotten).
pub(super) fn restart_single(
    server: &RefCell<RedisServer>,
    fault: &str,
    log: &mut Log<'_>,
) -> Result<(), String> {
    let pid = server.borrow().pid();
    log.record(fault, "invoke", json!({"pid": pid}));
    server.borrow_mut().restart()?;
    log.record(fault, "ok", json!({"pid": server.borrow().pid()}));
    Ok(())
}

/// Keeps `threads` threads spinning for `d`.
fn spin(threads: usize, d: Duration) {
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    std::thread::sleep(d);
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        let _ = h.join();
    }
}

/// `CLIENT PAUSE <100 ms..lease> WRITE` on the lock's node: writes and scripts wait while
/// the lease clock in Redis keeps running.
pub(super) fn pause(topo: &Topo<'_>, name: &str, rng: &mut Rng, lease_ms: u64, log: &mut Log<'_>) {
    let ms = 100 + rng.below(lease_ms.max(101) - 100);
    let Ok(mut conn) = topo.lock_node(name) else {
        return;
    };
    log.record("pause", "invoke", json!({"ms": ms}));
    let r: redis::RedisResult<()> = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(ms)
        .arg("WRITE")
        .query(&mut conn);
    std::thread::sleep(Duration::from_millis(ms));
    log.record(
        "pause",
        "ok",
        json!({"error": r.err().map(|e| e.to_string())}),
    );
}

/// `CLIENT KILL TYPE pubsub` on every data node: waiters miss the unlock message they
/// wait for and must fall back to the TTL they saw; the library must resubscribe.
pub(super) fn pubsub_kill(topo: &Topo<'_>, log: &mut Log<'_>) {
    log.record("pubsub_kill", "invoke", json!({}));
    let mut killed = 0i64;
    for port in topo.data_ports() {
        if let Ok(mut conn) = crate::supervised::connect(port) {
            killed += redis::cmd("CLIENT")
                .arg("KILL")
                .arg("TYPE")
                .arg("pubsub")
                .query::<i64>(&mut conn)
                .unwrap_or(0);
        }
    }
    log.record("pubsub_kill", "ok", json!({"killed": killed}));
}

/// `SCRIPT FLUSH` on every data node: the next `EVALSHA` of every script meets `NOSCRIPT`.
pub(super) fn script_flush(topo: &Topo<'_>, log: &mut Log<'_>) {
    log.record("script_flush", "invoke", json!({}));
    for port in topo.data_ports() {
        if let Ok(mut conn) = crate::supervised::connect(port) {
            let _: redis::RedisResult<()> = redis::cmd("SCRIPT").arg("FLUSH").query(&mut conn);
        }
    }
    log.record("script_flush", "ok", json!({}));
}

/// Busy threads, two per core, for 0.3 s up to 0.3 s plus twice the lease: the workers'
/// watchdog threads and the holders themselves get a share of the CPU only.
pub(super) fn starve(rng: &mut Rng, lease_ms: u64, log: &mut Log<'_>) {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let ms = 300 + rng.below(lease_ms * 2);
    log.record("starve", "invoke", json!({"threads": cores * 2, "ms": ms}));
    spin(cores * 2, Duration::from_millis(ms));
    log.record("starve", "ok", json!({}));
}

/// `SENTINEL FAILOVER`, or `CLUSTER FAILOVER` on the replica of the lock's master; each
/// until the new master is agreed on, then the set is healed (the old master re-linked).
///
/// The Sentinel one is coordinated as an operator's planned failover is: the old
/// master's writes are paused (`CLIENT PAUSE WRITE`) before `SENTINEL FAILOVER` and
/// until it follows the new master. Sentinel itself pauses nothing: the replaced master
/// keeps taking writes until it is told to follow (seconds later), and a client that
/// has not heard of the switch yet acquires there while others acquire on the new
/// master, writes that the old master's resync then throws away. That split brain is
/// Redis's, not the library's to prevent; [`failover_raw`] leaves it open, to show it.
pub(super) fn failover(topo: &Topo<'_>, name: &str, log: &mut Log<'_>) {
    match topo {
        Topo::Shared(Shared::Sentinel(s)) => {
            let old = s.master();
            let mut conn = old.conn();
            // Longer than any failover here; unpaused as soon as it follows the new one.
            let paused: redis::RedisResult<()> = redis::cmd("CLIENT")
                .arg("PAUSE")
                .arg(30_000)
                .arg("WRITE")
                .query(&mut conn);
            log.record(
                "sentinel-failover",
                "invoke",
                json!({"from": old.port, "paused": paused.is_ok()}),
            );
            let to = s.failover().port;
            let demoted: redis::RedisResult<()> = redis::cmd("REPLICAOF")
                .arg("127.0.0.1")
                .arg(to)
                .query(&mut conn);
            let _: redis::RedisResult<()> = redis::cmd("CLIENT").arg("UNPAUSE").query(&mut conn);
            log.record(
                "sentinel-failover",
                "ok",
                json!({"to": to, "error": demoted.err().map(|e| e.to_string())}),
            );
            s.heal();
        }
        Topo::Shared(Shared::Cluster(cl)) => {
            let master = cl.master_for_key(name);
            let replica = cl.replica_of(&master);
            log.record(
                "cluster-failover",
                "invoke",
                json!({"from": master.port, "to": replica.port}),
            );
            cl.failover(&replica, Failover::Default);
            log.record("cluster-failover", "ok", json!({}));
            cl.heal();
        }
        Topo::Single { .. } => {}
    }
}

/// SIGKILLs the lock's master until a replica is promoted; healing then brings the old
/// master back as a replica of the new one.
pub(super) fn kill_master(topo: &Topo<'_>, name: &str, log: &mut Log<'_>) {
    match topo {
        Topo::Shared(Shared::Sentinel(s)) => {
            let from = s.master();
            log.record(
                "kill_master",
                "invoke",
                json!({"port": from.port, "pid": s.pid(&from)}),
            );
            let to = s.kill_master().port;
            log.record("kill_master", "ok", json!({"to": to}));
            s.heal();
        }
        Topo::Shared(Shared::Cluster(cl)) => {
            let master = cl.master_for_key(name);
            log.record(
                "kill_master",
                "invoke",
                json!({"port": master.port, "pid": cl.pid(&master)}),
            );
            let to = cl.kill_master(&master).port;
            log.record("kill_master", "ok", json!({"to": to}));
            cl.heal();
        }
        Topo::Single { .. } => {}
    }
}

/// Moves the lock's slot, with its keys, to another master.
pub(super) fn migrate(topo: &Topo<'_>, name: &str, rng: &mut Rng, log: &mut Log<'_>) {
    let Topo::Shared(Shared::Cluster(cl)) = topo else {
        return;
    };
    let slot = cluster::key_slot(name);
    let from = cl.master_for_slot(slot);
    let others: Vec<_> = cl
        .masters()
        .into_iter()
        .filter(|m| m.id != from.id)
        .collect();
    let to = &others[rng.below(others.len() as u64) as usize];
    log.record(
        "migrate",
        "invoke",
        json!({"slot": slot, "from": from.port, "to": to.port}),
    );
    cl.migrate_slot(slot, to);
    log.record("migrate", "ok", json!({}));
}

/// `SENTINEL FAILOVER` as Sentinel does it, with no pause: the replaced master takes
/// writes until it is demoted (see [`failover`]). Expected to show violations; not in
/// the quick run.
pub(super) fn failover_raw(topo: &Topo<'_>, log: &mut Log<'_>) {
    let Topo::Shared(Shared::Sentinel(s)) = topo else {
        return;
    };
    let from = s.master().port;
    log.record("sentinel-failover-raw", "invoke", json!({"from": from}));
    let to = s.failover().port;
    log.record("sentinel-failover-raw", "ok", json!({"to": to}));
    s.heal();
}

/// SIGSTOP the replicas of the lock's master for 0.3–1.5 s, then SIGCONT: the
/// replica-sync nemesis. The master keeps serving, but no replica acknowledges, so every
/// acquire's `WAIT` times out and the acquire is undone as unsynced and tried again, and
/// releases go unconfirmed. Shorter than the sentinels' `down-after-milliseconds` and the
/// cluster's node timeout (2 s each), so no failover follows: the fault is replication
/// alone.
pub(super) fn freeze_replicas(topo: &Topo<'_>, name: &str, rng: &mut Rng, log: &mut Log<'_>) {
    let ms = 300 + rng.below(1200);
    // The replicas' ports, and a switch that stops (true) or resumes (false) them.
    type Switch<'a> = Box<dyn Fn(bool) + 'a>;
    let (ports, switch): (Vec<u16>, Switch<'_>) = match topo {
        Topo::Shared(Shared::Sentinel(s)) => {
            let master = s.master();
            // By port, not by role: a stopped node reports no role.
            let replicas: Vec<_> = s
                .data_nodes()
                .into_iter()
                .filter(|n| n.port != master.port)
                .collect();
            let ports = replicas.iter().map(|n| n.port).collect();
            let switch = move |stop: bool| {
                for n in &replicas {
                    if stop { s.stop(n) } else { s.cont(n) }
                }
            };
            (ports, Box::new(switch))
        }
        Topo::Shared(Shared::Cluster(c)) => {
            let master = c.master_for_key(name);
            let replicas: Vec<_> = c
                .replicas()
                .into_iter()
                .filter(|r| {
                    matches!(&r.role, cluster::Role::Replica { master_id } if *master_id == master.id)
                })
                .collect();
            let ports = replicas.iter().map(|n| n.port).collect();
            let switch = move |stop: bool| {
                for n in &replicas {
                    if stop { c.stop(n) } else { c.cont(n) }
                }
            };
            (ports, Box::new(switch))
        }
        Topo::Single { .. } => return,
    };
    log.record(
        "freeze_replicas",
        "invoke",
        json!({"ms": ms, "replicas": ports}),
    );
    switch(true);
    std::thread::sleep(Duration::from_millis(ms));
    switch(false);
    log.record("freeze_replicas", "ok", json!({}));
}
