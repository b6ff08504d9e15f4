//! The fair lock: Redisson's `RedissonFairLockTest` checklist (protocol doc §10.2) where
//! it applies, and the queue/timeout layout of §3 checked with raw commands; run against a
//! single server (`tests/single/fair_lock.rs`) and the cluster.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redmutex::Error;

use crate::support::deploy::Deployment;
use crate::support::raw::{
    await_numsub, fair_queue, fair_queue_key, fair_slot_end, fair_timeouts, fair_timeouts_key,
    fair_wait_channel, now_ms, pttl,
};
use crate::support::{assert_waits_out, eventually, unique};

/// Waits until `n` waiters are queued for the fair lock `name`.
pub(crate) fn await_queued(raw: &mut redis::Connection, name: &str, n: usize) {
    eventually(Duration::from_secs(20), &format!("{n} queued"), || {
        fair_queue(raw, name).len() == n
    });
}

/// Nothing left of a fair lock's queue: no queued owner, no slot.
pub(crate) fn assert_no_queue(raw: &mut redis::Connection, name: &str) {
    assert!(fair_queue(raw, name).is_empty());
    assert!(fair_timeouts(raw, name).is_empty());
}

/// testGetHoldCount, testReentrancy, testLockUnlock, testIsHeldByCurrentThread,
/// testIsLocked: the hash is RLock's, one field per owner.
pub(crate) fn reentrant_holds_are_counted_in_the_lock_hash<D: Deployment>(d: &D) {
    let client = d.client();
    let lock = client.get_fair_lock(unique("fair"));
    let mut raw = d.raw(lock.name());
    assert!(!lock.is_locked().unwrap());
    assert_eq!(lock.hold_count().unwrap(), 0);
    let a = lock.lock().unwrap();
    let b = lock.try_lock().unwrap().expect("re-entry");
    assert_eq!(lock.hold_count().unwrap(), 2);
    assert!(lock.is_held_by_current_thread().unwrap());
    let fields: Vec<(String, u32)> = redis::cmd("HGETALL")
        .arg(lock.name())
        .query(&mut raw)
        .unwrap();
    assert_eq!(fields.len(), 1);
    assert!(fields[0].0.starts_with(client.id()), "{fields:?}");
    assert_eq!(fields[0].1, 2);
    std::thread::scope(|s| {
        s.spawn(|| {
            assert!(lock.is_locked().unwrap());
            assert!(!lock.is_held_by_current_thread().unwrap());
            assert!(lock.try_lock().unwrap().is_none());
            // testUnlockFail
            assert!(matches!(lock.unlock(), Err(Error::NotHeld { .. })));
        });
    });
    b.unlock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 1);
    a.unlock().unwrap();
    assert!(!lock.is_locked().unwrap());
    assert!(lock.remain_time_to_live().unwrap().is_none());
    assert!(fair_queue(&mut raw, lock.name()).is_empty());
}

/// testForceUnlock, and `delete` removes all three keys.
pub(crate) fn force_unlock_and_delete<D: Deployment>(d: &D) {
    let client = d.client();
    let lock = client.get_fair_lock(unique("fair"));
    let mut raw = d.raw(lock.name());
    let guard = lock.lock().unwrap();
    assert!(lock.force_unlock().unwrap());
    assert!(!lock.is_locked().unwrap());
    assert!(!client.get_fair_lock(lock.name()).force_unlock().unwrap());
    assert!(matches!(guard.unlock(), Err(Error::LockLost { .. })));

    lock.lock().unwrap().detach();
    let _: () = redis::pipe()
        .cmd("RPUSH")
        .arg(fair_queue_key(lock.name()))
        .arg("x:1")
        .cmd("ZADD")
        .arg(fair_timeouts_key(lock.name()))
        .arg(now_ms() + 60_000.0)
        .arg("x:1")
        .query(&mut raw)
        .unwrap();
    assert!(lock.delete().unwrap());
    let exists: i64 = redis::cmd("EXISTS")
        .arg(lock.name())
        .arg(fair_queue_key(lock.name()))
        .arg(fair_timeouts_key(lock.name()))
        .query(&mut raw)
        .unwrap();
    assert_eq!(exists, 0);
    assert!(!lock.delete().unwrap());
}

