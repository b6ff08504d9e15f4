//! Replica sync (`check_lock_synced_slaves`): `WAIT` after every acquire on the
//! master's connection, the distinct error when frozen replicas acknowledge nothing,
//! and nothing left held then; and `WAIT` after every release (`sync_releases`).

use std::sync::OnceLock;
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use redmutex::Error;
use serial_test::serial;

use crate::support::deploy::Deployment;
use crate::support::raw::{calls, client_in, exists};
use crate::support::reopening::Reopening;
use crate::support::sentinel::{DataNode, SentinelSet, shared};
use crate::support::{eventually, unique};

/// Replica-sync failures counted since the last call (a recorder is installed for this
/// binary on first use).
fn sync_failures_since_last() -> u64 {
    static SNAPSHOTTER: OnceLock<Snapshotter> = OnceLock::new();
    let snapshotter = SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("no other recorder in this binary");
        snapshotter
    });
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| key.key().name() == redmutex::metrics::REPLICA_SYNC_FAILURES)
        .map(|(.., value)| match value {
            DebugValue::Counter(n) => n,
            _ => 0,
        })
        .sum()
}

/// Resumes every data node but `master`: the stopped replicas, which cannot say their
/// role while stopped.
fn thaw_replicas(set: &SentinelSet, master: &DataNode) {
    for node in set.data_nodes() {
        if node.port != master.port {
            set.cont(&node);
        }
    }
}

#[test]
#[serial(sentinel)]
fn every_acquire_is_followed_by_one_wait_and_none_when_the_check_is_off() {
    let set = shared();
    let mut raw = set.master().conn();
    // Releases wait too by default (see the next test): off here, to count acquires.
    let on = set.client_with(|b| b.sync_releases(false));
    let off = set.client_with(|b| b.check_lock_synced_slaves(false).sync_releases(false));
    let name = unique("s-wait");
    let before = calls(&mut raw, "wait");
    let lock = on.get_lock(&name);
    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();
    inner.unlock().unwrap();
    outer.unlock().unwrap();
    // Redisson waits after every lock script that took something: 2 here.
    assert_eq!(calls(&mut raw, "wait") - before, 2);
    let before = calls(&mut raw, "wait");
    off.get_lock(&name).lock().unwrap().unlock().unwrap();
    assert_eq!(calls(&mut raw, "wait"), before);
}

/// Redisson 4.7.0 follows every unlock with `WAIT` in sentinel and cluster modes, with
/// `checkLockSyncedSlaves` on or off, so that a failover right after it cannot bring the
/// hold back. The default does the same; `sync_releases(false)` turns it off. A release
/// that no replica acknowledges still stands (it happened on the master): `Ok`, counted.
#[test]
#[serial(sentinel)]
fn every_release_is_followed_by_a_wait_unless_sync_releases_is_off() {
    let set = shared();
    let _d = set.disrupt();
    let master = set.master();
    let mut raw = master.conn();
    let default = set.client_with(|b| {
        b.check_lock_synced_slaves(false)
            .slaves_sync_timeout(Duration::from_millis(200))
    });
    let off = set.client_with(|b| b.check_lock_synced_slaves(false).sync_releases(false));
    let name = unique("s-release-wait");
    let lock = default.get_lock(&name);
    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();
    let before = calls(&mut raw, "wait");
    inner.unlock().unwrap();
    outer.unlock().unwrap();
    // Both releases changed the lock (one level, then the key): one WAIT each.
    assert_eq!(calls(&mut raw, "wait") - before, 2);
    let read = default.get_read_write_lock(unique("s-release-rw"));
    let before = calls(&mut raw, "wait");
    read.read_lock().lock().unwrap().unlock().unwrap();
    read.write_lock().lock().unwrap().unlock().unwrap();
    default
        .get_fair_lock(&name)
        .lock()
        .unwrap()
        .unlock()
        .unwrap();
    // Every lock kind's release: the read and write halves and the fair lock.
    assert_eq!(calls(&mut raw, "wait") - before, 3);
    let before = calls(&mut raw, "wait");
    off.get_lock(&name).lock().unwrap().unlock().unwrap();
    assert_eq!(
        calls(&mut raw, "wait"),
        before,
        "a WAIT with sync_releases off"
    );

    // Frozen replicas: the release waits out its timeout, stands, and is counted.
    let guard = default.get_lock(&name).lock().unwrap();
    for replica in set.replicas() {
        set.stop(&replica);
    }
    sync_failures_since_last();
    guard.unlock().unwrap();
    assert!(!exists(&mut raw, &name), "the release did not stand");
    assert_eq!(sync_failures_since_last(), 1);
    thaw_replicas(set, &master);
}

