//! Faults: crashed and frozen holders, restarted servers, killed pub/sub connections,
//! blackholed and dropped traffic, slow and paused servers, an exhausted pool. After each,
//! nothing is left behind.
//!
//! All serial: they restart servers, count this process's threads and connections.

use std::time::{Duration, Instant};

use crate::support::proxy::FaultProxy;
use crate::support::raw::{await_numsub, lock_channel, lrange, pttl};
use crate::support::{Holder, TestServer, assert_no_leftovers, await_no_unlock_latches, unique};
use redmutex::{Error, Loss};
use serial_test::serial;

/// A holder process is SIGKILLed: nobody gets the lock before its TTL ends; a waiter gets
/// it within the TTL plus one wake-up.
#[test]
#[serial]
fn a_killed_holder_process_frees_the_lock_at_its_ttl() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let name = unique("kill");
    let mut holder = Holder::holding(&server.url(), &name, 2_000, &[]);
    {
        let client = server.client();
        let lock = client.get_lock(name.clone());
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                let g = lock
                    .try_lock_for(Duration::from_secs(30))
                    .unwrap()
                    .expect("acquired");
                let at = Instant::now();
                g.unlock().unwrap();
                at
            });
            await_numsub(&mut raw, &lock_channel(&name), 1);
            let ttl = pttl(&mut raw, &name);
            let killed = Instant::now();
            holder.child.kill().unwrap();
            holder.child.wait().unwrap();
            let acquired = waiter.join().unwrap();
            let takeover = acquired.duration_since(killed);
            println!(
                "takeover after SIGKILL: {takeover:?} with {ttl} ms left of a 2000 ms lease ({:.2} × lease)",
                takeover.as_secs_f64() / 2.0
            );
            assert!(
                takeover.as_millis() as i64 >= ttl - 50,
                "acquired before the TTL ended: {takeover:?} < {ttl} ms"
            );
            assert!(
                takeover < Duration::from_millis(ttl as u64) + Duration::from_secs(3),
                "{takeover:?}"
            );
        });
    }
    assert_no_leftovers(&mut raw);
}

/// Redis restarted without persistence while a lock is held: the holder is told at the
/// next renewal, its release says the lock was lost, and a waiter of another client
/// reconnects and acquires.
#[test]
#[serial]
fn a_restart_without_persistence_is_reported_as_loss() {
    let mut server = TestServer::start();
    {
        let holder = server.client_with_watchdog(Duration::from_secs(1));
        let waiter = server.client();
        let name = unique("restart");
        let lock = holder.get_lock(name.clone());
        let guard = lock.lock().unwrap();
        let signal = guard.loss_signal();
        std::thread::scope(|s| {
            let w = s.spawn(|| {
                let lock = waiter.get_lock(name.clone());
                let g = lock
                    .try_lock_for(Duration::from_secs(30))
                    .unwrap()
                    .expect("waiter acquired");
                g.unlock().unwrap();
            });
            let mut raw = server.conn();
            await_numsub(&mut raw, &lock_channel(&name), 1);
            server.restart();
            let loss = signal
                .recv_timeout(Duration::from_secs(10))
                .expect("loss signalled");
            assert_eq!(loss, Loss::Lost);
            w.join().unwrap();
        });
        let err = guard.unlock().unwrap_err();
        assert!(matches!(err, Error::LockLost { .. }), "{err}");
    }
    assert_no_leftovers(&mut server.conn());
}

