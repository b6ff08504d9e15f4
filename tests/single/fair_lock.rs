//! The fair lock suite (`tests/suites/fair_lock.rs`) against a single redis-server, plus
//! the slot layout, channel and purge cases checked on one server.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::fair_suite::{assert_no_queue, await_queued};
use crate::support::raw::{
    await_numsub, fair_queue, fair_queue_key, fair_slot_end, fair_timeouts, fair_timeouts_key,
    fair_wait_channel, lock_channel, now_ms, numsub,
};
use crate::support::{TestServer, eventually, tap_pattern, unique};
use redmutex::{Client, RFairLock};

crate::fair_suite::fair_lock_cases!(own on &TestServer::start());

/// A waiter of `waiter`, running `wait` on the fair lock, queues behind a holder with a
/// 30 s lease: its queue entry is its own, and its slot ends the lease plus `slot` after
/// it queued (§3.2 step 5).
fn assert_slot_after_lease(
    server: &TestServer,
    waiter: &Client,
    slot: Duration,
    wait: impl FnOnce(&RFairLock) + Send,
) {
    let holder = server.client();
    let name = unique("fair");
    let mut raw = server.conn();
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
