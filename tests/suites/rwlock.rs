//! The read-write lock: Redisson's `RedissonReadWriteLockTest` checklist (protocol doc
//! §10.3) where it applies, and the hash, timeout keys and channel of §4 checked with
//! raw commands.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::support::deploy::{Deployment, tap};
use crate::support::raw::{await_numsub, hgetall, numsub, pttl, read_timeout_key, rwlock_channel};
use crate::support::{await_count, eventually, unique};
use redmutex::{Error, Loss};

/// The read owner field of `client` in the hash (its only non-mode field without
/// `:write`).
fn read_owner(raw: &mut redis::Connection, name: &str, client: &redmutex::Client) -> String {
    hgetall(raw, name)
        .into_keys()
        .find(|f| f.starts_with(client.id()) && !f.ends_with(":write"))
        .expect("a read field of this client")
}

/// The wire layout of §4.1/§4.2: mode, read counts per owner, one timeout key per read
/// hold with that hold's lease, write field with `:write`; releases remove them again.
pub(crate) fn read_holds_have_timeout_keys_and_write_holds_a_write_field<D: Deployment>(d: &D) {
    let client = d.client();
    let name = unique("rw");
    let mut raw = d.raw(&name);
    let rw = client.get_read_write_lock(name.clone());
    let r1 = rw.read_lock().lock().unwrap();
    let r2 = rw
        .read_lock()
        .lock_with_lease(Duration::from_secs(100))
        .unwrap();
    let owner = read_owner(&mut raw, &name, &client);
    assert!(owner.starts_with(&format!("{}:", client.id())));
    assert_eq!(
        hgetall(&mut raw, &name),
        BTreeMap::from([
            ("mode".to_owned(), "read".to_owned()),
            (owner.clone(), "2".to_owned()),
        ])
    );
    let t1 = pttl(&mut raw, &read_timeout_key(&name, &owner, 1));
    let t2 = pttl(&mut raw, &read_timeout_key(&name, &owner, 2));
    assert!((1..=30_000).contains(&t1), "{t1}");
    assert!((90_000..=100_000).contains(&t2), "{t2}");
    assert!(
        pttl(&mut raw, &name) > 90_000,
        "the hash lives as long as the longest hold"
    );
    assert_eq!(rw.read_lock().hold_count().unwrap(), 2);
    r2.unlock().unwrap();
    assert_eq!(pttl(&mut raw, &read_timeout_key(&name, &owner, 2)), -2);
    let left = pttl(&mut raw, &name);
    assert!(
        left <= 30_000 && left > 0,
        "the hash shrinks to the live hold: {left}"
    );
    r1.unlock().unwrap();
    assert!(hgetall(&mut raw, &name).is_empty());
    assert_eq!(pttl(&mut raw, &read_timeout_key(&name, &owner, 1)), -2);

    let w = rw.write_lock().lock().unwrap();
    let fields = hgetall(&mut raw, &name);
    assert_eq!(fields.get("mode").map(String::as_str), Some("write"));
    assert_eq!(
        fields.get(&format!("{owner}:write")).map(String::as_str),
        Some("1")
    );
    w.unlock().unwrap();
    assert!(hgetall(&mut raw, &name).is_empty());
}

/// Read unlock publishes "0", write unlock "1", both on `redisson_rwlock:{name}`.
pub(crate) fn unlock_messages_follow_redisson<D: Deployment>(d: &D) {
    let client = d.client();
    let name = unique("rw");
    let rw = client.get_read_write_lock(name.clone());
    let channel = rwlock_channel(&name);
    let ((), got) = tap(d, &channel, || {
        rw.read_lock().lock().unwrap().unlock().unwrap();
        rw.write_lock().lock().unwrap().unlock().unwrap();
    });
    assert_eq!(got, vec!["0".to_owned(), "1".to_owned()]);
}