/// testTryLockNonDelayed: a zero-wait try succeeds; a competitor's short wait fails and
/// leaves no queue entry, so a zero-wait try succeeds right after the release.
pub(crate) fn a_short_try_leaves_nothing_behind<D: Deployment>(d: &D) {
    let client = d.client();
    let lock = client.get_fair_lock(unique("fair"));
    let mut raw = d.raw(lock.name());
    let guard = lock
        .try_lock_for(Duration::ZERO)
        .unwrap()
        .expect("free lock");
    std::thread::scope(|s| {
        s.spawn(|| {
            assert!(
                lock.try_lock_for(Duration::from_millis(200))
                    .unwrap()
                    .is_none()
            );
        });
    });
    assert!(fair_queue(&mut raw, lock.name()).is_empty());
    assert!(fair_timeouts(&mut raw, lock.name()).is_empty());
    guard.unlock().unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            let g = lock
                .try_lock_for(Duration::ZERO)
                .unwrap()
                .expect("no stale queue");
            g.unlock().unwrap();
        });
    });
}

/// testTryLockWait: held elsewhere, a bounded wait lasts its whole time, then gives up
/// and leaves the queue.
pub(crate) fn a_bounded_wait_lasts_its_time_then_leaves_the_queue<D: Deployment>(d: &D) {
    let holder = d.client();
    let waiter = d.client();
    let name = unique("fair");
    let mut raw = d.raw(&name);
    let held = holder.get_fair_lock(name.clone());
    let guard = held.lock().unwrap();
    let lock = waiter.get_fair_lock(name.clone());
    assert_waits_out(Duration::from_secs(1), |wait| {
        lock.try_lock_for(wait).unwrap().is_some()
    });
    assert_no_queue(&mut raw, &name);
    guard.unlock().unwrap();
}

/// testConcurrency_MultiInstance_Ordering and the brief's order check: 8 threads of two
/// clients, started 10 ms apart (each once the previous one is queued), acquire in
/// arrival order.
pub(crate) fn waiters_acquire_in_arrival_order<D: Deployment>(d: &D) {
    let clients = [d.client(), d.client()];
    let name = unique("fair");
    let mut raw = d.raw(&name);
    let first = clients[0].get_fair_lock(name.clone());
    let guard = first.lock().unwrap();
    let order = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for i in 0..8 {
            let (client, owned, order) = (&clients[i % 2], name.clone(), &order);
            s.spawn(move || {
                let lock = client.get_fair_lock(owned);
                let g = lock.lock().unwrap();
                order.lock().unwrap().push(i);
                g.unlock().unwrap();
            });
            std::thread::sleep(Duration::from_millis(10));
            await_queued(&mut raw, &name, i + 1);
        }
        // Each queued waiter has its own slot, one behind the other.
        let slots = fair_timeouts(&mut raw, &name);
        assert_eq!(slots.len(), 8);
        let queued = fair_queue(&mut raw, &name);
        let by_queue: Vec<String> = slots.iter().map(|(o, _)| o.clone()).collect();
        assert_eq!(by_queue, queued, "zset order is queue order");
        guard.unlock().unwrap();
    });
    assert_eq!(order.into_inner().unwrap(), (0..8).collect::<Vec<_>>());
    assert_no_queue(&mut raw, &name);
}

/// testLeaseTimeout: waiters with a short lease that never unlock still get the lock in
/// FIFO order, each when its predecessor's lease runs out.
pub(crate) fn expiring_leases_pass_the_lock_in_queue_order<D: Deployment>(d: &D) {
    let client = d.client();
    let name = unique("fair");
    let mut raw = d.raw(&name);
    let order = Mutex::new(Vec::new());
    let lease = Duration::from_millis(400);
    std::thread::scope(|s| {
        for i in 0..5 {
            let (client, owned, order) = (&client, name.clone(), &order);
            s.spawn(move || {
                let lock = client.get_fair_lock(owned);
                let g = lock
                    .try_lock_with_lease(Duration::from_secs(60), lease)
                    .unwrap()
                    .expect("acquired within the wait");
                order.lock().unwrap().push(i);
                g.detach(); // never unlocked: the lease ends it
            });
            eventually(Duration::from_secs(20), "thread took or queued", || {
                order.lock().unwrap().len() + fair_queue(&mut raw, &name).len() == i + 1
            });
        }
    });
    assert_eq!(order.into_inner().unwrap(), vec![0, 1, 2, 3, 4]);
}

