//! Interoperability with real Redisson clients on a Redis Cluster: Redisson 4.7.0 and
//! 3.23.5 (`REDMUTEX_REDISSON_VERSIONS`), each as a Java peer (`tests/interop`, driven
//! by `support/peer.rs`) configured with the harness's `clusterServersConfig`, against
//! redmutex clients of the same local 3 + 3 cluster (`support::cluster`, started once
//! for this binary).
//!
//! Every scenario runs for every version and prints one line per version. Timing
//! assertions are hang guards far below the 30 s lease: a waiter that got in within
//! [`WAKE_BOUND`] of the release was woken by the release's message. Scenarios run one
//! at a time (`#[serial(cluster)]`): each starts a JVM, and two cores are shared with
//! six redis-servers.
//!
//! Needs `redis-server`, `redis-cli`, a JDK and Maven on PATH (the peer is built on
//! first use).

#[path = "support/peer.rs"]
mod peer;
mod support;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use peer::{Peer, Pending};
use serial_test::serial;
use support::cluster::{self, Cluster, key_slot};
use support::deploy::Deployment;
use support::raw::{
    fair_queue_key, latch_channel, lock_channel, rwlock_channel, semaphore_channel,
};
use support::{eventually, unique};

/// Redisson's default watchdog, and ours.
const WATCHDOG_MS: u64 = 30_000;
/// "Well before any lease could run out": the bound on message wake-ups.
const WAKE_BOUND: Duration = Duration::from_secs(5);
/// Hang guard for replies that should take milliseconds.
const HANG: Duration = Duration::from_secs(60);