/// testHoldCount, testIsHeldByCurrentThread, testIsLocked, testLockUnlock.
pub(crate) fn hold_counts_and_queries<D: Deployment>(d: &D) {
    let client = d.client();
    let rw = client.get_read_write_lock(unique("rw"));
    let (read, write) = (rw.read_lock(), rw.write_lock());
    assert_eq!(read.hold_count().unwrap(), 0);
    assert!(!read.is_locked().unwrap() && !write.is_locked().unwrap());
    let r = read.lock().unwrap();
    assert_eq!(read.hold_count().unwrap(), 1);
    assert!(read.is_held_by_current_thread().unwrap());
    assert!(read.is_locked().unwrap() && !write.is_locked().unwrap());
    r.unlock().unwrap();
    assert_eq!(read.hold_count().unwrap(), 0);
    let w1 = write.lock().unwrap();
    let w2 = write.lock().unwrap();
    assert_eq!(write.hold_count().unwrap(), 2);
    assert!(write.is_held_by_current_thread().unwrap());
    assert!(write.is_locked().unwrap() && !read.is_locked().unwrap());
    std::thread::scope(|s| {
        s.spawn(|| {
            assert!(!write.is_held_by_current_thread().unwrap());
            assert!(write.is_locked().unwrap());
            assert_eq!(write.hold_count().unwrap(), 0);
            assert!(read.try_lock().unwrap().is_none());
            // testUnlockFail
            assert!(matches!(read.unlock(), Err(Error::NotHeld { .. })));
            assert!(matches!(write.unlock(), Err(Error::NotHeld { .. })));
        });
    });
    w2.unlock().unwrap();
    assert_eq!(write.hold_count().unwrap(), 1);
    w1.unlock().unwrap();
    assert!(!write.is_locked().unwrap());
    assert!(read.remain_time_to_live().unwrap().is_none());
}

/// testReadLockIsLocked, testWR: a writer may also read (downgrade); the write lock stays
/// locked after that read is released, and is free after the write release.
pub(crate) fn a_writer_may_take_the_read_lock<D: Deployment>(d: &D) {
    let client = d.client();
    let rw = client.get_read_write_lock(unique("rw"));
    let w = rw.write_lock().lock().unwrap();
    assert!(!rw.read_lock().is_locked().unwrap());
    let r = rw.read_lock().try_lock().unwrap().expect("downgrade");
    assert!(rw.read_lock().is_locked().unwrap());
    r.unlock().unwrap();
    assert!(rw.write_lock().is_locked().unwrap());
    w.unlock().unwrap();
    assert!(!rw.write_lock().is_locked().unwrap());
}

/// testWriteLock / testWriteReadReentrancy: a writer that downgrades keeps the lock in
/// read mode after its write release (silently, as Redisson); other readers then get in,
/// and the writer cannot take the write lock back while readers are present (no
/// upgrade).
pub(crate) fn downgrade_keeps_read_mode_and_forbids_upgrade<D: Deployment>(d: &D) {
    let client = d.client();
    let other = d.client();
    let name = unique("rw");
    let mut raw = d.raw(&name);
    let rw = client.get_read_write_lock(name.clone());
    let rw_other = other.get_read_write_lock(name.clone());
    let w1 = rw.write_lock().lock().unwrap();
    let w2 = rw.write_lock().lock().unwrap();
    assert!(rw_other.read_lock().try_lock().unwrap().is_none());
    assert!(rw_other.write_lock().try_lock().unwrap().is_none());
    let r = rw.read_lock().lock().unwrap();
    let channel = rwlock_channel(&name);
    let ((), got) = tap(d, &channel, || {
        w2.unlock().unwrap();
        w1.unlock().unwrap();
    });
    assert!(
        got.is_empty(),
        "no message when the writer still reads: {got:?}"
    );
    let fields = hgetall(&mut raw, &name);
    assert_eq!(
        fields.get("mode").map(String::as_str),
        Some("read"),
        "{fields:?}"
    );
    assert!(!rw.write_lock().is_locked().unwrap());
    // Other readers share it now; nobody may write, the downgraded reader included.
    let other_read = rw_other.read_lock().try_lock().unwrap().expect("read mode");
    assert!(rw.write_lock().try_lock().unwrap().is_none(), "no upgrade");
    assert!(
        rw.write_lock()
            .try_lock_for(Duration::from_millis(300))
            .unwrap()
            .is_none()
    );
    other_read.unlock().unwrap();
    assert!(
        rw.write_lock().try_lock().unwrap().is_none(),
        "own read still blocks"
    );
    r.unlock().unwrap();
    rw.write_lock()
        .try_lock()
        .unwrap()
        .expect("free")
        .unlock()
        .unwrap();
}

