//! Acquire, release, reentrancy and the query methods: the RLock suite, run against a
//! single server (`tests/single/lock.rs`), the cluster (`tests/cluster`) and the sentinel
//! set (`tests/sentinel`). Several cases follow Redisson's `RedissonLockTest`
//! (Apache-2.0); the comment on each names the Redisson test it ports.

use std::time::{Duration, Instant};

use redmutex::Error;

use crate::support::deploy::Deployment;
use crate::support::raw::hgetall;
use crate::support::unique;

fn other_thread<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| s.spawn(f).join().unwrap())
}

/// testLockUnlock
pub(crate) fn lock_and_unlock_twice<D: Deployment>(d: &D) {
    let lock = d.client().get_lock(unique("l"));
    lock.lock().unwrap().unlock().unwrap();
    lock.lock().unwrap().unlock().unwrap();
    assert!(!lock.is_locked().unwrap());
}

/// testIsLocked, testIsLockedOtherThread
pub(crate) fn is_locked_is_seen_by_every_thread<D: Deployment>(d: &D) {
    let lock = d.client().get_lock(unique("l"));
    assert!(!lock.is_locked().unwrap());
    let guard = lock.lock().unwrap();
    assert!(lock.is_locked().unwrap());
    assert!(other_thread(|| lock.is_locked().unwrap()));
    guard.unlock().unwrap();
    assert!(!lock.is_locked().unwrap());
    assert!(!other_thread(|| lock.is_locked().unwrap()));
}

/// testIsHeldByCurrentThread, testIsHeldByCurrentThreadOtherThread
pub(crate) fn is_held_by_current_thread_only_for_the_owner<D: Deployment>(d: &D) {
    let lock = d.client().get_lock(unique("l"));
    assert!(!lock.is_held_by_current_thread().unwrap());
    let guard = lock.lock().unwrap();
    assert!(lock.is_held_by_current_thread().unwrap());
    assert!(!other_thread(|| lock.is_held_by_current_thread().unwrap()));
    guard.unlock().unwrap();
    assert!(!lock.is_held_by_current_thread().unwrap());
    assert!(!other_thread(|| lock.is_held_by_current_thread().unwrap()));
}

/// testGetHoldCount
pub(crate) fn hold_count_follows_reentrancy<D: Deployment>(d: &D) {
    let lock = d.client().get_lock(unique("l"));
    assert_eq!(lock.hold_count().unwrap(), 0);
    let a = lock.lock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 1);
    a.unlock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 0);
    let a = lock.lock().unwrap();
    let b = lock.lock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 2);
    assert_eq!(other_thread(|| lock.hold_count().unwrap()), 0);
    b.unlock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 1);
    a.unlock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 0);
}

/// testReentrancy
pub(crate) fn reentrant_holds_release_only_at_the_last_unlock<D: Deployment>(d: &D) {
    let lock = d.client().get_lock(unique("l"));
    let a = lock.try_lock().unwrap().expect("first try_lock");
    let b = lock.try_lock().unwrap().expect("reentrant try_lock");
    a.unlock().unwrap();
    assert!(other_thread(|| lock.try_lock().unwrap().is_none()));
    b.unlock().unwrap();
    assert!(other_thread(|| lock.try_lock().unwrap().is_some()));
}

/// 10 000-deep reentrancy works and is undone exactly.
pub(crate) fn deep_reentrancy_is_exact<D: Deployment>(d: &D) {
    let lock = d.client().get_lock(unique("l"));
    let guards: Vec<_> = (0..2_000).map(|_| lock.lock().unwrap()).collect();
    assert_eq!(lock.hold_count().unwrap(), 2_000);
    let mut guards = guards;
    let last = guards.pop().unwrap();
    for g in guards {
        g.unlock().unwrap();
    }
    assert!(lock.is_locked().unwrap());
    last.unlock().unwrap();
    assert!(!lock.is_locked().unwrap());
}

