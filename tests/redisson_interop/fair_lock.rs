//! `RFairLock` against `RedissonFairLock`: one queue, arrival order across the languages
//! (scenario 11).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc;
use std::thread;
use std::time::Instant;

use redmutex::Client;
use serial_test::parallel;

use crate::peer::Peer;
use crate::support::raw::{
    exists, fair_queue_key, fair_timeouts_key, fair_wait_channel, hgetall, lrange, zcard,
};
use crate::support::{TestServer, eventually, unique};
use crate::{
    HANG, WAKE_BOUND, WATCHDOG_MS, assert_single_field, ms, run_versions, wait_subscribers,
};

/// Waiters queued behind the holder, half Java and half Rust.
const FAIR_WAITERS: usize = 6;

/// Fair lock: Java and Rust waiters queued alternately behind a holder acquire in arrival
/// order, each woken by the previous one's unlock. Twice: a Java holder with waiters in
/// `lock()`, then a Rust holder with waiters in timed `tryLock` (60 s slots).
#[test]
#[parallel]
fn scenario_11_fair_lock_arrival_order() {
    run_versions(11, fair_lock_arrival_order);
}

fn fair_lock_arrival_order(v: &str) {
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();
    for java_holds in [true, false] {
        fair_round(v, &peer, &client, &mut raw, java_holds);
    }
    peer.quit();
}

fn fair_round(
    v: &str,
    peer: &Peer,
    client: &Client,
    raw: &mut redis::Connection,
    java_holds: bool,
) {
    let holder = if java_holds { "java" } else { "rust" };
    let name = unique(&format!("s11-{holder}-holds"));
    let fair = client.get_fair_lock(name.clone());
    let queue = fair_queue_key(&name);
    let timeouts = fair_timeouts_key(&name);
    // From a thread that is not the holder: a fair try_lock never queues.
    let rust_try_lock = || {
        thread::scope(|s| {
            s.spawn(|| fair.try_lock().unwrap().is_some())
                .join()
                .unwrap()
        })
    };

    let guard = if java_holds {
        peer.ok("h", &format!("fair.lock {name}"));
        assert_eq!(
            hgetall(raw, &name),
            BTreeMap::from([(peer.field(&peer.thread_id("h")), "1".to_owned())])
        );
        None
    } else {
        let g = fair.lock().unwrap();
        assert_single_field(raw, &name, &format!("{}:", client.id()), "1");
        Some(g)
    };
    assert!(fair.is_locked().unwrap());
    assert!(peer.bool("x", &format!("fair.islocked {name}")));

    let (tx, rx) = mpsc::channel::<(String, Instant)>();
    let mut arrival = Vec::new();
    let mut java_fields = BTreeMap::new();
    let mut rust_waiters = Vec::new();
    thread::scope(|s| {
        for i in 0..FAIR_WAITERS {
            // Alternately, starting with the side that does not hold.
            let java = (i % 2 == 0) == java_holds;
            let tx = tx.clone();
            if java {
                let label = format!("java{i}");
                let thread = format!("fw{i}");
                java_fields.insert(i, peer.field(&peer.thread_id(&thread)));
                let (cmd, expect) = if java_holds {
                    (format!("fair.lock {name}"), "")
                } else {
                    (format!("fair.trylock {name} 60000"), "true")
                };
                let pending = peer.send(&thread, &cmd);
                let name = &name;
                let label2 = label.clone();
                s.spawn(move || {
                    let (reply, at) = pending.wait_timed(HANG);
                    assert_eq!(reply, Ok(expect.to_owned()), "{label2}: {cmd}");
                    let _ = tx.send((label2, at));
                    peer.ok(&thread, &format!("fair.unlock {name}"));
                });
                arrival.push(label);
            } else {
                let label = format!("rust{i}");
                let lock = client.get_fair_lock(name.clone());
                let label2 = label.clone();
                // Not scoped: a lock() that never returns must not hang the scope.
                rust_waiters.push(thread::spawn(move || -> redmutex::Result<bool> {
                    let guard = if java_holds {
                        lock.lock()?
                    } else {
                        match lock.try_lock_for(HANG)? {
                            Some(g) => g,
                            None => return Ok(false),
                        }
                    };
                    let _ = tx.send((label2, Instant::now()));
                    guard.unlock()?;
                    Ok(true)
                }));
                arrival.push(label);
            }
            eventually(HANG, &format!("waiter {i} in the fair queue"), || {
                lrange(raw, &queue).len() == i + 1
            });
        }

        // The queue lists the waiters in arrival order; each has a slot and listens on
        // its own channel.
        let entries = lrange(raw, &queue);
        for (i, entry) in entries.iter().enumerate() {
            match java_fields.get(&i) {
                Some(field) => assert_eq!(entry, field, "queue entry {i}: {entries:?}"),
                None => {
                    let thread = entry.strip_prefix(&format!("{}:", client.id()));
                    assert!(
                        thread.is_some_and(|t| t.parse::<u64>().is_ok()),
                        "queue entry {i} is not a rust owner: {entries:?}"
                    );
                }
            }
        }
        let distinct: BTreeSet<_> = entries.iter().collect();
        assert_eq!(distinct.len(), FAIR_WAITERS, "{entries:?}");
        assert_eq!(zcard(raw, &timeouts), FAIR_WAITERS as i64);
        for entry in &entries {
            wait_subscribers(raw, &fair_wait_channel(&name, entry), 1);
        }
        // Neither side's tryLock() jumps the queue or joins it.
        assert!(!rust_try_lock(), "rust try_lock took a held fair lock");
        assert!(!peer.bool("x", &format!("fair.trylock {name} -1")));
        assert_eq!(lrange(raw, &queue), entries);

        let released = Instant::now();
        match guard {
            Some(g) => g.unlock().unwrap(),
            None => {
                peer.ok("h", &format!("fair.unlock {name}"));
            }
        }
        let mut order = Vec::new();
        let mut gaps = Vec::new();
        let mut last = released;
        for n in 0..FAIR_WAITERS {
            let (label, at) = rx.recv_timeout(HANG).unwrap_or_else(|_| {
                panic!("only {n} of {FAIR_WAITERS} waiters acquired: {order:?}")
            });
            gaps.push(at.saturating_duration_since(last));
            last = at;
            order.push(label);
        }
        let total = last.duration_since(released);
        let max_gap = gaps.iter().max().copied().unwrap();
        println!(
            "scenario 11 version {v}: {holder} holder; order {order:?}; hand-offs {:?} ms; \
             all {FAIR_WAITERS} in {:.1} ms",
            gaps.iter()
                .map(|g| (ms(*g) * 10.0).round() / 10.0)
                .collect::<Vec<_>>(),
            ms(total)
        );
        assert_eq!(order, arrival, "acquisition order is not the arrival order");
        assert!(
            max_gap < WAKE_BOUND,
            "a hand-off took {max_gap:?}: not by the message"
        );
        for w in rust_waiters.drain(..) {
            assert!(w.join().expect("rust waiter panicked").unwrap());
        }
    });

    assert!(!exists(raw, &name), "lock left: {:?}", hgetall(raw, &name));
    assert!(
        !exists(raw, &queue),
        "queue left: {:?}",
        lrange(raw, &queue)
    );
    assert!(!exists(raw, &timeouts), "timeouts left");
    assert!(!fair.is_locked().unwrap());
    assert!(!peer.bool("x", &format!("fair.islocked {name}")));
}