/// testWriteRead: twelve readers blocked by a writer all get in after the single "1"
/// of the write unlock, long before any TTL.
pub(crate) fn a_write_unlock_wakes_every_waiting_reader<D: Deployment>(d: &D) {
    let writer = d.client();
    let readers = [d.client(), d.client(), d.client()];
    let name = unique("rw");
    let mut raw = d.raw(&name);
    let rw = writer.get_read_write_lock(name.clone());
    let w = rw.write_lock().lock().unwrap();
    let channel = rwlock_channel(&name);
    let inside = AtomicU64::new(0);
    let release = AtomicU64::new(0);
    std::thread::scope(|s| {
        for i in 0..12 {
            let (client, name, inside, release) =
                (&readers[i % 3], name.clone(), &inside, &release);
            s.spawn(move || {
                let rw = client.get_read_write_lock(name);
                let r = rw
                    .read_lock()
                    .try_lock_for(Duration::from_secs(60))
                    .unwrap()
                    .expect("reader got in");
                inside.fetch_add(1, Ordering::SeqCst);
                while release.load(Ordering::SeqCst) == 0 {
                    std::thread::sleep(Duration::from_millis(5));
                }
                r.unlock().unwrap();
            });
        }
        eventually(Duration::from_secs(20), "readers subscribed", || {
            numsub(&mut raw, &channel) == 3
        });
        // Time passing is the point: let every reader settle into its sleep.
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(inside.load(Ordering::SeqCst), 0);
        let unlocked = Instant::now();
        w.unlock().unwrap();
        eventually(
            Duration::from_secs(20),
            "all readers inside together",
            || inside.load(Ordering::SeqCst) == 12,
        );
        assert!(unlocked.elapsed() < Duration::from_secs(20), "woke by TTL");
        release.store(1, Ordering::SeqCst);
    });
    assert!(hgetall(&mut raw, &name).is_empty());
}

/// testMultiRead: read force unlock on a free lock is false; two readers block a writer,
/// which gets in once both left, woken by the last read unlock's "0".
pub(crate) fn a_writer_waits_for_every_reader<D: Deployment>(d: &D) {
    let client = d.client();
    let other = d.client();
    let name = unique("rw");
    let rw = client.get_read_write_lock(name.clone());
    assert!(!rw.read_lock().force_unlock().unwrap());
    let r1 = rw.read_lock().lock().unwrap();
    let rw_other = other.get_read_write_lock(name.clone());
    let r2_held = AtomicU64::new(0);
    let r2_release = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            let r2 = rw_other.read_lock().lock().unwrap();
            r2_held.store(1, Ordering::SeqCst);
            while r2_release.load(Ordering::SeqCst) == 0 {
                std::thread::sleep(Duration::from_millis(5));
            }
            r2.unlock().unwrap();
        });
        await_count(&r2_held, 1, "second reader in");
        let writer = s.spawn(|| {
            let w = rw_other.write_lock().lock().unwrap();
            let mine = rw_other.write_lock().is_held_by_current_thread().unwrap();
            w.unlock().unwrap();
            (Instant::now(), mine)
        });
        std::thread::sleep(Duration::from_millis(300)); // the writer is blocked meanwhile
        assert!(!rw.write_lock().is_locked().unwrap());
        r1.unlock().unwrap();
        assert!(!rw.write_lock().is_locked().unwrap(), "one reader is left");
        let last = Instant::now();
        r2_release.store(1, Ordering::SeqCst);
        let (acquired, mine) = writer.join().unwrap();
        assert!(mine);
        assert!(
            acquired.duration_since(last) < Duration::from_secs(20),
            "woke by TTL"
        );
    });
}

/// testForceUnlock: each half's force unlock clears only its own mode.
pub(crate) fn force_unlock_clears_only_its_own_mode<D: Deployment>(d: &D) {
    let client = d.client();
    let rw = client.get_read_write_lock(unique("rw"));
    let r = rw.read_lock().lock().unwrap();
    assert!(!rw.write_lock().force_unlock().unwrap());
    assert!(rw.read_lock().is_locked().unwrap());
    assert!(rw.read_lock().force_unlock().unwrap());
    assert!(!rw.read_lock().is_locked().unwrap());
    assert!(matches!(r.unlock(), Err(Error::LockLost { .. })));
    let w = rw.write_lock().lock().unwrap();
    assert!(!rw.read_lock().force_unlock().unwrap());
    assert!(rw.write_lock().is_locked().unwrap());
    assert!(rw.write_lock().force_unlock().unwrap());
    assert!(!rw.write_lock().is_locked().unwrap());
    assert!(matches!(w.unlock(), Err(Error::LockLost { .. })));
}