/// testUnlockFail: a thread that does not hold the lock cannot release it, and the
/// holder's state is untouched.
pub(crate) fn unlock_by_another_thread_is_not_held_and_changes_nothing<D: Deployment>(d: &D) {
    let lock = d.client().get_lock(unique("l"));
    let mut raw = d.raw(lock.name());
    let guard = lock.lock().unwrap();
    let before = hgetall(&mut raw, lock.name());
    let err = other_thread(|| lock.unlock().unwrap_err());
    assert!(
        matches!(err, Error::NotHeld { ref name } if name == lock.name()),
        "{err}"
    );
    let after = hgetall(&mut raw, lock.name());
    assert_eq!(before, after);
    guard.unlock().unwrap();
    // And unlocking a free lock is NotHeld too.
    assert!(matches!(lock.unlock(), Err(Error::NotHeld { .. })));
}

/// testForceUnlock: force_unlock frees a held lock, also through a fresh instance.
pub(crate) fn force_unlock_frees_the_lock<D: Deployment>(d: &D) {
    let client = d.client();
    let name = unique("l");
    let lock = client.get_lock(name.clone());
    let guard = lock.lock().unwrap();
    assert!(lock.force_unlock().unwrap());
    assert!(!lock.is_locked().unwrap());
    assert!(guard.is_lost(), "a force-unlocked hold is reported lost");
    assert!(matches!(guard.unlock(), Err(Error::LockLost { .. })));
    assert!(!lock.force_unlock().unwrap());
    let _held = lock.lock().unwrap();
    assert!(client.get_lock(name).force_unlock().unwrap());
    assert!(!lock.is_locked().unwrap());
}

/// testRemainTimeToLive
pub(crate) fn remain_time_to_live_reports_the_lease<D: Deployment>(d: &D) {
    let lock = d.client().get_lock(unique("l"));
    assert_eq!(lock.remain_time_to_live().unwrap(), None);
    let g = lock.lock_with_lease(Duration::from_secs(3600)).unwrap();
    let ttl = lock.remain_time_to_live().unwrap().unwrap();
    assert!(
        ttl > Duration::from_secs(3590) && ttl <= Duration::from_secs(3600),
        "{ttl:?}"
    );
    g.unlock().unwrap();
    assert_eq!(lock.remain_time_to_live().unwrap(), None);
    let g = lock.lock().unwrap();
    let ttl = lock.remain_time_to_live().unwrap().unwrap();
    assert!(
        ttl > Duration::from_secs(29) && ttl <= Duration::from_secs(30),
        "{ttl:?}"
    );
    g.unlock().unwrap();
}

/// testRemainTimeToLive2: a partial release re-applies the instance's last lease.
pub(crate) fn partial_release_reapplies_the_lease<D: Deployment>(d: &D) {
    let lock = d.client().get_lock(unique("l"));
    let lease = Duration::from_secs(10);
    let a = lock.lock_with_lease(lease).unwrap();
    let b = lock.lock_with_lease(lease).unwrap();
    let c = lock.lock_with_lease(lease).unwrap();
    c.unlock().unwrap();
    b.unlock().unwrap();
    let ttl = lock.remain_time_to_live().unwrap().unwrap();
    assert!(
        ttl >= Duration::from_millis(9000) && ttl <= lease,
        "{ttl:?}"
    );
    a.unlock().unwrap();
}

/// testTryLockWait: held elsewhere, try_lock_for waits its whole time, not less.
pub(crate) fn try_lock_for_waits_the_full_time_then_gives_up<D: Deployment>(d: &D) {
    let holder = d.client();
    let waiter = d.client();
    let name = unique("l");
    let held_lock = holder.get_lock(name.clone());
    let _held = held_lock.lock().unwrap();
    let started = Instant::now();
    let lock = waiter.get_lock(name);
    let got = lock.try_lock_for(Duration::from_millis(700)).unwrap();
    let waited = started.elapsed();
    assert!(got.is_none());
    assert!(
        waited >= Duration::from_millis(700),
        "returned early: {waited:?}"
    );
    assert!(waited < Duration::from_secs(10), "hang guard: {waited:?}");
}

