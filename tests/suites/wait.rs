//! Waiting: contention across threads and clients, wake-ups, and the subscription
//! bookkeeping; run against a single server (`tests/single/wait.rs`) and the cluster.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::support::deploy::Deployment;
use crate::support::raw::{await_numsub, lock_channel};
use crate::support::{eventually, unique};

/// testConcurrency_SingleInstance / MultiInstance: many threads of several clients,
/// with an in-process occupancy check.
pub(crate) fn threads_of_several_clients_never_overlap<D: Deployment>(d: &D) {
    let clients: Vec<_> = (0..3).map(|_| d.client()).collect();
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
pub(crate) fn wake_by_unlock<D: Deployment>(
    d: &D,
    meanwhile: impl FnOnce(&mut redis::Connection, &str),
) -> (Duration, Duration) {
    let holder = d.client();
    let waiter = d.client();
    let name = unique("wake");
    let mut raw = d.raw(&name);
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
pub(crate) fn a_waiter_wakes_on_release<D: Deployment>(d: &D) {
    let (_, after_unlock) = wake_by_unlock(d, |_, _| {});
    assert!(after_unlock < Duration::from_secs(15));
}

/// One "0" wakes one waiter: with three waiters of one client on one lock, each release
/// lets exactly one more through, and all three finish.
pub(crate) fn each_release_hands_the_lock_to_one_waiter<D: Deployment>(d: &D) {
    let client = d.client();
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
pub(crate) fn channels_are_unsubscribed_when_the_last_waiter_leaves<D: Deployment>(d: &D) {
    let client = d.client();
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
    for name in &names {
        let mut raw = d.raw(name);
        let channel = lock_channel(name);
        eventually(Duration::from_secs(10), "no channels left", || {
            // Plain and sharded subscriptions both (a cluster makes both), where the
            // server has sharded ones (not 6.2).
            let kinds: &[&str] = if crate::support::server().has_sharded_pubsub() {
                &["CHANNELS", "SHARDCHANNELS"]
            } else {
                &["CHANNELS"]
            };
            kinds.iter().all(|kind| {
                let channels: Vec<String> = redis::cmd("PUBSUB")
                    .arg(*kind)
                    .arg(&channel)
                    .query(&mut raw)
                    .unwrap();
                channels.is_empty()
            })
        });
    }
}

/// Subscribers of `channel` on `raw`'s node: sharded ones where the deployment
/// subscribes sharded (a cluster subscribes both kinds unless forced), else plain.
fn subscribers<D: Deployment>(d: &D, raw: &mut redis::Connection, channel: &str) -> i64 {
    let kind = if d.sharded() { "SHARDNUMSUB" } else { "NUMSUB" };
    let v: (String, i64) = redis::cmd("PUBSUB")
        .arg(kind)
        .arg(channel)
        .query(raw)
        .unwrap();
    v.1
}

/// 600 threads of one client arrive at once, each waiting on its own name (more
/// channels than the listener sends in one pipeline): every channel gets subscribed,
/// every waiter is woken by its release and acquires, and every channel is dropped
/// afterwards. The holder's explicit 600 s lease means a waiter whose wake-up was lost
/// would sleep past its 60 s wait and report failure.
pub(crate) fn many_waiters_on_distinct_names_all_subscribe_and_wake<D: Deployment>(d: &D) {
    const N: usize = 600;
    let holder = d.client();
    let waiting = d.client();
    let base = unique("many");
    let names: Vec<String> = (0..N).map(|i| format!("{base}:{i}")).collect();
    for name in &names {
        holder
            .get_lock(name.clone())
            .lock_with_lease(Duration::from_secs(600))
            .unwrap()
            .detach();
    }
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(N + 1));
    let (report, results) = std::sync::mpsc::channel();
    let threads: Vec<_> = names
        .iter()
        .map(|name| {
            let lock = waiting.get_lock(name.clone());
            let (barrier, report) = (barrier.clone(), report.clone());
            std::thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || {
                    barrier.wait();
                    let got = lock.try_lock_for(Duration::from_secs(60)).unwrap();
                    let acquired = got.is_some();
                    if let Some(guard) = got {
                        guard.unlock().unwrap();
                    }
                    report.send(acquired).unwrap();
                })
                .unwrap()
        })
        .collect();
    barrier.wait();
    for name in &names {
        let mut raw = d.raw(name);
        let channel = lock_channel(name);
        eventually(Duration::from_secs(30), "every channel subscribed", || {
            subscribers(d, &mut raw, &channel) == 1
        });
    }
    for name in &names {
        holder.get_lock(name.clone()).unlock().unwrap();
    }
    let acquired = (0..N)
        .filter(|_| results.recv_timeout(Duration::from_secs(120)).unwrap())
        .count();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        acquired, N,
        "every waiter is woken by its release and acquires"
    );
    for name in &names {
        let mut raw = d.raw(name);
        let channel = lock_channel(name);
        eventually(Duration::from_secs(30), "every channel dropped", || {
            subscribers(d, &mut raw, &channel) == 0
        });
    }
}

/// This suite's cases, listed once; each deployment binary stamps them all with one line
/// (`tests/single`, `tests/cluster`, `tests/sentinel`), through [`redmutex_harness::cases!`]
/// (`own on ...` or `shared(key) on ...`), with this file declared as `wait_suite` at its root.
macro_rules! wait_cases {
    ($($on:tt)*) => {
        redmutex_harness::cases!($($on)*; wait_suite;
            [
                threads_of_several_clients_never_overlap,
                a_waiter_wakes_on_release,
                each_release_hands_the_lock_to_one_waiter,
                channels_are_unsubscribed_when_the_last_waiter_leaves,
                many_waiters_on_distinct_names_all_subscribe_and_wake,
            ]
            alone [
            ]
        );
    };
}
pub(crate) use wait_cases;