/// The acquire-failed cleanup (§3.4): the waiter that gives up leaves list and zset, and
/// every waiter behind it moves up by the leaver's wait time.
pub(crate) fn a_waiter_that_gives_up_moves_the_queue_up<D: Deployment>(d: &D) {
    let clients = [d.client(), d.client(), d.client()];
    let name = unique("fair");
    let mut raw = d.raw(&name);
    let held = clients[0].get_fair_lock(name.clone());
    let guard = held.lock().unwrap();
    let gave_up = AtomicU64::new(0);
    std::thread::scope(|s| {
        // Waiter 1 waits long, waiter 2 briefly (and gives up), waiter 3 long.
        let waits = [60_000, 1_500, 60_000];
        for (i, wait) in waits.into_iter().enumerate() {
            let (client, owned, gave_up) = (&clients[i], name.clone(), &gave_up);
            s.spawn(move || {
                let lock = client.get_fair_lock(owned);
                match lock.try_lock_for(Duration::from_millis(wait)).unwrap() {
                    Some(g) => g.unlock().unwrap(),
                    None => {
                        gave_up.fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
            await_queued(&mut raw, &name, i + 1);
        }
        let owners = fair_queue(&mut raw, &name);
        let before: Vec<f64> = owners
            .iter()
            .map(|o| fair_slot_end(&mut raw, &name, o).unwrap())
            .collect();
        // Each slot starts where the previous one ends (§3.2 step 5).
        assert!(
            (before[1] - before[0] - 1_500.0).abs() < 200.0,
            "{before:?}"
        );
        assert!(
            (before[2] - before[1] - 60_000.0).abs() < 200.0,
            "{before:?}"
        );
        eventually(Duration::from_secs(30), "waiter 2 gave up", || {
            gave_up.load(Ordering::SeqCst) == 1
        });
        assert_eq!(
            fair_queue(&mut raw, &name),
            vec![owners[0].clone(), owners[2].clone()]
        );
        assert!(fair_slot_end(&mut raw, &name, &owners[1]).is_none());
        assert_eq!(fair_slot_end(&mut raw, &name, &owners[0]), Some(before[0]));
        let moved = before[2] - fair_slot_end(&mut raw, &name, &owners[2]).unwrap();
        assert!((moved - 1_500.0).abs() < 1.0, "moved up by {moved}");
        guard.unlock().unwrap();
    });
    assert_eq!(gave_up.load(Ordering::SeqCst), 1);
    assert!(fair_queue(&mut raw, &name).is_empty());
}

/// testExpire: a lease runs out, another thread takes the lock; the first guard then
/// reports the loss. Redisson's quirk stays reachable: `unlock()` on a missing fair lock
/// succeeds.
pub(crate) fn an_expired_lease_passes_the_lock_on<D: Deployment>(d: &D) {
    let client = d.client();
    let lock = client.get_fair_lock(unique("fair"));
    let started = Instant::now();
    let guard = lock.lock_with_lease(Duration::from_millis(800)).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            let g = lock.lock().unwrap();
            assert!(started.elapsed() >= Duration::from_millis(700));
            g.unlock().unwrap();
        });
    });
    assert!(guard.is_lost());
    assert!(matches!(guard.unlock(), Err(Error::LockLost { .. })));
    // The same situation through a detached hold: Redisson's unlock returns normally.
    lock.lock_with_lease(Duration::from_millis(300))
        .unwrap()
        .detach();
    eventually(Duration::from_secs(10), "lease ran out", || {
        !lock.is_locked().unwrap()
    });
    lock.unlock().unwrap();
}

/// The watchdog renews a fair hold like an RLock's, and stops at the release.
pub(crate) fn the_watchdog_renews_a_fair_hold<D: Deployment>(d: &D) {
    let client = d.client_with_watchdog(Duration::from_secs(1));
    let lock = client.get_fair_lock(unique("fair"));
    let mut raw = d.raw(lock.name());
    let guard = lock.lock().unwrap();
    assert_eq!(client.renewing_count(), 1);
    let end = Instant::now() + Duration::from_secs(3);
    while Instant::now() < end {
        let ttl = pttl(&mut raw, lock.name());
        assert!(ttl > 0, "lease ran out under the watchdog");
        std::thread::sleep(Duration::from_millis(100));
    }
    crate::support::watched::assert_kept_or_cautious(guard.loss(), "the fair hold");
    guard.unlock().unwrap();
    assert_eq!(client.renewing_count(), 0);
}