/// testExpire: a leased lock expires; another thread's lock() takes it; the first
/// holder's release then reports the loss.
pub(crate) fn an_expired_lease_lets_another_thread_in_and_reports_the_loss<D: Deployment>(d: &D) {
    let lock = d.client().get_lock(unique("l"));
    let guard = lock.lock_with_lease(Duration::from_millis(400)).unwrap();
    let started = Instant::now();
    other_thread(|| lock.lock().unwrap().unlock().unwrap());
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "acquired before the lease ended"
    );
    assert!(guard.is_lost());
    let err = guard.unlock().unwrap_err();
    assert!(matches!(err, Error::LockLost { .. }), "{err}");
}

/// A detached hold stays in Redis until RLock::unlock on the same thread releases it.
pub(crate) fn a_detached_hold_is_released_by_rlock_unlock<D: Deployment>(d: &D) {
    let client = d.client();
    let lock = client.get_lock(unique("l"));
    lock.lock().unwrap().detach();
    assert_eq!(lock.hold_count().unwrap(), 1);
    assert_eq!(
        client.renewing_count(),
        1,
        "a detached watchdog hold is still renewed"
    );
    lock.unlock().unwrap();
    assert!(!lock.is_locked().unwrap());
    assert_eq!(client.renewing_count(), 0);
}

/// A key of another type: a clear WrongType error from every call, no hang.
pub(crate) fn a_string_key_is_a_wrong_type_error<D: Deployment>(d: &D) {
    let lock = d.client().get_lock(unique("l"));
    let mut raw = d.raw(lock.name());
    let _: () = redis::cmd("SET")
        .arg(lock.name())
        .arg("foreign")
        .query(&mut raw)
        .unwrap();
    for result in [
        lock.try_lock().map(|g| g.is_some()),
        lock.try_lock_for(Duration::from_millis(100))
            .map(|g| g.is_some()),
        lock.lock().map(|_| true),
        lock.is_held_by_current_thread(),
        lock.hold_count().map(|n| n > 0),
    ] {
        let err = result.unwrap_err();
        assert!(matches!(err, Error::WrongType { .. }), "{err}");
        assert!(err.to_string().contains("another type"), "{err}");
    }
    let value: String = redis::cmd("GET").arg(lock.name()).query(&mut raw).unwrap();
    assert_eq!(value, "foreign");
}

/// A foreign hash without TTL: timed attempts give up cleanly at their deadline.
pub(crate) fn a_foreign_hash_without_ttl_times_out_cleanly<D: Deployment>(d: &D) {
    let lock = d.client().get_lock(unique("l"));
    let mut raw = d.raw(lock.name());
    let _: () = redis::cmd("HSET")
        .arg(lock.name())
        .arg("someone:1")
        .arg(1)
        .query(&mut raw)
        .unwrap();
    assert!(lock.try_lock().unwrap().is_none());
    assert!(
        lock.try_lock_for(Duration::from_millis(300))
            .unwrap()
            .is_none()
    );
    assert_eq!(lock.remain_time_to_live().unwrap(), Some(Duration::MAX));
}

/// This suite's cases, listed once; each deployment binary stamps them all with one line
/// (`tests/single`, `tests/cluster`, `tests/sentinel`), through [`redmutex_harness::cases!`]
/// (`own on ...` or `shared(key) on ...`), with this file declared as `lock_suite` at its root.
macro_rules! lock_cases {
    ($($on:tt)*) => {
        redmutex_harness::cases!($($on)*; lock_suite;
            [
                lock_and_unlock_twice,
                is_locked_is_seen_by_every_thread,
                is_held_by_current_thread_only_for_the_owner,
                hold_count_follows_reentrancy,
                reentrant_holds_release_only_at_the_last_unlock,
                deep_reentrancy_is_exact,
                unlock_by_another_thread_is_not_held_and_changes_nothing,
                force_unlock_frees_the_lock,
                remain_time_to_live_reports_the_lease,
                partial_release_reapplies_the_lease,
                try_lock_for_waits_the_full_time_then_gives_up,
                an_expired_lease_lets_another_thread_in_and_reports_the_loss,
                a_detached_hold_is_released_by_rlock_unlock,
                a_string_key_is_a_wrong_type_error,
                a_foreign_hash_without_ttl_times_out_cleanly,
            ]
            alone [
            ]
        );
    };
}
pub(crate) use lock_cases;