/// After a restart every idle pooled connection is dead. The first request that finds
/// one dead condemns the rest, so a request that must never be sent twice (a semaphore's)
/// fails once and the next one succeeds, and a lock's acquire does not fail at all: it
/// learns that the request on the dead connection never ran and sends it again.
#[test]
#[serial]
fn after_a_restart_dead_pooled_connections_cost_at_most_one_failure() {
    let mut server = TestServer::start();
    {
        let client = server.client_with(|b| b.pool_min_idle(Some(8)));
        let lock = client.get_lock(unique("restart-pool"));
        let semaphore = client.get_semaphore(unique("restart-pool-permits"));
        server.restart();
        let guard = lock.try_lock().unwrap().expect("a free lock");
        guard.unlock().unwrap();
        server.restart();
        let err = semaphore.try_set_permits(1).unwrap_err();
        assert!(err.is_transient(), "{err}");
        assert!(semaphore.try_set_permits(1).unwrap());
        let permit = semaphore.try_acquire().unwrap().expect("the permit");
        permit.release().unwrap();
        assert_eq!(semaphore.available_permits().unwrap(), 1);
        semaphore.delete().unwrap();
    }
    assert_no_leftovers(&mut server.conn());
}

/// With AOF `always` the lock survives the restart and its holder keeps it.
#[test]
#[serial]
fn a_restart_with_aof_always_keeps_the_lock() {
    let mut server = TestServer::with_args(&["--appendonly", "yes", "--appendfsync", "always"]);
    {
        // A 4 s watchdog: renewal every 1.33 s, and a hold is presumed lost only when no
        // renewal was confirmed for 2 s, which leaves the restart room to finish.
        let holder = server.client_with_watchdog(Duration::from_secs(4));
        let lock = holder.get_lock(unique("aof"));
        let guard = lock.lock().unwrap();
        server.restart();
        // Time passing is the point: over two renewal periods after the restart.
        std::thread::sleep(Duration::from_secs(3));
        assert!(!guard.is_lost());
        let mut raw = server.conn();
        let ttl = pttl(&mut raw, lock.name());
        // Without a renewal after the restart, at most 1 s of the 4 s lease would be left.
        assert!(ttl > 1_000, "not renewed after the restart: {ttl}");
        guard.unlock().unwrap();
        assert!(!lock.is_locked().unwrap());
    }
    assert_no_leftovers(&mut server.conn());
}

/// The pub/sub connection is killed while 4 waiters wait: after the release all 4 get the
/// lock, long before the holder's 30 s TTL, and none runs out of its wait.
#[test]
#[serial]
fn four_waiters_survive_a_killed_pubsub_connection() {
    let server = TestServer::start();
    let mut raw = server.conn();
    {
        let holder = server.client();
        let waiters = server.client();
        let name = unique("psk");
        let channel = lock_channel(&name);
        let lock = holder.get_lock(name.clone());
        let guard = lock.lock().unwrap();
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        let lock = waiters.get_lock(name.clone());
                        let g = lock.try_lock_for(Duration::from_secs(25)).unwrap();
                        g.map(|g| g.unlock().unwrap()).is_some()
                    })
                })
                .collect();
            await_numsub(&mut raw, &channel, 1);
            let _: i64 = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("TYPE")
                .arg("pubsub")
                .query(&mut raw)
                .unwrap();
            await_numsub(&mut raw, &channel, 1);
            let released = Instant::now();
            guard.unlock().unwrap();
            for h in handles {
                assert!(h.join().unwrap(), "a waiter ran out of time");
            }
            println!(
                "4 hand-offs after a pub/sub kill took {:?}",
                released.elapsed()
            );
            assert!(released.elapsed() < Duration::from_secs(20));
        });
    }
    assert_no_leftovers(&mut raw);
}