/// testConcurrency_MultiInstance: threads of three clients never overlap, and every
/// one of them gets its turns.
pub(crate) fn threads_of_several_clients_never_overlap<D: Deployment>(d: &D) {
    let clients: Vec<_> = (0..3).map(|_| d.client()).collect();
    let name = unique("fair");
    let mut raw = d.raw(&name);
    let inside = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    std::thread::scope(|s| {
        for client in &clients {
            for _ in 0..3 {
                let (name, inside, done) = (name.clone(), &inside, &done);
                s.spawn(move || {
                    let lock = client.get_fair_lock(name);
                    for _ in 0..15 {
                        let g = lock.lock().unwrap();
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "overlap");
                        std::thread::sleep(Duration::from_millis(1));
                        inside.fetch_sub(1, Ordering::SeqCst);
                        g.unlock().unwrap();
                        done.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
        }
    });
    assert_eq!(done.load(Ordering::SeqCst), 3 * 3 * 15);
    assert_no_queue(&mut raw, &name);
}

/// A waiter woken by its client's shutdown leaves the queue on its way out, so it does
/// not hold up the waiters of other clients for its whole slot.
pub(crate) fn a_waiter_stopped_by_shutdown_leaves_the_queue<D: Deployment>(d: &D) {
    let holder = d.client();
    let waiter = d.client();
    let name = unique("fair");
    let mut raw = d.raw(&name);
    let held = holder.get_fair_lock(name.clone());
    let guard = held.lock().unwrap();
    std::thread::scope(|s| {
        let w = s.spawn(|| waiter.get_fair_lock(name.clone()).lock().map(drop));
        await_queued(&mut raw, &name, 1);
        waiter.shutdown();
        assert!(matches!(w.join().unwrap(), Err(Error::Shutdown)));
    });
    assert_no_queue(&mut raw, &name);
    guard.unlock().unwrap();
}

/// A waiter that gives up while the lock is free passes the turn to the next waiter at
/// once (redmutex's addition to the acquire-failed script), instead of leaving it asleep
/// until its TTL-bounded retry.
pub(crate) fn giving_up_on_a_free_lock_wakes_the_next_waiter<D: Deployment>(d: &D) {
    let clients = [d.client(), d.client()];
    let name = unique("fair");
    let mut raw = d.raw(&name);
    // A holder nobody hears from, with a minute of lease: waiters sleep up to a minute.
    let _: () = redis::pipe()
        .cmd("HSET")
        .arg(&name)
        .arg("ghost:1")
        .arg(1)
        .cmd("PEXPIRE")
        .arg(&name)
        .arg(60_000)
        .query(&mut raw)
        .unwrap();
    let started = Instant::now();
    std::thread::scope(|s| {
        let first = s.spawn(|| {
            let lock = clients[0].get_fair_lock(name.clone());
            lock.try_lock_for(Duration::from_secs(5)).unwrap().is_none()
        });
        await_queued(&mut raw, &name, 1);
        let second = s.spawn(|| {
            let lock = clients[1].get_fair_lock(name.clone());
            let g = lock.lock().unwrap();
            g.unlock().unwrap();
            Instant::now()
        });
        await_queued(&mut raw, &name, 2);
        for owner in fair_queue(&mut raw, &name) {
            await_numsub(&mut raw, &fair_wait_channel(&name, &owner), 1);
        }
        // Time passing is the point: both waiters have retried after subscribing and now
        // sleep towards the ghost's minute of lease. Then the ghost's lock vanishes
        // without an unlock message, while the first waiter still waits.
        std::thread::sleep(Duration::from_secs(3).saturating_sub(started.elapsed()));
        let _: () = redis::cmd("DEL").arg(&name).query(&mut raw).unwrap();
        assert!(first.join().unwrap(), "the first waiter gave up");
        let gave_up = Instant::now();
        let acquired = second.join().unwrap();
        assert!(
            acquired.duration_since(gave_up) < Duration::from_secs(20),
            "woke by TTL, not by the give-up"
        );
    });
    assert_no_queue(&mut raw, &name);
}

/// This suite's cases, listed once; each deployment binary stamps them all with one line
/// (`tests/single`, `tests/cluster`, `tests/sentinel`), through [`redmutex_harness::cases!`]
/// (`own on ...` or `shared(key) on ...`), with this file declared as `fair_suite` at its root.
macro_rules! fair_lock_cases {
    ($($on:tt)*) => {
        redmutex_harness::cases!($($on)*; fair_suite;
            [
                reentrant_holds_are_counted_in_the_lock_hash,
                force_unlock_and_delete,
                a_short_try_leaves_nothing_behind,
                a_bounded_wait_lasts_its_time_then_leaves_the_queue,
                waiters_acquire_in_arrival_order,
                expiring_leases_pass_the_lock_in_queue_order,
                a_waiter_that_gives_up_moves_the_queue_up,
                an_expired_lease_passes_the_lock_on,
                the_watchdog_renews_a_fair_hold,
                threads_of_several_clients_never_overlap,
                a_waiter_stopped_by_shutdown_leaves_the_queue,
                giving_up_on_a_free_lock_wakes_the_next_waiter,
            ]
            alone [
            ]
        );
    };
}
pub(crate) use fair_lock_cases;
