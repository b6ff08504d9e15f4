//! Leases and the watchdog: renewal keeps a lock, an explicit lease expires, a lost hold
//! is reported; run against a single server (`tests/single/lease.rs`) and the cluster.

use std::time::{Duration, Instant};

use redmutex::{Error, Loss};

use crate::support::deploy::Deployment;
use crate::support::raw::pttl;
use crate::support::watched::{Watched, ttl_if_present, watch_hold};
use crate::support::{eventually, unique};

/// With a 1 s watchdog, a lock held for 5 s never gets close to expiring, and another
/// client cannot take it; or, where a loaded machine starved the watchdog past the
/// lease, the guard had said so by the time the key was gone (see `support::watched`).
pub(crate) fn the_watchdog_keeps_a_lock_alive<D: Deployment>(d: &D) {
    let holder = d.client_with_watchdog(Duration::from_secs(1));
    let other = d.client();
    let name = unique("lease");
    let mut raw = d.raw(&name);
    let lock = holder.get_lock(name.clone());
    let guard = lock.lock().unwrap();
    let watched = watch_hold(
        Duration::from_secs(5),
        Duration::from_millis(50),
        || {
            let ttl = ttl_if_present(&mut raw, &name)?;
            assert!(ttl > 0, "the watchdog hold has no TTL: {ttl}");
            Some(ttl)
        },
        || guard.is_lost(),
    );
    match watched {
        Watched::Kept { lowest_ttl, .. } => {
            assert!(lowest_ttl <= 1000);
            assert!(other.get_lock(name).try_lock().unwrap().is_none());
            // A watchdog starved past the point where its renewal could still be
            // confirmed in time says so (PossiblyLost) and goes on renewing: the key
            // stayed, so the guard may be cautious, never wrong the other way (Lost).
            match guard.loss() {
                None => guard.unlock().unwrap(),
                Some(Loss::PossiblyLost) => {
                    if let Err(e) = guard.unlock() {
                        assert!(e.is_not_held(), "{e}");
                    }
                }
                Some(other) => panic!("the key stayed but the guard says {other:?}"),
            }
        }
        Watched::ReportedLost { .. } => {
            let err = guard.unlock().unwrap_err();
            assert!(err.is_not_held(), "{err}");
        }
    }
    assert_eq!(holder.renewing_count(), 0);
}

/// Renewal stops at the full release, not before: one of two reentrant holds released
/// keeps the lock alive; releasing the other lets it go.
pub(crate) fn renewal_follows_the_hold_count<D: Deployment>(d: &D) {
    let client = d.client_with_watchdog(Duration::from_secs(1));
    let lock = client.get_lock(unique("lease"));
    let a = lock.lock().unwrap();
    let b = lock.lock().unwrap();
    b.unlock().unwrap();
    assert_eq!(client.renewing_count(), 1);
    std::thread::sleep(Duration::from_millis(2500)); // longer than the 1 s lease
    assert!(lock.is_held_by_current_thread().unwrap());
    a.unlock().unwrap();
    assert_eq!(client.renewing_count(), 0);
    assert!(!lock.is_locked().unwrap());
}

/// An explicit lease is never renewed: the key expires and another client takes it.
pub(crate) fn an_explicit_lease_expires_and_another_client_acquires<D: Deployment>(d: &D) {
    let holder = d.client_with_watchdog(Duration::from_secs(1));
    let other = d.client();
    let name = unique("lease");
    let lock = holder.get_lock(name.clone());
    let started = Instant::now();
    let guard = lock.lock_with_lease(Duration::from_millis(800)).unwrap();
    assert_eq!(
        holder.renewing_count(),
        0,
        "explicit leases are not renewed"
    );
    let other_lock = other.get_lock(name);
    let taken = other_lock.lock().unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(700),
        "{:?}",
        started.elapsed()
    );
    assert!(guard.is_lost());
    assert!(matches!(guard.unlock(), Err(Error::LockLost { .. })));
    assert!(other_lock.is_held_by_current_thread().unwrap());
    taken.unlock().unwrap();
}