/// testWriteLockExpiration: write re-entry adds its lease to the TTL, so a short
/// re-entry does not shorten the first lease.
pub(crate) fn write_reentry_adds_to_the_ttl<D: Deployment>(d: &D) {
    let client = d.client();
    let other = d.client();
    let name = unique("rw");
    let mut raw = d.raw(&name);
    let rw = client.get_read_write_lock(name.clone());
    let w1 = rw
        .write_lock()
        .try_lock_with_lease(Duration::ZERO, Duration::from_secs(3))
        .unwrap()
        .unwrap();
    let w2 = rw
        .write_lock()
        .try_lock_with_lease(Duration::ZERO, Duration::from_secs(1))
        .unwrap()
        .unwrap();
    let ttl = pttl(&mut raw, &name);
    assert!(ttl > 3_000 && ttl <= 4_000, "additive: {ttl}");
    std::thread::sleep(Duration::from_millis(1_200)); // past the second lease
    let rw_other = other.get_read_write_lock(name);
    assert!(rw_other.write_lock().try_lock().unwrap().is_none());
    assert!(rw_other.read_lock().try_lock().unwrap().is_none());
    w2.unlock().unwrap();
    w1.unlock().unwrap();
}

/// testExpireRead: a reader with a lease does not keep another reader out.
pub(crate) fn readers_share_the_lock<D: Deployment>(d: &D) {
    let client = d.client();
    let other = d.client();
    let name = unique("rw");
    let r = client
        .get_read_write_lock(name.clone())
        .read_lock()
        .lock_with_lease(Duration::from_secs(2))
        .map(|g| g.detach());
    r.unwrap();
    let rw_other = other.get_read_write_lock(name);
    let started = Instant::now();
    let g = rw_other.read_lock().lock().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "compatible at once"
    );
    g.unlock().unwrap();
}

/// testExpireWrite: a write lease runs out, another thread takes the write lock; the
/// first guard's release reports the loss.
pub(crate) fn an_expired_write_lease_passes_the_lock_on<D: Deployment>(d: &D) {
    let client = d.client();
    let rw = client.get_read_write_lock(unique("rw"));
    let started = Instant::now();
    let w = rw
        .write_lock()
        .lock_with_lease(Duration::from_millis(800))
        .unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            let g = rw.write_lock().lock().unwrap();
            assert!(started.elapsed() >= Duration::from_millis(700));
            g.unlock().unwrap();
        });
    });
    assert!(w.is_lost());
    assert!(matches!(w.unlock(), Err(Error::LockLost { .. })));
}

/// testReadLockExpiration: with readers of 2 s and 1 s leases, the hash follows the
/// longest, and a writer gets in only after it.
pub(crate) fn a_writer_waits_for_the_longest_read_lease<D: Deployment>(d: &D) {
    let readers = [d.client(), d.client()];
    let writer = d.client();
    let name = unique("rw");
    let started = Instant::now();
    for (client, ms) in readers.iter().zip([2_000, 1_000]) {
        client
            .get_read_write_lock(name.clone())
            .read_lock()
            .lock_with_lease(Duration::from_millis(ms))
            .unwrap()
            .detach();
    }
    let rw = writer.get_read_write_lock(name);
    let w = rw.write_lock().lock().unwrap();
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(1_800), "{waited:?}");
    assert!(waited < Duration::from_secs(20), "{waited:?}");
    w.unlock().unwrap();
}

/// testReadLockLeaseTimeoutDiffThreadsRRW: a reader that leaves shrinks the hash's TTL
/// to the remaining reader's lease, which the writer then waits out.
pub(crate) fn a_leaving_reader_shrinks_the_ttl_to_the_remaining_readers<D: Deployment>(d: &D) {
    let client = d.client();
    let other = d.client();
    let name = unique("rw");
    let mut raw = d.raw(&name);
    client
        .get_read_write_lock(name.clone())
        .read_lock()
        .lock_with_lease(Duration::from_secs(2))
        .unwrap()
        .detach();
    let rw_other = other.get_read_write_lock(name.clone());
    let r2 = rw_other
        .read_lock()
        .lock_with_lease(Duration::from_secs(60))
        .unwrap();
    assert!(pttl(&mut raw, &name) > 50_000);
    r2.unlock().unwrap();
    let left = pttl(&mut raw, &name);
    assert!(left > 0 && left <= 2_000, "{left}");
    let w = rw_other
        .write_lock()
        .try_lock_for(Duration::from_secs(20))
        .unwrap()
        .expect("after the first reader's lease");
    w.unlock().unwrap();
}

