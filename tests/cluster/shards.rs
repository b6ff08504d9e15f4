//! Keys, channels and shards: every object keeps its keys and channel in one slot, locks
//! work and hand off in every shard, and waiters hear both kinds of publish.

use std::time::{Duration, Instant};

use redmutex::ShardedSubscriptionMode;
use serial_test::parallel;

use crate::support::cluster::{self, key_slot};
use crate::support::deploy::{Deployment, tap};
use crate::support::raw::{latch_channel, lock_channel, rwlock_channel, semaphore_channel};
use crate::support::{eventually, unique};
use crate::{WAKE_BOUND, await_subscribed, client, name_on};

/// Every key on the object's node whose name mentions the object, with its slot.
fn keys_of(raw: &mut redis::Connection, name: &str) -> Vec<(String, u16)> {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("*{name}*"))
        .query(raw)
        .unwrap();
    keys.into_iter()
        .map(|k| {
            let slot = key_slot(&k);
            (k, slot)
        })
        .collect()
}

/// Asserts that the keys of `name` that exist now are at least `at_least` and all in
/// `name`'s slot.
fn all_in_one_slot(raw: &mut redis::Connection, name: &str, at_least: usize) {
    let keys = keys_of(raw, name);
    assert!(keys.len() >= at_least, "{keys:?}");
    let slot = key_slot(name);
    for (key, s) in &keys {
        assert_eq!(*s, slot, "{key} is in slot {s}, {name} in {slot}");
    }
}

/// The brace rule, for every kind, seen on the wire: while each object is in use (held,
/// queued, leased, counted, waited on), every key it has and its channel hash to the
/// object's slot, so each of its scripts runs on one node. Plain and braced names.
#[test]
#[parallel(cluster)]
fn every_kind_keeps_its_keys_and_channel_in_one_slot() {
    let c = cluster::shared();
    let holder = c.client();
    let waiter = c.client();
    for braced in [false, true] {
        let name = |kind: &str| {
            let n = unique(kind);
            if braced { format!("{{{n}}}:x") } else { n }
        };

        // RLock, with a waiter on its channel and a release latch.
        let n = name("lock");
        let mut raw = c.raw(&n);
        let lock = holder.get_lock(n.clone());
        let guard = lock.lock().unwrap();
        std::thread::scope(|s| {
            let w = s.spawn(|| {
                waiter
                    .get_lock(n.clone())
                    .try_lock_for(Duration::from_secs(30))
                    .unwrap()
                    .map(|g| g.unlock().unwrap())
                    .is_some()
            });
            let channel = if braced {
                format!("redisson_lock__channel:{n}")
            } else {
                lock_channel(&n)
            };
            assert_eq!(key_slot(&channel), key_slot(&n));
            await_subscribed(c, &channel, 1, 1);
            all_in_one_slot(&mut raw, &n, 1);
            guard.unlock().unwrap();
            assert!(w.join().unwrap());
        });

        // Fair lock with a queued waiter: hash, queue, slots.
        let n = name("fair");
        let mut raw = c.raw(&n);
        let fair = holder.get_fair_lock(n.clone());
        let guard = fair.lock().unwrap();
        std::thread::scope(|s| {
            let w = s.spawn(|| {
                waiter
                    .get_fair_lock(n.clone())
                    .try_lock_for(Duration::from_secs(30))
                    .unwrap()
                    .map(|g| g.unlock().unwrap())
                    .is_some()
            });
            eventually(Duration::from_secs(10), "a queued waiter", || {
                keys_of(&mut raw, &n).len() >= 3
            });
            all_in_one_slot(&mut raw, &n, 3);
            guard.unlock().unwrap();
            assert!(w.join().unwrap());
        });

        // Read-write lock: hash and read timeout keys, channel.
        let n = name("rw");
        let mut raw = c.raw(&n);
        let rw = holder.get_read_write_lock(n.clone());
        let r1 = rw.read_lock().lock().unwrap();
        let r2 = rw.read_lock().lock().unwrap();
        all_in_one_slot(&mut raw, &n, 3);
        let channel = if braced {
            format!("redisson_rwlock:{n}")
        } else {
            rwlock_channel(&n)
        };
        assert_eq!(key_slot(&channel), key_slot(&n));
        let ((), got) = tap(c, &channel, || {
            r2.unlock().unwrap();
            r1.unlock().unwrap();
        });
        assert_eq!(got, ["0"]);

        // Semaphore and permit semaphore: counter, permit zset, channel.
        let n = name("sem");
        let mut raw = c.raw(&n);
        let sem = holder.get_semaphore(n.clone());
        assert!(sem.try_set_permits(2).unwrap());
        let permits = sem.acquire().unwrap();
        all_in_one_slot(&mut raw, &n, 1);
        let channel = if braced {
            format!("redisson_sc:{n}")
        } else {
            semaphore_channel(&n)
        };
        assert_eq!(key_slot(&channel), key_slot(&n));
        drop(permits);
        assert!(sem.delete().unwrap());
        let n = name("psem");
        let mut raw = c.raw(&n);
        let psem = holder.get_permit_expirable_semaphore(n.clone());
        assert!(psem.try_set_permits(2).unwrap());
        let id = psem.acquire_with_lease(Duration::from_secs(30)).unwrap();
        all_in_one_slot(&mut raw, &n, 2);
        psem.release(id).unwrap();
        assert!(psem.delete().unwrap());

        // Latch: a plain name keeps count and channel in one slot. Redisson braces the
        // latch channel even around a braced name, which puts it in another slot: its
        // scripts (they publish) then fail with CROSSSLOT on a cluster, as Redisson's
        // own do.
        let n = name("latch");
        let mut raw = c.raw(&n);
        let latch = holder.get_count_down_latch(n.clone());
        if braced {
            assert_ne!(key_slot(latch_channel(&n)), key_slot(&n));
            let err = latch.try_set_count(1).unwrap_err();
            assert!(err.to_string().contains("CrossSlot"), "{err}");
        } else {
            assert_eq!(key_slot(latch_channel(&n)), key_slot(&n));
            assert!(latch.try_set_count(1).unwrap());
            all_in_one_slot(&mut raw, &n, 1);
            let ((), got) = tap(c, &latch_channel(&n), || latch.count_down().unwrap());
            assert_eq!(got, ["0"]);
        }
    }
}

