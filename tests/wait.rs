//! Waiting: contention across threads, clients and processes, wake-ups, and the
//! subscription bookkeeping.

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use support::launch::Worker;
use support::raw::{await_numsub, lock_channel};
use support::{TestServer, eventually, redmutex_bin, report_field, unique};

/// Two processes × two clients × eight threads increment a counter with GET then SET
/// under one lock: the count is exact and no two critical sections overlap.
#[test]
fn mutual_exclusion_across_threads_clients_and_processes() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let lock = unique("mutex");
    let counter = unique("counter");
    let iterations = 40;
    let url = server.url();
    let worker = Worker {
        url: &url,
        lock: &lock,
        counter: &counter,
        clients: 2,
        threads: 8,
        iterations,
    };
    let children: Vec<_> = (0..2)
        .map(|_| worker.command(redmutex_bin()).spawn().unwrap())
        .collect();
    let mut overlaps = 0;
    for child in children {
        let out = child.wait_with_output().unwrap();
        let line = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "worker failed: {line}");
        overlaps += report_field(&line, "overlaps");
    }
    let count: u64 = redis::cmd("GET").arg(&counter).query(&mut raw).unwrap();
    assert_eq!(count, 2 * 2 * 8 * iterations);
    assert_eq!(overlaps, 0);
}

/// testConcurrency_SingleInstance / MultiInstance: many threads of several clients,
/// with an in-process occupancy check.
#[test]
fn threads_of_several_clients_never_overlap() {
    let server = TestServer::start();
    let clients: Vec<_> = (0..3).map(|_| server.client()).collect();
    let name = unique("mutex");
    let inside = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    std::thread::scope(|s| {
        for client in &clients {
            for _ in 0..4 {
                s.spawn(|| {
                    let lock = client.get_lock(name.clone());
                    for _ in 0..50 {
                        let g = lock.lock().unwrap();
                        assert_eq!(
                            inside.fetch_add(1, Ordering::SeqCst),
                            0,
                            "two holders at once"
                        );
                        std::hint::spin_loop();
                        inside.fetch_sub(1, Ordering::SeqCst);
                        g.unlock().unwrap();
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        }
    });
    assert_eq!(done.load(Ordering::Relaxed), 3 * 4 * 50);
}

/// A waiter of a second client blocks on a lock the first holds; once it is subscribed,
/// `meanwhile` runs (given the raw connection and the lock channel), then the holder
/// unlocks. Returns how long the waiter waited in all, and how long after the unlock it
/// held the lock.
fn wake_by_unlock(meanwhile: impl FnOnce(&mut redis::Connection, &str)) -> (Duration, Duration) {
    let server = TestServer::start();
    let mut raw = server.conn();
    let holder = server.client();
    let waiter = server.client();
    let name = unique("wake");
    let channel = lock_channel(&name);
    let lock = holder.get_lock(name.clone());
    let guard = lock.lock().unwrap();
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            let lock = waiter.get_lock(name.clone());
            let started = Instant::now();
            let g = lock
                .try_lock_for(Duration::from_secs(60))
                .unwrap()
                .expect("acquired");
            let at = Instant::now();
            g.unlock().unwrap();
            (started, at)
        });
        await_numsub(&mut raw, &channel, 1);
        meanwhile(&mut raw, &channel);
        let released = Instant::now();
        guard.unlock().unwrap();
        let (started, acquired) = w.join().unwrap();
        (
            acquired.duration_since(started),
            acquired.duration_since(released),
        )
    })
}

/// A waiter wakes on the holder's unlock, not on its 30 s lease.
#[test]
fn a_waiter_wakes_on_release() {
    let (_, after_unlock) = wake_by_unlock(|_, _| {});
    assert!(after_unlock < Duration::from_secs(15));
}

/// One "0" wakes one waiter: with three waiters of one client on one lock, each release
/// lets exactly one more through, and all three finish.
#[test]
fn each_release_hands_the_lock_to_one_waiter() {
    let server = TestServer::start();
    let client = server.client();
    let name = unique("wake");
    let lock = client.get_lock(name.clone());
    let guard = lock.lock().unwrap();
    let order = parking_lot_free_log();
    std::thread::scope(|s| {
        for i in 0..3 {
            let (client, name, order) = (&client, name.clone(), &order);
            s.spawn(move || {
                let lock = client.get_lock(name);
                let g = lock
                    .try_lock_for(Duration::from_secs(60))
                    .unwrap()
                    .expect("acquired");
                order.lock().unwrap().push(i);
                g.unlock().unwrap();
            });
        }
        guard.unlock().unwrap();
    });
    let mut got = order.into_inner().unwrap();
    got.sort_unstable();
    assert_eq!(got, vec![0, 1, 2]);
}

fn parking_lot_free_log() -> std::sync::Mutex<Vec<i32>> {
    std::sync::Mutex::new(Vec::new())
}

/// testSubscriptionsPerConnection: many lock/unlock tasks over 5 names; afterwards no
/// channel stays subscribed.
#[test]
fn channels_are_unsubscribed_when_the_last_waiter_leaves() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client();
    let names: Vec<String> = (0..5).map(|_| unique("subs")).collect();
    std::thread::scope(|s| {
        for t in 0..8 {
            let (client, names) = (&client, &names);
            s.spawn(move || {
                for i in 0..100 {
                    let lock = client.get_lock(names[(t + i) % names.len()].clone());
                    lock.lock().unwrap().unlock().unwrap();
                }
            });
        }
    });
    eventually(Duration::from_secs(10), "no channels left", || {
        let channels: Vec<String> = redis::cmd("PUBSUB")
            .arg("CHANNELS")
            .query(&mut raw)
            .unwrap();
        channels.is_empty()
    });
}

/// A waiter whose pub/sub connection is killed resubscribes and still wakes on the
/// release, long before the holder's TTL.
#[test]
fn a_killed_pubsub_connection_is_rebuilt() {
    let (waited, _) = wake_by_unlock(|raw, channel| {
        let killed: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("pubsub")
            .query(raw)
            .unwrap();
        assert!(killed >= 1);
        await_numsub(raw, channel, 1);
    });
    assert!(waited < Duration::from_secs(20), "woke by TTL: {waited:?}");
}