/// Runs `f` once per Redisson version against the shared cluster with a fresh peer;
/// prints one line per version and fails at the end if any version failed.
fn run_versions(scenario: &str, f: impl Fn(&Cluster, &Peer)) {
    let c = cluster::shared();
    let mut failed = Vec::new();
    for v in peer::versions() {
        let started = Instant::now();
        let peer = Peer::start_yaml(&v, &c.redisson_yaml(), WATCHDOG_MS);
        match catch_unwind(AssertUnwindSafe(|| f(c, &peer))) {
            Ok(()) => {
                println!(
                    "{scenario}, Redisson {v}: ok ({:.1}s)",
                    started.elapsed().as_secs_f64()
                );
                peer.quit();
            }
            Err(e) => {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                println!(
                    "{scenario}, Redisson {v}: FAILED: {msg}\n{}",
                    peer.stderr_tail()
                );
                failed.push(v);
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{scenario} failed for Redisson {failed:?}"
    );
}

/// `PUBSUB <kind>NUMSUB channel` on `raw`.
fn subscribers(raw: &mut redis::Connection, kind: &str, channel: &str) -> i64 {
    let (_, n): (String, i64) = redis::cmd("PUBSUB")
        .arg(format!("{kind}NUMSUB"))
        .arg(channel)
        .query(raw)
        .unwrap();
    n
}

/// Waits until the master of `channel`'s slot counts at least `n` subscribers of either
/// kind: the way to know that a waiter (Java or Rust) sleeps on its channel.
fn await_waiters(c: &Cluster, channel: &str, n: i64) {
    let mut raw = c.raw(channel);
    eventually(HANG, &format!("{n} subscriber(s) of {channel}"), || {
        subscribers(&mut raw, "", channel) + subscribers(&mut raw, "SHARD", channel) >= n
    });
}

/// The reply of a Java command that must succeed, with when it arrived.
fn java_ok(p: Pending) -> (String, Instant) {
    let (reply, at) = p.wait_timed(HANG);
    (reply.unwrap_or_else(|e| panic!("java: {e}")), at)
}

/// Messages on `channel` while `f` runs (and until quiet for 300 ms), as a plain
/// `SUBSCRIBE` and as an `SSUBSCRIBE` on the channel's master hear them: which publish
/// command the other side used.
fn tap_both<R>(c: &Cluster, channel: &str, f: impl FnOnce() -> R) -> (R, Vec<String>, Vec<String>) {
    let mut conns: Vec<redis::Connection> = ["SUBSCRIBE", "SSUBSCRIBE"]
        .iter()
        .map(|command| {
            let mut conn = c.raw(channel);
            conn.send_packed_command(&redis::cmd(command).arg(channel).get_packed_command())
                .unwrap();
            let confirmation = conn.recv_response().unwrap();
            assert!(
                matches!(confirmation, redis::Value::Array(_)),
                "{confirmation:?}"
            );
            conn
        })
        .collect();
    let result = f();
    let mut heard = conns.iter_mut().map(|conn| {
        conn.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut got = Vec::new();
        loop {
            match conn.recv_response() {
                Ok(redis::Value::Array(parts)) => {
                    if let [
                        redis::Value::BulkString(kind),
                        _,
                        redis::Value::BulkString(payload),
                    ] = parts.as_slice()
                        && (kind == b"message" || kind == b"smessage")
                    {
                        got.push(String::from_utf8_lossy(payload).into_owned());
                    }
                }
                Ok(other) => panic!("unexpected {other:?}"),
                Err(e) if e.is_timeout() => break got,
                Err(e) => panic!("{e}"),
            }
        }
    });
    let plain = heard.next().unwrap_or_default();
    let sharded = heard.next().unwrap_or_default();
    (result, plain, sharded)
}

// ---- RLock ------------------------------------------------------------------------

/// Two Java and two Rust threads each run 300 non-atomic GET/SET increments under one
/// lock: the counter must be exactly 1,200.
#[test]
#[serial(cluster)]
fn mixed_mutual_exclusion_keeps_an_exact_counter() {
    run_versions("mutual exclusion", |c, peer| {
        const PER_THREAD: u64 = 300;
        let client = c.client();
        let name = unique("rc-excl");
        let counter = unique("rc-counter");
        let started = Instant::now();
        let java: Vec<Pending> = (0..2)
            .map(|i| {
                peer.send(
                    &format!("incr{i}"),
                    &format!("incr {name} {counter} {PER_THREAD}"),
                )
            })
            .collect();
        thread::scope(|s| {
            for _ in 0..2 {
                let lock = client.get_lock(name.clone());
                let mut conn = c.raw(&counter);
                let counter = &counter;
                s.spawn(move || {
                    for _ in 0..PER_THREAD {
                        let guard = lock.lock().unwrap();
                        // Deliberately non-atomic: only the lock protects it.
                        let value: Option<u64> =
                            redis::cmd("GET").arg(counter).query(&mut conn).unwrap();
                        redis::cmd("SET")
                            .arg(counter)
                            .arg(value.unwrap_or(0) + 1)
                            .exec(&mut conn)
                            .unwrap();
                        guard.unlock().unwrap();
                    }
                });
            }
        });
        for p in java {
            assert_eq!(java_ok(p).0, PER_THREAD.to_string());
        }
        let total: u64 = redis::cmd("GET")
            .arg(&counter)
            .query(&mut c.raw(&counter))
            .unwrap();
        assert_eq!(
            total,
            4 * PER_THREAD,
            "lost updates: mutual exclusion broken"
        );
        assert!(!client.get_lock(name.clone()).is_locked().unwrap());
        println!(
            "  Redisson {}: counter {total} in {:.1}s",
            peer.version(),
            started.elapsed().as_secs_f64()
        );
    });
}

/// Rust holds, Java waits in `tryLock`, and the Rust unlock wakes it; then Java holds,
/// Rust waits, and the Java unlock wakes the Rust waiter. The Java unlock is tapped both
/// ways: that says which publish command this Redisson version uses on a cluster, and
/// the Rust waiter (subscribed both ways) must wake for it either way.
#[test]
#[serial(cluster)]
fn wake_ups_both_ways_and_the_java_publish_command() {
    run_versions("wake-ups both ways", |c, peer| {
        let client = c.client();
        let name = unique("rc-wake");
        let channel = lock_channel(&name);
        let lock = client.get_lock(name.clone());

        // Rust holds, Java waits.
        let guard = lock.lock().unwrap();
        let java = peer.send("w", &format!("trylock {name} 20000"));
        await_waiters(c, &channel, 1);
        let mut raw = c.raw(&channel);
        let java_sharded = subscribers(&mut raw, "SHARD", &channel);
        let java_plain = subscribers(&mut raw, "", &channel);
        let released = Instant::now();
        guard.unlock().unwrap();
        let (reply, at) = java_ok(java);
        assert_eq!(reply, "true");
        let java_woke = at.duration_since(released);
        assert!(java_woke < WAKE_BOUND, "Java woke after {java_woke:?}");

        // Java holds (it got the lock above), Rust waits.
        let (woke, plain, sharded) = thread::scope(|s| {
            let w = s.spawn(|| {
                let g = lock
                    .try_lock_for(Duration::from_secs(20))
                    .unwrap()
                    .expect("the Rust waiter got the lock");
                let at = Instant::now();
                g.unlock().unwrap();
                at
            });
            await_waiters(c, &channel, 1);
            let mut released = Instant::now();
            let ((), plain, sharded) = tap_both(c, &channel, || {
                released = Instant::now();
                peer.ok("w", &format!("unlock {name}"));
            });
            (w.join().unwrap().duration_since(released), plain, sharded)
        });
        assert!(woke < WAKE_BOUND, "Rust woke after {woke:?}");
        let command = match (plain.is_empty(), sharded.is_empty()) {
            (true, false) => "SPUBLISH",
            (false, true) => "PUBLISH",
            (false, false) => "PUBLISH and SPUBLISH",
            (true, true) => panic!("the Java unlock published nothing"),
        };
        println!(
            "  Redisson {}: waits with {java_sharded} SSUBSCRIBE + {java_plain} SUBSCRIBE; \
             unlocks with {command} (plain tap {plain:?}, sharded tap {sharded:?}); Java woke \
             {java_woke:?}, Rust woke {woke:?} after the other's unlock",
            peer.version()
        );
    });
}

// ---- fair lock ----------------------------------------------------------------------

/// A Rust holder of a fair lock, then four waiters queued alternately Java, Rust, Java,
/// Rust (each enqueued only after the one before it is in the queue): they acquire in
/// that order, each woken by the previous one's unlock.
#[test]
#[serial(cluster)]
fn fair_lock_waiters_of_both_languages_acquire_in_arrival_order() {
    run_versions("fair-lock order", |c, peer| {
        let client = c.client();
        let name = unique("rc-fair");
        let queue = fair_queue_key(&name);
        let mut raw = c.raw(&name);
        let queued = |raw: &mut redis::Connection| -> i64 {
            redis::cmd("LLEN").arg(&queue).query(raw).unwrap()
        };
        let fair = client.get_fair_lock(name.clone());
        let guard = fair.lock().unwrap();
        let order = Mutex::new(Vec::new());
        thread::scope(|s| {
            let mut java = Vec::new();
            for (i, who) in ["java-1", "rust-1", "java-2", "rust-2"]
                .into_iter()
                .enumerate()
            {
                if who.starts_with("java") {
                    java.push((who, peer.send(who, &format!("fair.trylock {name} 30000"))));
                } else {
                    let (fair, order) = (&fair, &order);
                    s.spawn(move || {
                        let g = fair
                            .try_lock_for(Duration::from_secs(30))
                            .unwrap()
                            .expect("the Rust fair waiter got the lock");
                        order.lock().unwrap().push((who, Instant::now()));
                        g.unlock().unwrap();
                    });
                }
                eventually(HANG, &format!("{who} queued"), || {
                    queued(&mut raw) == i as i64 + 1
                });
            }
            guard.unlock().unwrap();
            // Each Java waiter is released by the test once it got the lock, which is
            // what lets the Rust waiter behind it in.
            for (who, p) in java {
                let (reply, at) = java_ok(p);
                assert_eq!(reply, "true", "{who}");
                order.lock().unwrap().push((who, at));
                peer.ok(who, &format!("fair.unlock {name}"));
            }
        });
        let mut order = order.into_inner().unwrap();
        order.sort_by_key(|(_, at)| *at);
        let names: Vec<&str> = order.iter().map(|(who, _)| *who).collect();
        assert_eq!(names, ["java-1", "rust-1", "java-2", "rust-2"]);
        assert!(!fair.is_locked().unwrap());
    });
}

// ---- read-write lock, semaphore, latch ------------------------------------------------

/// Measures how long after `release` the waiter `wait` (run on another thread once its
/// channel has a subscriber) got through.
fn woken_after(
    c: &Cluster,
    channel: &str,
    wait: impl FnOnce() -> Instant + Send,
    release: impl FnOnce(),
) -> Duration {
    thread::scope(|s| {
        let w = s.spawn(wait);
        await_waiters(c, channel, 1);
        let released = Instant::now();
        release();
        w.join().unwrap().duration_since(released)
    })
}

/// A Java write hold wakes a Rust reader at its unlock, a Rust write hold wakes a Java
/// reader; a Java semaphore release wakes a Rust acquirer and the reverse; a Java
/// count-down opens a Rust latch wait and the reverse.
#[test]
#[serial(cluster)]
fn rwlock_semaphore_and_latch_wake_ups_both_ways() {
    run_versions("rwlock, semaphore, latch wake-ups", |c, peer| {
        let client = c.client();
        let mut woke = Vec::new();

        let name = unique("rc-rw");
        let rw = client.get_read_write_lock(name.clone());
        let channel = rwlock_channel(&name);
        peer.ok("w", &format!("write.lock {name}"));
        woke.push((
            "java write -> rust read",
            woken_after(
                c,
                &channel,
                || {
                    let g = rw
                        .read_lock()
                        .try_lock_for(Duration::from_secs(20))
                        .unwrap()
                        .expect("read");
                    let at = Instant::now();
                    g.unlock().unwrap();
                    at
                },
                || {
                    peer.ok("w", &format!("write.unlock {name}"));
                },
            ),
        ));
        let g = rw.write_lock().lock().unwrap();
        let java = peer.send("r", &format!("read.trylock {name} 20000"));
        await_waiters(c, &channel, 1);
        let released = Instant::now();
        g.unlock().unwrap();
        let (reply, at) = java_ok(java);
        assert_eq!(reply, "true");
        woke.push(("rust write -> java read", at.duration_since(released)));
        peer.ok("r", &format!("read.unlock {name}"));

        let name = unique("rc-sem");
        let sem = client.get_semaphore(name.clone());
        let channel = semaphore_channel(&name);
        assert!(sem.try_set_permits(0).unwrap());
        woke.push((
            "java release -> rust acquire",
            woken_after(
                c,
                &channel,
                || {
                    let p = sem
                        .try_acquire_for(Duration::from_secs(20))
                        .unwrap()
                        .expect("permit");
                    let at = Instant::now();
                    p.detach();
                    at
                },
                || {
                    peer.ok("s", &format!("sem.release {name} 1"));
                },
            ),
        ));
        let java = peer.send("s", &format!("sem.tryacquire {name} 1 20000"));
        await_waiters(c, &channel, 1);
        let released = Instant::now();
        sem.release().unwrap();
        let (reply, at) = java_ok(java);
        assert_eq!(reply, "true");
        woke.push(("rust release -> java acquire", at.duration_since(released)));
        assert_eq!(sem.available_permits().unwrap(), 0);

        let name = unique("rc-latch");
        let latch = client.get_count_down_latch(name.clone());
        let channel = latch_channel(&name);
        assert!(latch.try_set_count(1).unwrap());
        woke.push((
            "java count-down -> rust wait",
            woken_after(
                c,
                &channel,
                || {
                    assert!(latch.wait_for(Duration::from_secs(20)).unwrap());
                    Instant::now()
                },
                || {
                    peer.ok("l", &format!("latch.countdown {name}"));
                },
            ),
        ));
        assert!(latch.try_set_count(1).unwrap());
        let java = peer.send("l", &format!("latch.await {name} 20000"));
        await_waiters(c, &channel, 1);
        let released = Instant::now();
        latch.count_down().unwrap();
        let (reply, at) = java_ok(java);
        assert_eq!(reply, "true");
        woke.push(("rust count-down -> java wait", at.duration_since(released)));

        for (what, after) in &woke {
            assert!(*after < WAKE_BOUND, "{what}: woke after {after:?}");
        }
        println!("  Redisson {}: {woke:?}", peer.version());
    });
}

// ---- failover -----------------------------------------------------------------------

/// Java and Rust each hold a lock on one master and each wait for the other's; the
/// master is SIGKILLed and its replica promoted. Both holds survive (renewed on the new
/// master), and each waiter gets its lock after the other side's unlock.
#[test]
#[serial(cluster)]
fn a_failover_with_both_sides_holding_and_waiting() {
    run_versions("SIGKILL failover", |c, peer| {
        let _d = c.disrupt();
        let master = c.masters().remove(0);
        let base = unique("rc-fo");
        let slot = master.slots[0].start() + 1;
        let [rust_name, java_name] =
            [format!("{base}:r"), format!("{base}:j")].map(|n| cluster::key_for_slot(slot, &n));
        assert_eq!(key_slot(&rust_name), key_slot(&java_name));
        // 20 s leases: the 4-5 s a promotion takes cannot cost the holds.
        let holder = c.client_with_watchdog(Duration::from_secs(20));
        let waiter = c.client();
        let rust_guard = holder.get_lock(rust_name.clone()).lock().unwrap();
        peer.ok("h", &format!("lock {java_name}"));
        let java_wait = peer.send("w", &format!("trylock {rust_name} 60000"));
        let (rust_woke, java_woke, settled) = thread::scope(|s| {
            let rust_wait = s.spawn(|| {
                let g = waiter
                    .get_lock(java_name.clone())
                    .try_lock_for(Duration::from_secs(60))
                    .unwrap()
                    .expect("the Rust waiter got the Java-held lock");
                let at = Instant::now();
                g.unlock().unwrap();
                at
            });
            await_waiters(c, &lock_channel(&rust_name), 1);
            await_waiters(c, &lock_channel(&java_name), 1);
            let began = Instant::now();
            let promoted = c.kill_master(&master);
            let settled = began.elapsed();
            let mut raw = promoted.conn();
            for n in [&rust_name, &java_name] {
                assert!(
                    support::raw::exists(&mut raw, n),
                    "{n} was not replicated before the kill"
                );
            }
            assert!(
                !rust_guard.is_lost(),
                "the Rust holder was told it lost its lock"
            );
            // Java's hold is still Java's: its unlock wakes the Rust waiter. Redisson may
            // still be finding the new master (its own scan), so the unlock's reply
            // time is Redisson's recovery; the Rust waiter is measured from that reply.
            let sent = Instant::now();
            peer.ok("h", &format!("unlock {java_name}"));
            let released = Instant::now();
            let java_unlock = released.duration_since(sent);
            let rust_woke = rust_wait
                .join()
                .unwrap()
                .saturating_duration_since(released);
            let released = Instant::now();
            rust_guard.unlock().unwrap();
            let (reply, at) = java_ok(java_wait);
            assert_eq!(reply, "true");
            (
                rust_woke,
                at.duration_since(released),
                (settled, java_unlock),
            )
        });
        let (settled, java_unlock) = settled;
        peer.ok("w", &format!("unlock {rust_name}"));
        assert!(
            rust_woke < WAKE_BOUND,
            "Rust woke {rust_woke:?} after the Java unlock"
        );
        assert!(
            java_woke < WAKE_BOUND,
            "Java woke {java_woke:?} after the Rust unlock"
        );
        println!(
            "  Redisson {}: master {} killed, cluster agreed after {settled:?}; Rust waiter \
             woke {rust_woke:?} after the Java unlock returned (which took {java_unlock:?}), \
             Java waiter {java_woke:?} after the Rust unlock",
            peer.version(),
            master.port
        );
    });
}