/// The holder's traffic is blackholed past its lease: it is told "possibly lost" while
/// the key still exists, another client takes the lock once the key expires, and the
/// holder's release fails within its timeouts instead of hanging.
#[test]
#[serial]
fn a_blackholed_holder_is_told_before_its_lease_ends() {
    let server = TestServer::start();
    let mut raw = server.conn();
    {
        let proxy = FaultProxy::start(server.port());
        let holder = redmutex::Client::new(
            redmutex::Config::builder()
                .address(proxy.url())
                .lock_watchdog_timeout(Duration::from_millis(1500))
                .response_timeout(Duration::from_millis(200))
                .connection_timeout(Duration::from_millis(500))
                .retry_attempts(1)
                .retry_delay(Duration::from_millis(50))
                .retry_max_delay(Duration::from_millis(100))
                .build(),
        )
        .unwrap();
        let other = server.client();
        let name = unique("bh");
        let lock = holder.get_lock(name.clone());
        let guard = lock.lock().unwrap();
        let signal = guard.loss_signal();
        proxy.blackhole();
        let loss = signal.recv_timeout(Duration::from_secs(10)).expect("told");
        let ttl_when_told = pttl(&mut raw, &name);
        assert_eq!(loss, Loss::PossiblyLost);
        assert!(
            ttl_when_told > 0,
            "told only after the lease ended ({ttl_when_told})"
        );
        println!("told 'possibly lost' with {ttl_when_told} ms of the 1500 ms lease left");
        let other_lock = other.get_lock(name.clone());
        let taken = other_lock
            .try_lock_for(Duration::from_secs(10))
            .unwrap()
            .expect("taken after expiry");
        let started = Instant::now();
        let err = guard.unlock().unwrap_err();
        let took = started.elapsed();
        assert!(
            err.is_transient() || matches!(err, Error::PoolTimeout { .. }),
            "{err}"
        );
        assert!(took < Duration::from_secs(3), "release hung for {took:?}");
        taken.unlock().unwrap();
        drop(holder);
        proxy.pass();
    }
    assert_no_leftovers(&mut raw);
}

/// A holder process frozen (SIGSTOP) past its lease, then resumed: another client held the
/// lock meanwhile. The unfenced write the holder makes on waking lands inside the other
/// holder's critical section (the overlap a lease cannot prevent), while the guard
/// already says the lock is lost, so the careful write never happens.
#[test]
#[serial]
fn a_frozen_holder_learns_the_loss_before_writing() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let name = unique("freeze");
    let log = unique("log");
    let holder = Holder::holding(&server.url(), &name, 1_000, &["--log", &log]);
    holder.expect("working");
    holder.expect("working");
    holder.signal("STOP");
    {
        let client = server.client();
        let lock = client.get_lock(name.clone());
        let guard = lock
            .try_lock_for(Duration::from_secs(10))
            .unwrap()
            .expect("taken while frozen");
        let _: i64 = redis::cmd("RPUSH")
            .arg(&log)
            .arg("B-start")
            .query(&mut raw)
            .unwrap();
        holder.signal("CONT");
        let lost = holder.expect("lost");
        assert!(
            lost.contains("PossiblyLost") || lost.contains("Lost"),
            "{lost}"
        );
        assert_eq!(holder.expect("unlock"), "unlock refused");
        let _: i64 = redis::cmd("RPUSH")
            .arg(&log)
            .arg("B-end")
            .query(&mut raw)
            .unwrap();
        guard.unlock().unwrap();
    }
    let entries = lrange(&mut raw, &log);
    let start = entries.iter().position(|e| e == "B-start").unwrap();
    let end = entries.iter().position(|e| e == "B-end").unwrap();
    let inside = &entries[start + 1..end];
    assert!(
        inside.iter().any(|e| e == "A-naive"),
        "the unfenced write should overlap: {entries:?}"
    );
    assert!(
        !inside.iter().any(|e| e == "A-careful"),
        "a careful write overlapped: {entries:?}"
    );
    drop(holder);
    assert_no_leftovers(&mut raw);
}

fn through(proxy: &FaultProxy) -> redmutex::Client {
    redmutex::Client::new(
        redmutex::Config::builder()
            .address(proxy.url())
            .response_timeout(Duration::from_millis(300))
            .retry_delay(Duration::from_millis(20))
            .retry_max_delay(Duration::from_millis(40))
            .build(),
    )
    .unwrap()
}

