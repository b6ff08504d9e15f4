//! `RLock` against `RedissonLock`: exclusion, hand-over in both directions, reentrancy,
//! force unlock, refused foreign unlocks, and agreeing queries (scenarios 1-3, 5, 7, 8).

use std::collections::BTreeMap;
use std::thread;
use std::time::{Duration, Instant};

use redmutex::Error;
use serial_test::{parallel, serial};

use crate::holder::RustHolder;
use crate::peer::{Peer, Pending};
use crate::support::raw::{exists, hgetall, lock_channel, pttl};
use crate::support::{TestServer, unique};
use crate::{
    HANG, WATCHDOG_MS, assert_imse, assert_single_field, assert_woken_by_message, ms, run_versions,
    wait_subscribers,
};

/// The unlock latches of lock `name`, of any owner.
fn latches(conn: &mut redis::Connection, name: &str) -> Vec<String> {
    redis::cmd("KEYS")
        .arg(format!("redisson_unlock_latch:{{{name}}}:*"))
        .query(conn)
        .unwrap()
}

/// 4 Java threads and 4 Rust threads each run 2,000 non-atomic GET/SET increments under
/// one lock: the counter must be exactly 16,000.
#[test]
#[serial]
fn scenario_1_mixed_mutual_exclusion() {
    run_versions(1, mixed_mutual_exclusion);
}

fn mixed_mutual_exclusion(v: &str) {
    const THREADS: usize = 4;
    const PER_THREAD: u64 = 2_000;
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();
    let name = unique("s1-lock");
    let counter = unique("s1-counter");

    let started = Instant::now();
    let java: Vec<Pending> = (0..THREADS)
        .map(|i| {
            peer.send(
                &format!("incr{i}"),
                &format!("incr {name} {counter} {PER_THREAD}"),
            )
        })
        .collect();
    let max_rust_wait = thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let lock = client.get_lock(name.clone());
                let mut conn = server.conn();
                let counter = &counter;
                s.spawn(move || {
                    let mut max_wait = Duration::ZERO;
                    for _ in 0..PER_THREAD {
                        let asked = Instant::now();
                        let guard = lock.lock().expect("rust lock()");
                        max_wait = max_wait.max(asked.elapsed());
                        // Deliberately non-atomic: only the lock protects it.
                        let value: Option<u64> =
                            redis::cmd("GET").arg(counter).query(&mut conn).unwrap();
                        redis::cmd("SET")
                            .arg(counter)
                            .arg(value.unwrap_or(0) + 1)
                            .exec(&mut conn)
                            .unwrap();
                        guard.unlock().expect("rust unlock");
                    }
                    max_wait
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("rust worker panicked"))
            .max()
            .unwrap()
    });
    let rust_done = started.elapsed();
    for p in java {
        assert_eq!(
            p.wait(Duration::from_secs(1_200)),
            Ok(PER_THREAD.to_string())
        );
    }
    let elapsed = started.elapsed();

    let total: u64 = redis::cmd("GET").arg(&counter).query(&mut raw).unwrap();
    assert_eq!(
        total,
        2 * THREADS as u64 * PER_THREAD,
        "lost updates: mutual exclusion broken"
    );
    let lock = client.get_lock(name.clone());
    assert!(!lock.is_locked().unwrap());
    assert!(!peer.bool("check", &format!("islocked {name}")));
    assert_eq!(client.renewing_count(), 0);
    println!(
        "scenario 1 version {v}: counter {total} after {:.1}s (rust threads done at {:.1}s, \
         longest rust lock() wait {:.0} ms)",
        elapsed.as_secs_f64(),
        rust_done.as_secs_f64(),
        ms(max_rust_wait)
    );
    peer.quit();
}

/// Rust holds; Java sees it held by someone else; a blocked Java `lock()` acquires right
/// after the Rust unlock (only the unlock message can explain that).
#[test]
#[parallel]
fn scenario_2_rust_holds_java_waits() {
    run_versions(2, rust_holds_java_waits);
}