/// testMultiInstanceReadLockZombieCleanup: a reader whose client died stops blocking a
/// writer once its timeout key expires: the live client renews only its own timeout keys,
/// and its unlock then finds no live reader and frees the lock.
pub(crate) fn a_dead_clients_reader_stops_blocking_after_its_timeout<D: Deployment>(d: &D) {
    // Long enough that a renewal delayed by a loaded machine still lands in time.
    let watchdog = Duration::from_secs(2);
    let dead = d.client_with_watchdog(watchdog);
    let live = d.client_with_watchdog(watchdog);
    let writer = d.client();
    let name = unique("rw");
    let mut raw = d.raw(&name);
    dead.get_read_write_lock(name.clone())
        .read_lock()
        .lock()
        .unwrap()
        .detach();
    let dead_owner = read_owner(&mut raw, &name, &dead);
    let live_rw = live.get_read_write_lock(name.clone());
    let live_read = live_rw.read_lock().lock().unwrap();
    dead.shutdown(); // no more renewals for the dead reader
    let dead_key = read_timeout_key(&name, &dead_owner, 1);
    eventually(
        Duration::from_secs(10),
        "dead reader's timeout expired",
        || pttl(&mut raw, &dead_key) == -2,
    );
    // The live renewals keep the hash, with the dead reader's field still in it.
    for _ in 0..2 {
        crate::support::await_renewal("of the live reader", || pttl(&mut raw, &name));
    }
    assert!(hgetall(&mut raw, &name).contains_key(&dead_owner));
    assert!(pttl(&mut raw, &name) > 0);
    crate::support::watched::assert_kept_or_cautious(live_read.loss(), "the live reader");
    let wrw = writer.get_read_write_lock(name.clone());
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            let g = wrw
                .write_lock()
                .try_lock_for(Duration::from_secs(30))
                .unwrap()
                .expect("writer got in");
            g.unlock().unwrap();
            Instant::now()
        });
        await_numsub(&mut raw, &rwlock_channel(&name), 1);
        let unlocked = Instant::now();
        live_read.unlock().unwrap();
        assert!(w.join().unwrap().duration_since(unlocked) < Duration::from_secs(20));
    });
}