fn hold_count(raw: &mut redis::Connection, key: &str) -> Option<i64> {
    let fields: Vec<(String, i64)> = redis::cmd("HGETALL").arg(key).query(raw).unwrap();
    fields.first().map(|f| f.1)
}

/// A reply lost during acquire: the call fails, and the hold count is never 2.
#[test]
#[serial]
fn a_lost_acquire_reply_never_doubles_the_hold() {
    let server = TestServer::start();
    let mut raw = server.conn();
    {
        let proxy = FaultProxy::start(server.port());
        let client = through(&proxy);
        let lock = client.get_lock(unique("drop"));
        // Load the script first: on a fresh server the first EVALSHA answers NOSCRIPT, and
        // losing that reply would lose nothing.
        lock.lock().unwrap().unlock().unwrap();
        // The watchdog deletes that unlock's latch later, through the proxy too: wait for
        // it, or the dropped reply may be the latch deletion's instead of the acquire's.
        await_no_unlock_latches(&mut raw);
        proxy.drop_next_reply();
        let result = lock.try_lock();
        assert!(proxy.reply_dropped());
        let err = result.map(|g| g.is_some()).unwrap_err();
        assert!(err.is_transient(), "{err}");
        assert_eq!(
            hold_count(&mut raw, lock.name()),
            Some(1),
            "the script ran once"
        );
        // The connection that lost its reply was discarded; the next call is clean.
        assert_eq!(lock.hold_count().unwrap(), 1);
        lock.force_unlock().unwrap();
    }
    assert_no_leftovers(&mut raw);
}

/// The connection closes after the server ran the acquire but before its reply came:
/// the call finds out that the script ran and returns that hold, never a second one.
#[test]
#[serial]
fn an_acquire_whose_connection_closed_after_it_ran_keeps_that_one_hold() {
    let server = TestServer::start();
    let mut raw = server.conn();
    {
        let proxy = FaultProxy::start(server.port());
        let client = through(&proxy);
        let lock = client.get_lock(unique("closed"));
        // Scripts loaded and the first unlock's latch deleted first, as above, so the
        // closed reply is the acquire's.
        lock.lock().unwrap().unlock().unwrap();
        await_no_unlock_latches(&mut raw);
        for reentrant in [false, true] {
            let outer = reentrant.then(|| lock.lock().unwrap());
            let before = hold_count(&mut raw, lock.name()).unwrap_or(0);
            proxy.close_at_next_reply();
            let guard = lock.lock().unwrap();
            assert!(proxy.closed_at_reply());
            assert_eq!(
                hold_count(&mut raw, lock.name()),
                Some(before + 1),
                "the script ran once and its hold is the guard's (reentrant: {reentrant})"
            );
            guard.unlock().unwrap();
            if let Some(outer) = outer {
                assert_eq!(hold_count(&mut raw, lock.name()), Some(1));
                outer.unlock().unwrap();
            }
            assert_eq!(hold_count(&mut raw, lock.name()), None, "released");
            await_no_unlock_latches(&mut raw);
        }
    }
    assert_no_leftovers(&mut raw);
}