/// In every shard a lock works and its release wakes a waiter of another client by
/// message; the waiter subscribed on the shard's master, both ways (AUTO mode).
#[test]
#[parallel(cluster)]
fn locks_in_every_shard_are_handed_off_by_message() {
    let c = cluster::shared();
    let holder = c.client();
    let waiter = c.client();
    for master in c.masters() {
        let name = name_on(&master, "shard");
        let guard = holder.get_lock(name.clone()).lock().unwrap();
        std::thread::scope(|s| {
            let w = s.spawn(|| {
                let g = waiter
                    .get_lock(name.clone())
                    .try_lock_for(Duration::from_secs(60))
                    .unwrap()
                    .expect("acquired");
                let at = Instant::now();
                g.unlock().unwrap();
                at
            });
            await_subscribed(c, &lock_channel(&name), 1, 1);
            let released = Instant::now();
            guard.unlock().unwrap();
            let woke = w.join().unwrap().duration_since(released);
            println!("shard {}: hand-off {woke:?}", master.port);
            assert!(woke < WAKE_BOUND, "{woke:?}");
        });
    }
}

/// A foreign hold (as a Redisson peer leaves it) released with `SPUBLISH` (Redisson
/// 3.23.5, 4.x AUTO) and then one released with `PUBLISH` on another node (Redisson 4.x
/// OFF): an AUTO waiter wakes at once for both, long before the 60 s TTL.
#[test]
#[parallel(cluster)]
fn a_waiter_wakes_on_spublish_and_on_publish() {
    let c = cluster::shared();
    let waiter = c.client();
    let masters = c.masters();
    // Redis 6.2 has no SPUBLISH: only a plain publish can wake anyone there.
    let kinds: &[bool] = if crate::support::server().has_sharded_pubsub() {
        &[true, false]
    } else {
        &[false]
    };
    for &sharded in kinds {
        let name = name_on(&masters[0], "foreign");
        let channel = lock_channel(&name);
        let mut raw = c.raw(&name);
        let _: () = redis::pipe()
            .cmd("HSET")
            .arg(&name)
            .arg("java-peer:1")
            .arg(1)
            .cmd("PEXPIRE")
            .arg(&name)
            .arg(60_000)
            .query(&mut raw)
            .unwrap();
        std::thread::scope(|s| {
            let w = s.spawn(|| {
                let g = waiter
                    .get_lock(name.clone())
                    .try_lock_for(Duration::from_secs(90))
                    .unwrap()
                    .expect("acquired");
                let at = Instant::now();
                g.unlock().unwrap();
                at
            });
            await_subscribed(c, &channel, 1, 1);
            let released = Instant::now();
            let _: () = redis::cmd("DEL").arg(&name).query(&mut raw).unwrap();
            if sharded {
                let _: i64 = redis::cmd("SPUBLISH")
                    .arg(&channel)
                    .arg("0")
                    .query(&mut raw)
                    .unwrap();
            } else {
                // Plain publishes reach every node; send it from another master.
                let mut other = masters[1].conn();
                let _: i64 = redis::cmd("PUBLISH")
                    .arg(&channel)
                    .arg("0")
                    .query(&mut other)
                    .unwrap();
            }
            let woke = w.join().unwrap().duration_since(released);
            println!(
                "woken by {}: {woke:?}",
                if sharded { "SPUBLISH" } else { "PUBLISH" }
            );
            assert!(woke < WAKE_BOUND, "{woke:?}");
        });
    }
}