/// testReadWriteTTL / testReadLockExpirationRenewal: under a 1 s watchdog, the write
/// field, the read timeout key and the hash never expire while held, and the read hold
/// stays renewed after the write release.
pub(crate) fn the_watchdog_renews_read_and_write_holds<D: Deployment>(d: &D) {
    let client = d.client_with_watchdog(Duration::from_secs(1));
    let name = unique("rw");
    let mut raw = d.raw(&name);
    let rw = client.get_read_write_lock(name.clone());
    let w = rw.write_lock().lock().unwrap();
    let r = rw.read_lock().lock().unwrap();
    assert_eq!(client.renewing_count(), 2);
    let owner = read_owner(&mut raw, &name, &client);
    let key = read_timeout_key(&name, &owner, 1);
    let watch = |raw: &mut redis::Connection, secs: u64| {
        let end = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < end {
            assert!(pttl(raw, &name) > 0, "hash expired");
            assert!(pttl(raw, &key) > 0, "read timeout key expired");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    watch(&mut raw, 3);
    w.unlock().unwrap();
    assert_eq!(client.renewing_count(), 1);
    watch(&mut raw, 3);
    crate::support::watched::assert_kept_or_cautious(r.loss(), "the read hold");
    r.unlock().unwrap();
    assert_eq!(client.renewing_count(), 0);
    assert!(hgetall(&mut raw, &name).is_empty());
}

/// A read hold whose field vanished is reported lost by the read renewal, through the
/// flag, the signal and the release.
pub(crate) fn a_vanished_read_hold_is_reported_lost<D: Deployment>(d: &D) {
    let client = d.client_with_watchdog(Duration::from_secs(1));
    let name = unique("rw");
    let mut raw = d.raw(&name);
    let rw = client.get_read_write_lock(name.clone());
    let r = rw.read_lock().lock().unwrap();
    let signal = r.loss_signal();
    let _: () = redis::cmd("DEL").arg(&name).query(&mut raw).unwrap();
    assert_eq!(
        signal.recv_timeout(Duration::from_secs(5)).unwrap(),
        Loss::Lost
    );
    assert!(matches!(r.unlock(), Err(Error::LockLost { .. })));
    assert_eq!(client.renewing_count(), 0);
}

/// testAutoExpire: an abandoned write lock of a shut-down client expires.
pub(crate) fn an_abandoned_write_lock_expires<D: Deployment>(d: &D) {
    let holder = d.client_with_watchdog(Duration::from_secs(1));
    let other = d.client();
    let name = unique("rw");
    holder
        .get_read_write_lock(name.clone())
        .write_lock()
        .lock()
        .unwrap()
        .detach();
    holder.shutdown();
    let rw = other.get_read_write_lock(name);
    assert!(rw.write_lock().is_locked().unwrap());
    eventually(Duration::from_secs(5), "write lock expired", || {
        !rw.write_lock().is_locked().unwrap()
    });
}

/// testName: a braced name keeps its own hash tag in the timeout keys and the channel.
pub(crate) fn braced_names_keep_their_tag<D: Deployment>(d: &D) {
    let client = d.client();
    let name = format!("{{{}}}:abc:key", unique("rw"));
    let mut raw = d.raw(&name);
    let rw = client.get_read_write_lock(name.clone());
    let r = rw.read_lock().lock().unwrap();
    let owner = read_owner(&mut raw, &name, &client);
    assert!(pttl(&mut raw, &format!("{name}:{owner}:rwlock_timeout:1")) > 0);
    let ((), got) = tap(d, &format!("redisson_rwlock:{name}"), || {
        r.unlock().unwrap();
    });
    assert_eq!(got, vec!["0".to_owned()]);
}

/// testConcurrency_*: a random mix of readers and writers of three clients; writers are
/// alone, readers overlap only readers.
pub(crate) fn readers_and_writers_of_several_clients_exclude_correctly<D: Deployment>(d: &D) {
    let clients: Vec<_> = (0..3).map(|_| d.client()).collect();
    let name = unique("rw");
    // > 0: that many readers inside; -1: a writer inside.
    let state = AtomicI64::new(0);
    let done = AtomicU64::new(0);
    std::thread::scope(|s| {
        for (c, client) in clients.iter().enumerate() {
            for t in 0..3 {
                let (name, state, done) = (name.clone(), &state, &done);
                s.spawn(move || {
                    let rw = client.get_read_write_lock(name);
                    for i in 0..20 {
                        if (c + t + i) % 3 == 0 {
                            let g = rw.write_lock().lock().unwrap();
                            assert_eq!(state.swap(-1, Ordering::SeqCst), 0, "writer not alone");
                            std::thread::sleep(Duration::from_millis(1));
                            assert_eq!(state.swap(0, Ordering::SeqCst), -1);
                            g.unlock().unwrap();
                        } else {
                            let g = rw.read_lock().lock().unwrap();
                            assert!(
                                state.fetch_add(1, Ordering::SeqCst) >= 0,
                                "reader with writer"
                            );
                            std::thread::sleep(Duration::from_millis(1));
                            state.fetch_sub(1, Ordering::SeqCst);
                            g.unlock().unwrap();
                        }
                        done.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
        }
    });
    assert_eq!(done.load(Ordering::SeqCst), 3 * 3 * 20);
}

/// This suite's cases, listed once; each deployment binary stamps them all with one line
/// (`tests/single`, `tests/cluster`, `tests/sentinel`), through [`redmutex_harness::cases!`]
/// (`own on ...` or `shared(key) on ...`), with this file declared as `rwlock_suite` at its root.
macro_rules! rwlock_cases {
    ($($on:tt)*) => {
        redmutex_harness::cases!($($on)*; rwlock_suite;
            [
                read_holds_have_timeout_keys_and_write_holds_a_write_field,
                unlock_messages_follow_redisson,
                hold_counts_and_queries,
                a_writer_may_take_the_read_lock,
                downgrade_keeps_read_mode_and_forbids_upgrade,
                a_write_unlock_wakes_every_waiting_reader,
                a_writer_waits_for_every_reader,
                force_unlock_clears_only_its_own_mode,
                write_reentry_adds_to_the_ttl,
                readers_share_the_lock,
                an_expired_write_lease_passes_the_lock_on,
                a_writer_waits_for_the_longest_read_lease,
                a_leaving_reader_shrinks_the_ttl_to_the_remaining_readers,
                a_dead_clients_reader_stops_blocking_after_its_timeout,
                the_watchdog_renews_read_and_write_holds,
                a_vanished_read_hold_is_reported_lost,
                an_abandoned_write_lock_expires,
                braced_names_keep_their_tag,
                readers_and_writers_of_several_clients_exclude_correctly,
            ]
            alone [
            ]
        );
    };
}
pub(crate) use rwlock_cases;