#[test]
#[serial(sentinel)]
fn frozen_replicas_fail_the_acquire_after_the_retries_and_nothing_stays_held() {
    let set = shared();
    let _d = set.disrupt();
    let master = set.master();
    let mut raw = master.conn();
    let attempts = 2;
    // Releases (the undo of each unsynced try) would wait too: off, to count tries.
    let client = set.client_with(|b| {
        b.slaves_sync_timeout(Duration::from_millis(200))
            .sync_releases(false)
            .retry_attempts(attempts)
            .retry_delay(Duration::from_millis(10))
            .retry_max_delay(Duration::from_millis(20))
    });
    let unchecked = set.client_with(|b| b.check_lock_synced_slaves(false).sync_releases(false));
    let name = unique("s-frozen");
    for replica in set.replicas() {
        set.stop(&replica);
    }
    let before = calls(&mut raw, "wait");
    sync_failures_since_last();
    let err = client.get_lock(&name).lock().unwrap_err();
    match &err {
        Error::NoSyncedReplicas {
            replicas, tries, ..
        } => {
            assert_eq!(*replicas, 2, "{err}");
            assert_eq!(*tries, attempts + 1, "{err}");
        }
        other => panic!("expected NoSyncedReplicas, got {other:?}"),
    }
    assert_eq!(calls(&mut raw, "wait") - before, u64::from(attempts) + 1);
    assert!(!exists(&mut raw, &name), "an unsynced hold was left behind");
    let try_err = client.get_lock(&name).try_lock().unwrap_err();
    assert!(
        matches!(try_err, Error::NoSyncedReplicas { .. }),
        "{try_err:?}"
    );
    assert!(!exists(&mut raw, &name));
    // Every unsynced try is counted, the lock()'s and the try_lock()'s.
    assert_eq!(sync_failures_since_last(), 2 * (u64::from(attempts) + 1));
    // Without the check the same acquire goes through: what WAIT protects against is
    // exactly this hold, which no replica has.
    let guard = unchecked.get_lock(&name).lock().unwrap();
    assert!(exists(&mut raw, &name));
    guard.unlock().unwrap();
    thaw_replicas(set, &master);
    client.get_lock(&name).lock().unwrap().unlock().unwrap();
}

/// An acquire whose connection closes during its `WAIT` has taken the lock (the client
/// finds its hold, see `levels.rs`) but not learned whether a replica has it: the `WAIT`
/// is owed on another connection, so frozen replicas fail the acquire as they fail any
/// other, and its hold is undone. Skipping that `WAIT` granted a hold no replica had.
#[test]
#[serial(sentinel)]
fn an_acquire_whose_wait_lost_its_connection_still_waits_for_the_replicas() {
    let set = shared();
    let _d = set.disrupt();
    let master = set.master();
    let mut raw = master.conn();
    let client = set.client_with(|b| {
        b.slaves_sync_timeout(Duration::from_millis(500))
            .retry_attempts(0)
    });
    let name = unique("s-wait-closed");
    for replica in set.replicas() {
        set.stop(&replica);
    }
    let before = calls(&mut raw, "wait");
    let locked = std::thread::scope(|s| {
        // A guard belongs to its thread: the outcome alone comes back.
        let locking = s.spawn(|| client.get_lock(&name).lock().map(|g| g.unlock()));
        // The acquire's WAIT blocks for the sync timeout: cut its connection then.
        let mut id = None;
        eventually(
            Duration::from_secs(10),
            "an acquire blocked in WAIT",
            || {
                id = client_in(&mut raw, "wait");
                id.is_some()
            },
        );
        redis::cmd("CLIENT")
            .arg("KILL")
            .arg("ID")
            .arg(id.unwrap())
            .query::<i64>(&mut raw)
            .unwrap();
        locking.join().unwrap()
    });
    match &locked {
        Err(Error::NoSyncedReplicas { tries, .. }) => assert_eq!(*tries, 1, "{locked:?}"),
        Ok(_) => panic!("granted a hold that no replica acknowledged"),
        Err(other) => panic!("expected NoSyncedReplicas, got {other:?}"),
    }
    // The owed WAIT ran (to its timeout), on another connection.
    assert!(calls(&mut raw, "wait") > before);
    assert!(!exists(&mut raw, &name), "an unsynced hold was left behind");
    thaw_replicas(set, &master);
    client.get_lock(&name).lock().unwrap().unlock().unwrap();
}

