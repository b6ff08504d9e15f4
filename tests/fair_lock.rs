//! The fair lock: Redisson's `RedissonFairLockTest` checklist (protocol doc §10.2) where
//! it applies, and the queue/timeout layout of §3 checked with raw commands.

mod support;

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redmutex::{Client, Error, RFairLock};
use support::raw::{
    await_numsub, fair_queue, fair_queue_key, fair_slot_end, fair_timeouts, fair_timeouts_key,
    fair_wait_channel, lock_channel, now_ms, numsub, pttl,
};
use support::{TestServer, assert_waits_out, eventually, tap_pattern, unique};

/// Waits until `n` waiters are queued for the fair lock `name`.
fn await_queued(raw: &mut redis::Connection, name: &str, n: usize) {
    eventually(Duration::from_secs(20), &format!("{n} queued"), || {
        fair_queue(raw, name).len() == n
    });
}

/// Nothing left of a fair lock's queue: no queued owner, no slot.
fn assert_no_queue(raw: &mut redis::Connection, name: &str) {
    assert!(fair_queue(raw, name).is_empty());
    assert!(fair_timeouts(raw, name).is_empty());
}

/// A waiter of `waiter`, running `wait` on the fair lock, queues behind a holder with a
/// 30 s lease: its queue entry is its own, and its slot ends the lease plus `slot` after
/// it queued (§3.2 step 5).
fn assert_slot_after_lease(
    server: &TestServer,
    waiter: &Client,
    slot: Duration,
    wait: impl FnOnce(&RFairLock) + Send,
) {
    let mut raw = server.conn();
    let holder = server.client();
    let name = unique("fair");
    let held = holder.get_fair_lock(name.clone());
    let guard = held.lock_with_lease(Duration::from_secs(30)).unwrap();
    let ends = 30_000.0 + slot.as_millis() as f64;
    std::thread::scope(|s| {
        let before = now_ms();
        s.spawn(|| wait(&waiter.get_fair_lock(name.clone())));
        await_queued(&mut raw, &name, 1);
        let after = now_ms();
        let owner = &fair_queue(&mut raw, &name)[0];
        assert!(owner.starts_with(waiter.id()), "{owner}");
        let slot_end = fair_slot_end(&mut raw, &name, owner).unwrap();
        assert!(slot_end <= after + ends, "{slot_end} vs {after}");
        assert!(
            slot_end >= before + ends - 5_000.0,
            "{slot_end} vs {before}"
        );
        guard.unlock().unwrap();
    });
}

/// testGetHoldCount, testReentrancy, testLockUnlock, testIsHeldByCurrentThread,
/// testIsLocked: the hash is RLock's, one field per owner.
#[test]
fn reentrant_holds_are_counted_in_the_lock_hash() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client();
    let lock = client.get_fair_lock(unique("fair"));
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
#[test]
fn force_unlock_and_delete() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client();
    let lock = client.get_fair_lock(unique("fair"));
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
#[test]
fn a_short_try_leaves_nothing_behind() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client();
    let lock = client.get_fair_lock(unique("fair"));
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
#[test]
fn a_bounded_wait_lasts_its_time_then_leaves_the_queue() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let holder = server.client();
    let waiter = server.client();
    let name = unique("fair");
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
#[test]
fn waiters_acquire_in_arrival_order() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let clients = [server.client(), server.client()];
    let name = unique("fair");
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
#[test]
fn expiring_leases_pass_the_lock_in_queue_order() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client();
    let name = unique("fair");
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
#[test]
fn a_waiter_that_gives_up_moves_the_queue_up() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let clients = [server.client(), server.client(), server.client()];
    let name = unique("fair");
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

/// The wire layout of a queued waiter (§3.2 step 5): its slot ends the lock's TTL plus
/// its wait time from now.
#[test]
fn a_queued_waiter_gets_a_slot_after_the_lease() {
    let server = TestServer::start();
    let waiter = server.client();
    assert_slot_after_lease(&server, &waiter, Duration::from_secs(20), |lock| {
        let g = lock.try_lock_for(Duration::from_secs(20)).unwrap().unwrap();
        g.unlock().unwrap();
    });
}

