//! Replica sync (`check_lock_synced_slaves`) in cluster mode, as Redisson does it there:
//! `WAIT` after every acquire on the key's master, counted against that master's own
//! replicas, and the distinct error when its replica acknowledges nothing.

use std::time::Duration;

use redmutex::Error;
use serial_test::serial;

use crate::name_on;
use crate::support::cluster;
use crate::support::deploy::Deployment;
use crate::support::raw::{calls, exists};

/// Which of a cycle's `WAIT`s a count covers.
#[derive(Clone, Copy, PartialEq)]
enum Counted {
    Acquires,
    Releases,
}

/// On each master in turn: `on` takes a lock there twice (two levels) and frees it, and
/// the counted half of that cycle must send exactly two `WAIT`s, both on the key's own
/// master (`WAIT` counts per connection, so it must follow the script there); then one
/// cycle of `off` must send none.
fn two_waits_on_each_own_master(
    on: &redmutex::Client,
    off: &redmutex::Client,
    tag: &str,
    counted: Counted,
) {
    let c = cluster::shared();
    let masters = c.masters();
    let waits = |m: &cluster::ClusterNode| calls(&mut m.conn(), "wait");
    for master in &masters {
        let name = name_on(master, tag);
        let lock = on.get_lock(&name);
        let mut before: Vec<u64> = masters.iter().map(waits).collect();
        let outer = lock.lock().unwrap();
        let inner = lock.lock().unwrap();
        if counted == Counted::Releases {
            before = masters.iter().map(waits).collect();
        }
        inner.unlock().unwrap();
        outer.unlock().unwrap();
        for (m, before) in masters.iter().zip(before) {
            let expected = if m.port == master.port { 2 } else { 0 };
            assert_eq!(waits(m) - before, expected, "master {}", m.port);
        }
        let before = waits(master);
        off.get_lock(&name).lock().unwrap().unlock().unwrap();
        assert_eq!(waits(master), before, "a WAIT from the client with it off");
    }
}

#[test]
#[serial(cluster)]
fn every_acquire_waits_on_its_own_master_and_none_when_the_check_is_off() {
    let c = cluster::shared();
    // Releases wait too by default (see the next test): off here, to count acquires.
    let on = c.client_with(|b| b.check_lock_synced_slaves(true).sync_releases(false));
    let off = c.client_with(|b| b.check_lock_synced_slaves(false).sync_releases(false));
    two_waits_on_each_own_master(&on, &off, "c-wait", Counted::Acquires);
}

/// As in Redisson 4.7.0, every release that changed a lock is followed by `WAIT` on the
/// key's own master, whether the acquire check is on or not (off here, so that only
/// releases wait).
#[test]
#[serial(cluster)]
fn every_release_waits_on_its_own_master_unless_sync_releases_is_off() {
    let c = cluster::shared();
    let default = c.client_with(|b| b.check_lock_synced_slaves(false));
    let off = c.client_with(|b| b.check_lock_synced_slaves(false).sync_releases(false));
    two_waits_on_each_own_master(&default, &off, "c-release-wait", Counted::Releases);
}

#[test]
#[serial(cluster)]
fn a_frozen_replica_fails_the_acquires_of_its_shard_only() {
    let c = cluster::shared();
    let _d = c.disrupt();
    let masters = c.masters();
    let (frozen_shard, other) = (&masters[0], &masters[1]);
    let attempts = 2;
    // Releases (the undo of each unsynced try) would wait too: off, to count tries.
    let client = c.client_with(|b| {
        b.check_lock_synced_slaves(true)
            .sync_releases(false)
            .slaves_sync_timeout(Duration::from_millis(200))
            .retry_attempts(attempts)
            .retry_delay(Duration::from_millis(10))
            .retry_max_delay(Duration::from_millis(20))
    });
    let name = name_on(frozen_shard, "c-frozen");
    let elsewhere = name_on(other, "c-unfrozen");
    // Learn every master's replica count while the replicas answer: the frozen one's
    // count must come from the cache, as after any earlier acquire.
    client.get_lock(&name).lock().unwrap().unlock().unwrap();
    client
        .get_lock(&elsewhere)
        .lock()
        .unwrap()
        .unlock()
        .unwrap();
    let replica = c.replica_of(frozen_shard);
    c.stop(&replica);
    let mut raw = frozen_shard.conn();
    let before = calls(&mut raw, "wait");
    let err = client.get_lock(&name).lock().unwrap_err();
    match &err {
        Error::NoSyncedReplicas {
            replicas, tries, ..
        } => {
            assert_eq!(*replicas, 1, "{err}");
            assert_eq!(*tries, attempts + 1, "{err}");
        }
        other => panic!("expected NoSyncedReplicas, got {other:?}"),
    }
    assert_eq!(calls(&mut raw, "wait") - before, u64::from(attempts) + 1);
    assert!(!exists(&mut raw, &name), "an unsynced hold was left behind");
    // The other shards' replicas answer: their acquires go through meanwhile.
    let guard = client.get_lock(&elsewhere).lock().unwrap();
    assert!(exists(&mut other.conn(), &elsewhere));
    guard.unlock().unwrap();
    c.cont(&replica);
    client.get_lock(&name).lock().unwrap().unlock().unwrap();
}
