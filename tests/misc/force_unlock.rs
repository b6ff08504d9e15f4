//! `force_unlock` follows one rule for every lock kind: it returns whether it deleted the
//! key, wakes the waiters when it did, and reports this client's holds on the lock lost at
//! once unless the lock is still there afterwards (a read-write half leaves a lock held in
//! the other mode alone, and the holds of that mode stay good).

use std::time::Duration;

use crate::support::raw::{await_numsub, lock_channel};
use crate::support::{TestServer, unique};
use redmutex::{Error, Loss};

fn del(server: &TestServer, key: &str) {
    let _: i64 = redis::cmd("DEL")
        .arg(key)
        .query(&mut server.conn())
        .unwrap();
}

/// RLock and fair lock: deleting a held lock, and finding it already gone, both end this
/// client's holds at once (without waiting for the watchdog to notice).
#[test]
fn reentrant_and_fair_forget_holds_whenever_the_key_is_gone() {
    let server = TestServer::start();
    let client = server.client();
    let lock = client.get_lock(unique("force-r"));
    let fair = client.get_fair_lock(unique("force-f"));

    let held = lock.lock().unwrap();
    let signal = held.loss_signal();
    assert!(lock.force_unlock().unwrap());
    assert!(held.is_lost());
    assert_eq!(signal.try_recv(), Ok(Loss::Lost));
    assert!(matches!(held.unlock(), Err(Error::LockLost { .. })));
    assert!(!lock.is_locked().unwrap());

    let held = lock.lock().unwrap();
    del(&server, lock.name());
    assert!(!lock.force_unlock().unwrap(), "nothing left to delete");
    assert!(held.is_lost(), "the key is gone, and so is the hold");
    drop(held);

    let held = fair.lock().unwrap();
    assert!(fair.force_unlock().unwrap());
    assert!(held.is_lost());
    drop(held);
    let held = fair.lock().unwrap();
    del(&server, fair.name());
    assert!(!fair.force_unlock().unwrap());
    assert!(held.is_lost());
    drop(held);
    assert!(!fair.force_unlock().unwrap());
    assert_eq!(client.renewing_count(), 0);
}

/// A force release wakes a waiter of another client long before the holder's lease.
#[test]
fn a_force_release_wakes_a_waiter() {
    let server = TestServer::start();
    let holder = server.client();
    let waiter = server.client();
    let name = unique("force-wake");
    let _held = holder.get_lock(name.clone()).lock().unwrap();
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            waiter
                .get_lock(name.clone())
                .try_lock_for(Duration::from_secs(20))
                .unwrap()
                .is_some()
        });
        await_numsub(&mut server.conn(), &lock_channel(&name), 1);
        assert!(waiter.get_lock(name.clone()).force_unlock().unwrap());
        assert!(w.join().unwrap(), "the waiter took the lock");
    });
}

/// Read half: a write-mode lock is left alone (and the writer's downgrade reads stay
/// good); a read-mode lock is deleted and every read hold of this client is lost, as are
/// the holds on a lock whose key is already gone.
#[test]
fn the_read_half_deletes_only_a_read_mode_lock() {
    let server = TestServer::start();
    let client = server.client();
    let rw = client.get_read_write_lock(unique("force-rw-r"));

    let write = rw.write_lock().lock().unwrap();
    let downgrade = rw.read_lock().lock().unwrap();
    assert!(!rw.read_lock().force_unlock().unwrap(), "write mode: kept");
    assert!(!write.is_lost());
    assert!(!downgrade.is_lost());
    assert_eq!(client.renewing_count(), 2);
    downgrade.unlock().unwrap();
    write.unlock().unwrap();

    let read = rw.read_lock().lock().unwrap();
    assert!(rw.read_lock().force_unlock().unwrap());
    assert!(read.is_lost());
    assert!(matches!(read.unlock(), Err(Error::LockLost { .. })));
    assert!(!rw.read_lock().force_unlock().unwrap(), "no lock at all");
    assert_eq!(client.renewing_count(), 0);

    // Gone already: nothing to delete, and the hold is known lost at once.
    let read = rw.read_lock().lock().unwrap();
    del(&server, rw.name());
    assert!(!rw.read_lock().force_unlock().unwrap());
    assert!(read.is_lost());
    drop(read);
    let write = rw.write_lock().lock().unwrap();
    del(&server, rw.name());
    assert!(!rw.write_lock().force_unlock().unwrap());
    assert!(write.is_lost());
}

/// Write half: a read-mode lock is left alone with its readers; a write-mode lock is
/// deleted and the write hold is lost.
#[test]
fn the_write_half_deletes_only_a_write_mode_lock() {
    let server = TestServer::start();
    let client = server.client();
    let rw = client.get_read_write_lock(unique("force-rw-w"));

    let read = rw.read_lock().lock().unwrap();
    assert!(!rw.write_lock().force_unlock().unwrap(), "read mode: kept");
    assert!(!read.is_lost());
    assert!(rw.read_lock().is_locked().unwrap());
    read.unlock().unwrap();

    let write = rw.write_lock().lock().unwrap();
    assert!(rw.write_lock().force_unlock().unwrap());
    assert!(write.is_lost());
    assert!(matches!(write.unlock(), Err(Error::LockLost { .. })));
    assert!(!rw.write_lock().is_locked().unwrap());
    assert_eq!(client.renewing_count(), 0);
}