fn rust_holds_java_waits(v: &str) {
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();
    let name = unique("s2");
    let lock = client.get_lock(name.clone());

    let guard = lock.lock().unwrap();
    assert_single_field(&mut raw, &name, &format!("{}:", client.id()), "1");
    assert!(!peer.bool("j", &format!("trylock {name} -1")));
    assert!(peer.bool("j", &format!("islocked {name}")));
    assert_eq!(peer.num("j", &format!("holdcount {name}")), 0);
    assert!(!peer.bool("j", &format!("isheld {name}")));

    let waiter = peer.send("w", &format!("lock {name}"));
    wait_subscribers(&mut raw, &lock_channel(&name), 1);
    assert_eq!(
        waiter.try_wait(Duration::ZERO),
        None,
        "java lock() returned while rust holds"
    );

    let unlocked = Instant::now();
    guard.unlock().unwrap();
    let (reply, at) = waiter.wait_timed(HANG);
    assert_eq!(reply, Ok(String::new()));
    let latency = at.duration_since(unlocked);
    println!(
        "scenario 2 version {v}: java lock() returned {:.2} ms after the rust unlock call",
        ms(latency)
    );
    assert_woken_by_message("java waiter", latency);

    assert!(peer.bool("w", &format!("isheld {name}")));
    assert_eq!(peer.num("w", &format!("holdcount {name}")), 1);
    let tid = peer.thread_id("w");
    assert_eq!(
        hgetall(&mut raw, &name),
        BTreeMap::from([(peer.field(&tid), "1".to_owned())])
    );
    assert!(lock.is_locked().unwrap());
    assert!(!lock.is_held_by_current_thread().unwrap());
    assert!(lock.try_lock().unwrap().is_none());
    peer.ok("w", &format!("unlock {name}"));
    assert!(!lock.is_locked().unwrap());
    assert!(!peer.bool("w", &format!("islocked {name}")));
    peer.quit();
}

/// Java holds twice; the first Java unlock keeps it held, the second wakes a blocked Rust
/// waiter.
#[test]
#[parallel]
fn scenario_3_java_reentrant_rust_waits() {
    run_versions(3, java_reentrant_rust_waits);
}

fn java_reentrant_rust_waits(v: &str) {
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();
    let name = unique("s3");
    let lock = client.get_lock(name.clone());

    peer.ok("h", &format!("lock {name}"));
    peer.ok("h", &format!("lock {name}"));
    assert_eq!(peer.num("h", &format!("holdcount {name}")), 2);
    let tid = peer.thread_id("h");
    assert_eq!(
        hgetall(&mut raw, &name),
        BTreeMap::from([(peer.field(&tid), "2".to_owned())])
    );
    assert!(lock.try_lock().unwrap().is_none());

    let mut waiter = RustHolder::spawn(client.get_lock(name.clone()));
    wait_subscribers(&mut raw, &lock_channel(&name), 1);

    peer.ok("h", &format!("unlock {name}"));
    assert!(
        lock.try_lock().unwrap().is_none(),
        "acquired after a partial java unlock"
    );
    assert!(lock.is_locked().unwrap());
    assert_eq!(lock.hold_count().unwrap(), 0);
    assert_eq!(peer.num("h", &format!("holdcount {name}")), 1);
    assert!(pttl(&mut raw, &name) > 0);
    assert!(
        !waiter.has_acquired(),
        "rust waiter acquired after a partial java unlock"
    );

    let unlocked = Instant::now();
    peer.ok("h", &format!("unlock {name}"));
    let latency = waiter.acquired_at(HANG).duration_since(unlocked);
    println!(
        "scenario 3 version {v}: rust lock() returned {:.2} ms after the second java unlock was sent",
        ms(latency)
    );
    assert_woken_by_message("rust waiter", latency);

    assert!(peer.bool("h", &format!("islocked {name}")));
    assert!(!peer.bool("h", &format!("isheld {name}")));
    assert_eq!(peer.num("h", &format!("holdcount {name}")), 0);
    assert_single_field(&mut raw, &name, &format!("{}:", client.id()), "1");
    waiter.release().unwrap();
    assert!(!exists(&mut raw, &name));
    assert!(!peer.bool("h", &format!("islocked {name}")));
    peer.quit();
}

/// `force_unlock` on either side wakes the other side's waiter.
#[test]
#[parallel]
fn scenario_5_force_unlock_wakes_other_side() {
    run_versions(5, force_unlock_wakes_other_side);
}