/// The forced modes: ON subscribes and publishes sharded only, OFF plain only (as
/// Redisson 4.x with `shardedSubscriptionMode` ON / OFF), so each reaches exactly the
/// peers listening that way. On a cluster without sharded pub/sub (Redis 6.2) ON fails
/// at connect with a configuration error that says why, instead of waiters that would
/// sleep out every lease.
#[test]
#[parallel(cluster)]
fn forced_modes_subscribe_and_publish_one_kind() {
    let c = cluster::shared();
    let modes: &[(ShardedSubscriptionMode, i64, i64)] =
        if crate::support::server().has_sharded_pubsub() {
            &[
                (ShardedSubscriptionMode::On, 0, 1),
                (ShardedSubscriptionMode::Off, 1, 0),
            ]
        } else {
            let on = redmutex::Client::new(
                c.builder()
                    .sharded_subscription_mode(ShardedSubscriptionMode::On)
                    .build(),
            );
            match on {
                Err(redmutex::Error::Config(why)) => {
                    assert!(why.contains("no sharded pub/sub"), "{why}");
                    println!("sharded mode ON refused at connect: {why}");
                }
                Err(other) => panic!("ON without sharded pub/sub: {other}"),
                Ok(_) => panic!("ON without sharded pub/sub connected"),
            }
            &[(ShardedSubscriptionMode::Off, 1, 0)]
        };
    for &(mode, plain, sharded) in modes {
        let holder = client(|b| b.sharded_subscription_mode(mode));
        let waiter = client(|b| b.sharded_subscription_mode(mode));
        let name = unique("mode");
        let channel = lock_channel(&name);
        let guard = holder.get_lock(name.clone()).lock().unwrap();
        std::thread::scope(|s| {
            let w = s.spawn(|| {
                waiter
                    .get_lock(name.clone())
                    .try_lock_for(Duration::from_secs(60))
                    .unwrap()
                    .map(|g| g.unlock().unwrap())
                    .is_some()
            });
            await_subscribed(c, &channel, plain, sharded);
            // What the holder's unlock publishes, heard by a sharded and a plain tap.
            let mut plain_tap = c.raw(&channel);
            let mut ps = plain_tap.as_pubsub();
            ps.subscribe(&channel).unwrap();
            let ((), sharded_got) = tap(c, &channel, || guard.unlock().unwrap());
            ps.set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
            let plain_got = ps.get_message().is_ok();
            // The holder's unlock, then the waiter's own. Without sharded pub/sub
            // (6.2) the deployment's tap is a plain one: only the plain tap counts.
            if crate::support::server().has_sharded_pubsub() {
                assert_eq!(
                    !sharded_got.is_empty(),
                    sharded == 1,
                    "{mode:?}: {sharded_got:?}"
                );
            }
            assert_eq!(plain_got, plain == 1, "{mode:?}");
            assert!(w.join().unwrap());
        });
    }
}

/// `publish_both`: an unlock goes out with `SPUBLISH` and `PUBLISH`, so a sharded and a
/// plain listener (Redisson 3.23.5 next to 4.x set to OFF) both hear it, once each.
#[test]
#[parallel(cluster)]
fn publish_both_reaches_sharded_and_plain_listeners() {
    let c = cluster::shared();
    let holder = client(|b| b.publish_both(true));
    let name = unique("both");
    let channel = lock_channel(&name);
    let guard = holder.get_lock(name.clone()).lock().unwrap();
    let mut plain_tap = c.raw(&channel);
    let mut ps = plain_tap.as_pubsub();
    ps.subscribe(&channel).unwrap();
    let ((), sharded_got) = tap(c, &channel, || guard.unlock().unwrap());
    ps.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let plain_got: String = ps.get_message().unwrap().get_payload().unwrap();
    assert_eq!(sharded_got, ["0"]);
    assert_eq!(plain_got, "0");
    assert!(ps.get_message().is_err(), "one plain message only");
}