/// A hold whose key was deleted behind its back is reported lost at the next renewal,
/// through both the flag and the signal; its release says so.
pub(crate) fn a_deleted_key_is_reported_lost<D: Deployment>(d: &D) {
    let client = d.client_with_watchdog(Duration::from_secs(1));
    let lock = client.get_lock(unique("lease"));
    let mut raw = d.raw(lock.name());
    let guard = lock.lock().unwrap();
    let signal = guard.loss_signal();
    assert!(!guard.is_lost());
    let _: () = redis::cmd("DEL").arg(lock.name()).query(&mut raw).unwrap();
    let loss = signal
        .recv_timeout(Duration::from_secs(5))
        .expect("loss signalled");
    assert_eq!(loss, Loss::Lost);
    assert!(guard.is_lost());
    assert_eq!(
        guard.loss_signal().recv_timeout(Duration::ZERO).ok(),
        Some(Loss::Lost)
    );
    let err = guard.unlock().unwrap_err();
    assert!(
        matches!(err, Error::LockLost { .. }) && err.is_not_held(),
        "{err}"
    );
    assert_eq!(client.renewing_count(), 0);
}

/// A hold taken over by another owner (key deleted, then re-taken) is lost, and the
/// renewal never extends the new owner's lease.
pub(crate) fn a_taken_over_lock_is_lost_and_not_renewed_for_the_new_owner<D: Deployment>(d: &D) {
    let client = d.client_with_watchdog(Duration::from_secs(1));
    let lock = client.get_lock(unique("lease"));
    let mut raw = d.raw(lock.name());
    let guard = lock.lock().unwrap();
    let signal = guard.loss_signal();
    let _: () = redis::pipe()
        .cmd("DEL")
        .arg(lock.name())
        .cmd("HSET")
        .arg(lock.name())
        .arg("intruder:1")
        .arg(1)
        .cmd("PEXPIRE")
        .arg(lock.name())
        .arg(60_000)
        .query(&mut raw)
        .unwrap();
    assert_eq!(
        signal.recv_timeout(Duration::from_secs(5)).unwrap(),
        Loss::Lost
    );
    let ttl = pttl(&mut raw, lock.name());
    assert!(ttl > 55_000, "the intruder's lease was changed: {ttl}");
    assert!(matches!(guard.unlock(), Err(Error::LockLost { .. })));
    let owners: Vec<String> = redis::cmd("HKEYS")
        .arg(lock.name())
        .query(&mut raw)
        .unwrap();
    assert_eq!(owners, vec!["intruder:1".to_owned()]);
}

/// testAutoExpire: a client that shuts down while holding stops renewing; the lock
/// disappears within the watchdog timeout.
pub(crate) fn a_shut_down_holder_lets_the_lock_expire<D: Deployment>(d: &D) {
    let holder = d.client_with_watchdog(Duration::from_secs(1));
    let observer = d.client();
    let name = unique("lease");
    let lock = holder.get_lock(name.clone());
    lock.lock().unwrap().detach();
    holder.shutdown();
    let watch = observer.get_lock(name);
    eventually(Duration::from_secs(5), "lock expired", || {
        !watch.is_locked().unwrap()
    });
}

/// This suite's cases, listed once; each deployment binary stamps them all with one line
/// (`tests/single`, `tests/cluster`, `tests/sentinel`), through [`redmutex_harness::cases!`]
/// (`own on ...` or `shared(key) on ...`), with this file declared as `lease_suite` at its root.
macro_rules! lease_cases {
    ($($on:tt)*) => {
        redmutex_harness::cases!($($on)*; lease_suite;
            [
                the_watchdog_keeps_a_lock_alive,
                renewal_follows_the_hold_count,
                an_explicit_lease_expires_and_another_client_acquires,
                a_deleted_key_is_reported_lost,
                a_taken_over_lock_is_lost_and_not_renewed_for_the_new_owner,
                a_shut_down_holder_lets_the_lock_expire,
            ]
            alone [
            ]
        );
    };
}
pub(crate) use lease_cases;