/// An acquire that timed out but ran leaves a hold no guard knows of. The thread's next
/// release of its last known hold releases that one too, so a thread that keeps taking
/// the lock again cannot keep it from everyone else.
#[test]
#[serial]
fn a_hold_nobody_knows_of_goes_with_the_last_known_release() {
    let server = TestServer::start();
    let mut raw = server.conn();
    {
        let proxy = FaultProxy::start(server.port());
        let client = through(&proxy);
        let lock = client.get_lock(unique("unknown"));
        lock.lock().unwrap().unlock().unwrap();
        await_no_unlock_latches(&mut raw);
        proxy.drop_next_reply();
        assert!(lock.try_lock().unwrap_err().is_transient());
        assert!(proxy.reply_dropped());
        assert_eq!(hold_count(&mut raw, lock.name()), Some(1), "the script ran");
        // Taken again: reentrant, so it is granted at once on top of the unknown hold.
        let guard = lock.lock().unwrap();
        assert_eq!(hold_count(&mut raw, lock.name()), Some(2));
        let other = server.client();
        let waiter = other.get_lock(lock.name().to_owned());
        std::thread::scope(|s| {
            let w = s.spawn(|| {
                // Woken by the unlock message of the final release; the unknown hold's
                // 30 s lease is far beyond this wait.
                let g = waiter
                    .try_lock_for(Duration::from_secs(10))
                    .unwrap()
                    .expect("the other client got the lock");
                g.unlock().unwrap();
            });
            await_numsub(&mut raw, &lock_channel(lock.name()), 1);
            guard.unlock().unwrap();
            w.join().unwrap();
        });
        assert_eq!(hold_count(&mut raw, lock.name()), None);
    }
    assert_no_leftovers(&mut raw);
}

/// A reply lost during release: the retry carries the same latch, so one release takes
/// one hold, never two.
#[test]
#[serial]
fn a_lost_release_reply_never_releases_twice() {
    let server = TestServer::start();
    let mut raw = server.conn();
    {
        let proxy = FaultProxy::start(server.port());
        let client = through(&proxy);
        let lock = client.get_lock(unique("drop"));
        let a = lock.lock().unwrap();
        let b = lock.lock().unwrap();
        proxy.drop_next_reply();
        b.unlock().unwrap();
        assert!(proxy.reply_dropped());
        assert_eq!(hold_count(&mut raw, lock.name()), Some(1));
        assert!(lock.is_held_by_current_thread().unwrap());
        a.unlock().unwrap();
        assert_eq!(hold_count(&mut raw, lock.name()), None);
    }
    assert_no_leftovers(&mut raw);
}

/// DEBUG SLEEP longer than the response timeout: a timeout error, not a hang, and never
/// a false "acquired".
#[test]
#[serial]
fn a_sleeping_server_gives_a_timeout_not_a_hang() {
    let server = TestServer::with_args(&["--enable-debug-command", "local"]);
    let mut raw = server.conn();
    {
        let client = server.client_with(|b| b.response_timeout(Duration::from_millis(200)));
        let lock = client.get_lock(unique("slow"));
        let url = server.url();
        let sleeper = std::thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let _: () = redis::cmd("DEBUG")
                .arg("SLEEP")
                .arg("1")
                .query(&mut c)
                .unwrap();
        });
        // Wait until the sleep is under way: the server then answers nobody.
        std::thread::sleep(Duration::from_millis(100));
        let started = Instant::now();
        let result = lock.try_lock();
        let took = started.elapsed();
        sleeper.join().unwrap();
        let err = result.map(|g| g.is_some()).unwrap_err();
        assert!(matches!(err, Error::ResponseTimeout(_)), "{err}");
        assert!(
            took < Duration::from_millis(900),
            "waited out the sleep: {took:?}"
        );
        // The queued script ran after the sleep; the hold is ours but no guard exists, so
        // nothing renews it. Clean up for the leak check.
        lock.force_unlock().unwrap();
    }
    assert_no_leftovers(&mut raw);
}

/// CLIENT PAUSE WRITE: scripts block, the call times out, and nothing was acquired: the
/// connection that timed out is closed, so Redis drops the paused command with it.
#[test]
#[serial]
fn a_write_pause_gives_a_timeout() {
    let server = TestServer::start();
    let mut raw = server.conn();
    {
        let client = server.client_with(|b| b.response_timeout(Duration::from_millis(200)));
        let lock = client.get_lock(unique("pause"));
        lock.lock().unwrap().unlock().unwrap();
        let _: () = redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(1000)
            .arg("WRITE")
            .query(&mut raw)
            .unwrap();
        let err = lock.try_lock().map(|g| g.is_some()).unwrap_err();
        assert!(matches!(err, Error::ResponseTimeout(_)), "{err}");
        let _: () = redis::cmd("CLIENT").arg("UNPAUSE").query(&mut raw).unwrap();
        // Still usable, and the lock was never taken behind our back.
        assert!(lock.try_lock().unwrap().is_some_and(|g| g.unlock().is_ok()));
        assert!(!lock.is_locked().unwrap());
    }
    assert_no_leftovers(&mut raw);
}