/// Whether a lock taken by one client while no replica can receive it (replicas
/// frozen, their links filled up so the master still buffers the hold) is granted again
/// by the replica promoted after the master's SIGKILL: `(first granted, second granted)`.
fn grant_across_a_lossy_failover(check: bool) -> (bool, bool) {
    let set = shared();
    let _d = set.disrupt();
    let master = set.master();
    let first = set.client_with(|b| {
        b.check_lock_synced_slaves(check)
            .slaves_sync_timeout(Duration::from_millis(200))
            .retry_attempts(1)
            .retry_delay(Duration::from_millis(10))
            .retry_max_delay(Duration::from_millis(20))
    });
    let name = unique("s-lossy");
    let replicas = set.replicas();
    for r in &replicas {
        set.stop(r);
    }
    // More than the loopback socket buffers hold: the master keeps the rest (and the
    // hold written after it) in its replica output buffers, which die with it.
    let mut raw = master.conn();
    let filler = vec![b'x'; 8 << 20];
    for i in 0..4 {
        let _: () = redis::cmd("SET")
            .arg(format!("{name}:filler:{i}"))
            .arg(&filler)
            .query(&mut raw)
            .unwrap();
    }
    let held = match first.get_lock(&name).lock() {
        Ok(guard) => {
            guard.detach();
            true
        }
        Err(Error::NoSyncedReplicas { .. }) => false,
        Err(e) => panic!("{e:?}"),
    };
    assert_eq!(exists(&mut raw, &name), held);
    set.kill(&master);
    for r in &replicas {
        set.cont(r);
    }
    let promoted = set.master();
    assert_ne!(promoted.port, master.port);
    assert!(
        !exists(&mut Reopening::new(|| promoted.conn()), &name),
        "the promoted replica got the hold after all"
    );
    let second = set.client_with(|b| b.check_lock_synced_slaves(check));
    let granted = second.get_lock(&name).try_lock().unwrap();
    (held, granted.is_some())
}

#[test]
#[serial(sentinel)]
fn without_wait_a_failover_right_after_an_acquire_grants_the_lock_twice() {
    // This is the hole WAIT narrows: the first hold existed only on the dead master.
    assert_eq!(grant_across_a_lossy_failover(false), (true, true));
}

#[test]
#[serial(sentinel)]
fn with_wait_the_same_failover_never_grants_the_lock_twice() {
    // The unsynced acquire failed (and was undone), so only the second one holds.
    assert_eq!(grant_across_a_lossy_failover(true), (false, true));
}

/// A replica that waits for a full resync cannot acknowledge anything until it is done:
/// the acquire waits for the replicas in sync only (`WAIT 1`, which the other replica
/// answers), not for every connected one. Counting it made every acquire after a
/// failover wait out the sync timeout, be undone and tried again, for as long as the
/// resync took (seconds with the server's default `repl-diskless-sync-delay`).
#[test]
#[serial(sentinel)]
fn a_replica_in_full_resync_is_not_waited_for() {
    let set = shared();
    let _d = set.disrupt();
    let master = set.master();
    let mut raw = master.conn();
    // The resync is held back for the test. Restored (before the heal, which waits for
    // the resync) even when the test fails; the server then starts the transfer at its
    // next replication tick.
    struct Delay(u16);
    impl Delay {
        fn set(port: u16, seconds: &str) {
            let mut conn = crate::support::supervised::connect(port).unwrap();
            redis::cmd("CONFIG")
                .arg("SET")
                .arg("repl-diskless-sync-delay")
                .arg(seconds)
                .exec(&mut conn)
                .unwrap();
        }
    }
    impl Drop for Delay {
        fn drop(&mut self) {
            Delay::set(self.0, "0");
        }
    }
    Delay::set(master.port, "3600");
    let _restore = Delay(master.port);
    let resyncing = set.replicas().remove(0);
    let mut replica = resyncing.conn();
    // Detached, the replica takes a replication id of its own, so the master cannot
    // continue its old stream and it asks for a full resync.
    redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .exec(&mut replica)
        .unwrap();
    redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(master.port)
        .exec(&mut replica)
        .unwrap();
    let waiting = format!("port={},state=wait_bgsave", resyncing.port);
    eventually(
        Duration::from_secs(10),
        "the replica waiting for its full resync",
        || {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut raw)
                .unwrap();
            info.contains(&waiting) && info.contains("connected_slaves:2")
        },
    );
    let mut mon = master.conn();
    redis::cmd("MONITOR").exec(&mut mon).unwrap();
    let client = set.client();
    let name = unique("s-resync");
    let guard = client.get_lock(&name).lock().unwrap();
    let marker = unique("marker");
    redis::cmd("ECHO").arg(&marker).exec(&mut raw).unwrap();
    let waits: Vec<String> = std::iter::from_fn(|| {
        let line = match mon.recv_response().unwrap() {
            redis::Value::SimpleString(s) => s,
            redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
            other => panic!("unexpected MONITOR reply {other:?}"),
        };
        (!line.contains(&marker)).then_some(line)
    })
    .filter(|l| l.to_ascii_lowercase().contains("\"wait\""))
    .collect();
    assert_eq!(waits.len(), 1, "{waits:?}");
    assert!(
        waits[0].to_ascii_lowercase().contains("\"wait\" \"1\""),
        "{waits:?}"
    );
    guard.unlock().unwrap();
}