/// Unlock notifies only the next waiter, on its own channel (§3.5), and the general lock
/// channel stays silent.
#[test]
fn unlock_tells_only_the_next_waiter_on_its_own_channel() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let holder = server.client();
    let waiters = [server.client(), server.client()];
    let name = unique("fair");
    let held = holder.get_fair_lock(name.clone());
    let guard = held.lock().unwrap();
    let channel = lock_channel(&name);
    let done = AtomicU64::new(0);
    std::thread::scope(|s| {
        for (i, client) in waiters.iter().enumerate() {
            let (owned, done) = (name.clone(), &done);
            s.spawn(move || {
                let lock = client.get_fair_lock(owned);
                let g = lock.lock().unwrap();
                // Hold until the test has seen the first hand-over.
                while done.load(Ordering::SeqCst) == 0 && i == 0 {
                    std::thread::sleep(Duration::from_millis(10));
                }
                g.unlock().unwrap();
            });
            await_queued(&mut raw, &name, i + 1);
        }
        let owners = fair_queue(&mut raw, &name);
        for owner in &owners {
            await_numsub(&mut raw, &fair_wait_channel(&name, owner), 1);
        }
        assert_eq!(
            numsub(&mut raw, &channel),
            0,
            "fair waiters use their own channel"
        );
        let ((), messages) = tap_pattern(&server, &format!("{channel}*"), || {
            guard.unlock().unwrap();
            await_queued(&mut raw, &name, 1);
        });
        assert_eq!(
            messages,
            vec![(fair_wait_channel(&name, &owners[0]), "0".to_owned())]
        );
        done.store(1, Ordering::SeqCst);
    });
    assert!(fair_queue(&mut raw, &name).is_empty());
}

/// A crashed waiter (its queue entry left behind, nobody listening) holds the queue up
/// only until its slot ends; then the next live waiter gets the lock and the stale entry
/// is purged.
#[test]
fn a_crashed_waiters_slot_is_purged_after_its_timeout() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let holder = server.client();
    let waiter = server.client();
    let name = unique("fair");
    let held = holder.get_fair_lock(name.clone());
    let guard = held.lock().unwrap();
    // What a Redisson waiter leaves when its process dies in the queue: an entry whose
    // slot ends in 1.5 s.
    let dead = "00000000-dead-dead-dead-000000000000:1";
    let slot_end = now_ms() + 1_500.0;
    let _: () = redis::pipe()
        .cmd("ZADD")
        .arg(fair_timeouts_key(&name))
        .arg(slot_end)
        .arg(dead)
        .cmd("RPUSH")
        .arg(fair_queue_key(&name))
        .arg(dead)
        .query(&mut raw)
        .unwrap();
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            let lock = waiter.get_fair_lock(name.clone());
            let g = lock.try_lock_for(Duration::from_secs(60)).unwrap().unwrap();
            let at = now_ms();
            g.unlock().unwrap();
            at
        });
        await_queued(&mut raw, &name, 2);
        // The release tells the dead head, nobody else.
        let ((), messages) = tap_pattern(&server, &format!("{}*", lock_channel(&name)), || {
            guard.unlock().unwrap();
        });
        assert_eq!(
            messages,
            vec![(fair_wait_channel(&name, dead), "0".to_owned())]
        );
        let acquired_at = w.join().unwrap();
        assert!(
            acquired_at >= slot_end - 50.0,
            "took the lock {} ms before the dead slot ended",
            slot_end - acquired_at
        );
    });
    assert_no_queue(&mut raw, &name);
    // With only the lock left, a plain try works again (no stale queue).
    assert!(holder.get_fair_lock(name).try_lock().unwrap().is_some());
}

/// A stale head also stops `try_lock()` (it never queues) until its slot ends, and the
/// first script after that purges it.
#[test]
fn try_lock_purges_a_stale_head_once_its_slot_ended() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client();
    let name = unique("fair");
    let dead = "dead:7";
    let _: () = redis::pipe()
        .cmd("ZADD")
        .arg(fair_timeouts_key(&name))
        .arg(now_ms() + 700.0)
        .arg(dead)
        .cmd("RPUSH")
        .arg(fair_queue_key(&name))
        .arg(dead)
        .query(&mut raw)
        .unwrap();
    let lock = client.get_fair_lock(name.clone());
    assert!(lock.try_lock().unwrap().is_none(), "the dead head is first");
    assert_eq!(
        fair_queue(&mut raw, &name),
        vec![dead.to_owned()],
        "try_lock never queues"
    );
    std::thread::sleep(Duration::from_millis(800)); // the slot ending is the point
    let g = lock.try_lock().unwrap().expect("stale head purged");
    assert_no_queue(&mut raw, &name);
    g.unlock().unwrap();
}