fn force_unlock_wakes_other_side(v: &str) {
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();

    // A Rust thread holds, Java waits, Rust force-unlocks.
    let name = unique("s5-rust-force");
    let lock = client.get_lock(name.clone());
    let mut holder = RustHolder::spawn(client.get_lock(name.clone()));
    holder.acquired_at(HANG);
    let waiter = peer.send("w", &format!("lock {name}"));
    wait_subscribers(&mut raw, &lock_channel(&name), 1);
    assert_eq!(waiter.try_wait(Duration::ZERO), None);
    let forced = Instant::now();
    assert!(lock.force_unlock().unwrap());
    let (reply, at) = waiter.wait_timed(HANG);
    assert_eq!(reply, Ok(String::new()));
    let latency = at.duration_since(forced);
    println!(
        "scenario 5 version {v}: rust force_unlock -> java lock() returned after {:.2} ms",
        ms(latency)
    );
    assert_woken_by_message("java waiter", latency);
    assert!(peer.bool("w", &format!("isheld {name}")));
    // The forced-out Rust holder learns it lost the lock and does not touch Java's hold.
    let released = holder.release();
    assert!(
        matches!(&released, Err(e) if e.is_not_held()),
        "release after force_unlock: {released:?}"
    );
    let tid = peer.thread_id("w");
    assert_eq!(
        hgetall(&mut raw, &name),
        BTreeMap::from([(peer.field(&tid), "1".to_owned())])
    );
    peer.ok("w", &format!("unlock {name}"));
    assert!(!exists(&mut raw, &name));

    // Java holds, Rust waits, Java force-unlocks.
    let name = unique("s5-java-force");
    peer.ok("h", &format!("lock {name}"));
    let mut waiter = RustHolder::spawn(client.get_lock(name.clone()));
    wait_subscribers(&mut raw, &lock_channel(&name), 1);
    assert!(!waiter.has_acquired());
    let forced = Instant::now();
    assert!(peer.bool("f", &format!("forceunlock {name}")));
    let latency = waiter.acquired_at(HANG).duration_since(forced);
    println!(
        "scenario 5 version {v}: java forceUnlock -> rust lock() returned after {:.2} ms",
        ms(latency)
    );
    assert_woken_by_message("rust waiter", latency);
    assert_imse(&peer.err("h", &format!("unlock {name}")));
    assert!(!peer.bool("h", &format!("isheld {name}")));
    assert_single_field(&mut raw, &name, &format!("{}:", client.id()), "1");
    waiter.release().unwrap();
    assert!(!exists(&mut raw, &name));
    peer.quit();
}

/// Releasing the other side's lock is refused on both sides and leaves the key alone.
#[test]
#[parallel]
fn scenario_7_unlocking_the_other_sides_lock() {
    run_versions(7, unlocking_the_other_sides_lock);
}

fn unlocking_the_other_sides_lock(v: &str) {
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();
    let name = unique("s7");
    let lock = client.get_lock(name.clone());
    let snapshot = |conn: &mut redis::Connection| (hgetall(conn, &name), pttl(conn, &name));
    let same = |before: &(BTreeMap<String, String>, i64),
                after: &(BTreeMap<String, String>, i64)| {
        assert_eq!(after.0, before.0, "lock hash changed");
        assert!(after.1 > 0, "PTTL after: {}", after.1);
        assert!(
            (before.1 - after.1).abs() < 1_000,
            "PTTL {} -> {}",
            before.1,
            after.1
        );
    };

    // Java holds; Rust unlock is refused.
    peer.ok("h", &format!("lock {name}"));
    let tid = peer.thread_id("h");
    let before = snapshot(&mut raw);
    assert_eq!(
        before.0,
        BTreeMap::from([(peer.field(&tid), "1".to_owned())])
    );
    let e = lock.unlock().unwrap_err();
    assert!(
        e.is_not_held() && matches!(e, Error::NotHeld { .. }),
        "{e:?}"
    );
    let after = snapshot(&mut raw);
    same(&before, &after);
    // The refused release recorded "held nothing" under its latch (so that a late try of
    // it could only replay that); the latch goes once the release is settled.
    crate::support::eventually(HANG, "the refused release's latch deleted", || {
        latches(&mut raw, &name).is_empty()
    });
    assert!(peer.bool("h", &format!("isheld {name}")));
    assert_eq!(peer.num("h", &format!("holdcount {name}")), 1);
    peer.ok("h", &format!("unlock {name}"));
    assert!(!exists(&mut raw, &name));

    // Rust holds; Java unlock is refused.
    let guard = lock.lock().unwrap();
    let before = snapshot(&mut raw);
    assert_single_field(&mut raw, &name, &format!("{}:", client.id()), "1");
    assert_imse(&peer.err("x", &format!("unlock {name}")));
    let after = snapshot(&mut raw);
    same(&before, &after);
    assert_eq!(lock.hold_count().unwrap(), 1);
    assert!(lock.is_held_by_current_thread().unwrap());
    assert!(peer.bool("x", &format!("islocked {name}")));
    assert!(!guard.is_lost());
    guard.unlock().unwrap();
    assert!(!exists(&mut raw, &name));
    peer.quit();
}

/// Hold counts and remaining TTL read from both sides agree.
#[test]
#[parallel]
fn scenario_8_hold_count_and_ttl_agree() {
    run_versions(8, hold_count_and_ttl_agree);
}