/// Every pooled connection busy: the next call fails with a pool timeout after the
/// configured wait.
#[test]
#[serial]
fn an_exhausted_pool_is_a_pool_timeout() {
    let server = TestServer::start();
    let mut raw = server.conn();
    {
        let client = server.client_with(|b| {
            b.pool_max_size(1)
                .pool_min_idle(Some(1))
                .connection_timeout(Duration::from_millis(300))
                .response_timeout(Duration::from_secs(5))
        });
        let lock = client.get_lock(unique("pool"));
        let _: () = redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(1500)
            .arg("ALL")
            .query(&mut raw)
            .unwrap();
        std::thread::scope(|s| {
            // This call takes the only connection and waits out the pause.
            let busy = s.spawn(|| lock.is_locked());
            // Until that call holds the connection, ours could still get it.
            std::thread::sleep(Duration::from_millis(100));
            let started = Instant::now();
            let err = lock.is_locked().unwrap_err();
            // It says which node, the cap, and that the connection was busy, not down.
            let Error::PoolTimeout {
                address,
                pool_size,
                waited,
                connect_error,
            } = &err
            else {
                panic!("not a pool timeout: {err}");
            };
            assert_eq!(*address, format!("127.0.0.1:{}", server.port()), "{err}");
            assert_eq!(*pool_size, 1, "{err}");
            assert!(*waited >= Duration::from_millis(300), "{err}");
            assert!(connect_error.is_none(), "{err}");
            assert!(
                started.elapsed() >= Duration::from_millis(250),
                "{:?}",
                started.elapsed()
            );
            assert!(!busy.join().unwrap().unwrap());
        });
    }
    assert_no_leftovers(&mut raw);
}

/// Many threads share a one-connection pool behind a slow link: each command takes
/// 100 ms, so most threads wait for the connection far longer than the 250 ms
/// connection timeout, but the connection comes back every 100 ms. A busy pool is not a
/// stuck one: `lock()` (which has no deadline) and the release keep waiting their turn
/// instead of failing with `PoolTimeout`.
#[test]
#[serial]
fn a_busy_pool_makes_callers_wait_their_turn_not_fail() {
    let server = TestServer::start();
    let mut raw = server.conn();
    {
        let proxy = FaultProxy::start(server.port());
        let client = redmutex::Client::new(
            redmutex::Config::builder()
                .address(proxy.url())
                .pool_max_size(1)
                .pool_min_idle(Some(1))
                .connection_timeout(Duration::from_millis(250))
                .response_timeout(Duration::from_secs(5))
                .build(),
        )
        .unwrap();
        // Loads the scripts first: a `NOSCRIPT` and its reload would make one call hold
        // the connection for several slow round trips, longer than the timeout.
        let warm = client.get_lock(unique("busy-pool-warm"));
        warm.lock().unwrap().unlock().unwrap();
        proxy.delay(Duration::ZERO, Duration::from_millis(100));
        let threads = 6;
        let start = std::sync::Barrier::new(threads);
        let outcomes: Vec<Result<(), Error>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|i| {
                    let (client, start) = (&client, &start);
                    s.spawn(move || {
                        let lock = client.get_lock(unique(&format!("busy-pool-{i}")));
                        start.wait();
                        lock.lock()?.unlock()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for outcome in &outcomes {
            assert!(outcome.is_ok(), "{outcomes:?}");
        }
        proxy.pass();
        drop(client);
    }
    assert_no_leftovers(&mut raw);
}