/// testExpire: a lease runs out, another thread takes the lock; the first guard then
/// reports the loss. Redisson's quirk stays reachable: `unlock()` on a missing fair lock
/// succeeds.
#[test]
fn an_expired_lease_passes_the_lock_on() {
    let server = TestServer::start();
    let client = server.client();
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

/// testAutoExpire: a client that locks under the watchdog and shuts down leaves a lock
/// that expires within its watchdog timeout.
#[test]
fn a_shut_down_holders_lock_expires() {
    let server = TestServer::start();
    let holder = server.client_with_watchdog(Duration::from_secs(1));
    let other = server.client();
    let name = unique("fair");
    holder.get_fair_lock(name.clone()).lock().unwrap().detach();
    holder.shutdown();
    let lock = other.get_fair_lock(name);
    assert!(lock.is_locked().unwrap());
    eventually(Duration::from_secs(5), "lock expired", || {
        !lock.is_locked().unwrap()
    });
}

/// The watchdog renews a fair hold like an RLock's, and stops at the release.
#[test]
fn the_watchdog_renews_a_fair_hold() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client_with_watchdog(Duration::from_secs(1));
    let lock = client.get_fair_lock(unique("fair"));
    let guard = lock.lock().unwrap();
    assert_eq!(client.renewing_count(), 1);
    let end = Instant::now() + Duration::from_secs(3);
    while Instant::now() < end {
        let ttl = pttl(&mut raw, lock.name());
        assert!(ttl > 0, "lease ran out under the watchdog");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!guard.is_lost());
    guard.unlock().unwrap();
    assert_eq!(client.renewing_count(), 0);
}

/// testConcurrency_MultiInstance: threads of three clients never overlap, and every
/// one of them gets its turns.
#[test]
fn threads_of_several_clients_never_overlap() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let clients: Vec<_> = (0..3).map(|_| server.client()).collect();
    let name = unique("fair");
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
#[test]
fn a_waiter_stopped_by_shutdown_leaves_the_queue() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let holder = server.client();
    let waiter = server.client();
    let name = unique("fair");
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
#[test]
fn giving_up_on_a_free_lock_wakes_the_next_waiter() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let clients = [server.client(), server.client()];
    let name = unique("fair");
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

/// A `lock()` waiter's slot lasts the client's `fair_lock_wait_timeout` past the holder's
/// lease (Redisson's `fairLockWaitTimeout`), not the 5-minute default.
#[test]
fn the_client_fair_lock_wait_timeout_sizes_the_queue_slot() {
    let server = TestServer::start();
    let waiter = server.client_with(|b| b.fair_lock_wait_timeout(Duration::from_secs(7)));
    assert_slot_after_lease(&server, &waiter, Duration::from_secs(7), |lock| {
        lock.lock().unwrap().unlock().unwrap();
    });
}

/// RedissonFairLockTest.testAcquireFailedNotCalledOnRedisTimeout: a waiter's timed
/// try_lock during CLIENT PAUSE WRITE neither fails nor leaves its queue entry behind
/// once the pause is over.
#[test]
fn a_write_pause_neither_fails_a_waiter_nor_leaves_the_queue_dirty() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let holder = server.client();
    let waiter = server.client();
    let name = unique("fair");
    let held = holder.get_fair_lock(name.clone());
    let guard = held.lock_with_lease(Duration::from_secs(1)).unwrap();
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(1500)
        .arg("WRITE")
        .query(&mut raw)
        .unwrap();
    let lock = waiter.get_fair_lock(name.clone());
    let got = lock
        .try_lock_with_lease(Duration::from_secs(60), Duration::from_secs(1))
        .unwrap();
    assert!(
        got.is_some(),
        "the waiter should get the lock once its holder's lease ends"
    );
    drop(got);
    drop(guard);
    eventually(Duration::from_secs(10), "queue and timeouts empty", || {
        fair_queue(&mut raw, &name).is_empty() && fair_timeouts(&mut raw, &name).is_empty()
    });
}