fn hold_count_and_ttl_agree(v: &str) {
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();
    let name = unique("s8");
    let lock = client.get_lock(name.clone());

    let ttls_agree = |who: &str| {
        let java = peer.num("j", &format!("ttl {name}"));
        let rust = lock.remain_time_to_live().unwrap().expect("lock has a ttl");
        let rust = i64::try_from(rust.as_millis()).unwrap();
        assert!(java > 0, "java ttl {java}");
        assert!(
            (java - rust).abs() < 1_000,
            "{who}: java ttl {java} vs rust {rust}"
        );
        println!("scenario 8 version {v}: {who} holds: java ttl {java} ms, rust {rust} ms");
    };

    // Rust holds three times.
    let g1 = lock.lock().unwrap();
    let g2 = lock.lock().unwrap();
    let g3 = lock.lock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 3);
    assert_eq!(peer.num("j", &format!("holdcount {name}")), 0);
    assert!(peer.bool("j", &format!("islocked {name}")));
    assert!(!peer.bool("j", &format!("isheld {name}")));
    assert_single_field(&mut raw, &name, &format!("{}:", client.id()), "3");
    ttls_agree("rust");
    g3.unlock().unwrap();
    g2.unlock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 1);
    g1.unlock().unwrap();
    assert!(!peer.bool("j", &format!("islocked {name}")));

    // Java holds twice.
    peer.ok("j", &format!("lock {name}"));
    peer.ok("j", &format!("lock {name}"));
    assert_eq!(peer.num("j", &format!("holdcount {name}")), 2);
    assert!(lock.is_locked().unwrap());
    assert_eq!(lock.hold_count().unwrap(), 0);
    assert!(!lock.is_held_by_current_thread().unwrap());
    ttls_agree("java");
    let tid = peer.thread_id("j");
    assert_eq!(
        hgetall(&mut raw, &name),
        BTreeMap::from([(format!("{}:{tid}", peer.client_id()), "2".to_owned())])
    );
    peer.ok("j", &format!("unlock {name}"));
    peer.ok("j", &format!("unlock {name}"));
    assert!(!lock.is_locked().unwrap());
    assert_eq!(lock.remain_time_to_live().unwrap(), None);
    assert_eq!(peer.num("j", &format!("ttl {name}")), -2);
    peer.quit();
}

/// Redisson's `threadId` forms, from the Rust side: a hold taken for an explicit owner N
/// is the field `<rust-client-id>:N`, which a Redisson client sees as a foreign hold (it
/// is locked, it is not Java's, not even for a Java thread numbered N, since the client
/// id is part of the owner); a Java waiter behind it is woken by the message of the
/// release another Rust thread makes for the same owner.
#[test]
#[parallel]
fn scenario_22_an_explicit_owner_is_released_from_another_thread() {
    run_versions(22, explicit_owner);
}

fn explicit_owner(v: &str) {
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();
    let name = unique("s22");
    let lock = client.get_lock(name.clone());
    let owner = redmutex::Owner::unique();

    lock.lock_as(owner).unwrap();
    assert_eq!(
        hgetall(&mut raw, &name),
        BTreeMap::from([(format!("{}:{}", client.id(), owner.id()), "1".to_owned())])
    );
    assert!(peer.bool("j", &format!("islocked {name}")));
    assert!(!peer.bool("j", &format!("trylock {name} -1")));
    assert!(!peer.bool("j", &format!("isheldbythread {name} {}", owner.id())));
    assert_imse(&peer.err("j", &format!("unlock {name}")));

    let waiter = peer.send("w", &format!("lock {name}"));
    wait_subscribers(&mut raw, &lock_channel(&name), 1);
    let unlocked = thread::scope(|s| {
        s.spawn(|| {
            // A Rust thread without the owner is refused and changes nothing.
            assert!(matches!(lock.unlock(), Err(Error::NotHeld { .. })));
        })
        .join()
        .unwrap();
        assert_eq!(
            waiter.try_wait(Duration::ZERO),
            None,
            "java lock() returned"
        );
        s.spawn(|| {
            let unlocked = Instant::now();
            lock.unlock_as(owner).unwrap();
            unlocked
        })
        .join()
        .unwrap()
    });
    let (reply, at) = waiter.wait_timed(HANG);
    assert_eq!(reply, Ok(String::new()));
    assert_woken_by_message("java waiter", at.duration_since(unlocked));
    assert!(peer.bool("w", &format!("isheld {name}")));
    peer.ok("w", &format!("unlock {name}"));
    assert!(!lock.is_locked().unwrap());
    peer.quit();
}
