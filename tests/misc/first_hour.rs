//! What a Redisson user reaches for in the first hour: the `try/finally` idiom as a
//! closure (`with_lock`), `lockInterruptibly()` as a cancellable wait, and the explicit
//! `threadId` forms a thread pool needs.

use std::sync::mpsc;
use std::time::Duration;

use crate::support::raw::{
    await_numsub, exists, fair_queue, fair_timeouts, hgetall, lock_channel, numsub,
};
use crate::support::{TestServer, await_renewal, unique};
use redmutex::{Cancel, Error, Owner};

/// How long a test waits for something that should happen at once (a hang guard only).
const HANG: Duration = Duration::from_secs(10);

// ---- with_lock -------------------------------------------------------------------

#[test]
fn with_lock_returns_the_closures_value_and_releases() {
    let server = TestServer::start();
    let client = server.client();
    let mut raw = server.conn();
    let lock = client.get_lock(unique("with"));
    let value = lock
        .with_lock(|guard| {
            assert!(!guard.is_lost());
            assert!(lock.is_held_by_current_thread()?);
            Ok::<_, Error>(42)
        })
        .unwrap();
    assert_eq!(value, 42);
    assert!(!exists(&mut raw, lock.name()), "released after the closure");
}

#[test]
fn with_lock_releases_when_the_closure_fails_and_returns_its_error() {
    #[derive(Debug)]
    enum AppError {
        Lock(Error),
        Invalid,
    }
    impl From<Error> for AppError {
        fn from(e: Error) -> Self {
            Self::Lock(e)
        }
    }
    let server = TestServer::start();
    let client = server.client();
    let mut raw = server.conn();
    let lock = client.get_lock(unique("with-err"));
    let err = lock
        .with_lock(|_| Err::<(), _>(AppError::Invalid))
        .unwrap_err();
    match err {
        AppError::Invalid => {}
        AppError::Lock(e) => panic!("the closure's error, not the lock's: {e}"),
    }
    assert!(
        !exists(&mut raw, lock.name()),
        "released after the closure failed"
    );
}

/// The closure succeeded, but the hold was gone before it ended: the release's
/// `LockLost` comes back instead of the value, so the caller learns that the work may
/// have overlapped with another holder.
#[test]
fn with_lock_reports_a_hold_lost_during_the_closure() {
    let server = TestServer::start();
    let client = server.client();
    let other = server.client();
    let lock = client.get_lock(unique("with-lost"));
    let err = lock
        .with_lock(|_| {
            assert!(other.get_lock(lock.name().to_owned()).force_unlock()?);
            Ok::<_, Error>("written")
        })
        .unwrap_err();
    assert!(matches!(err, Error::LockLost { .. }), "{err}");
}

#[test]
fn try_with_lock_for_runs_nothing_when_the_wait_runs_out() {
    let server = TestServer::start();
    let client = server.client();
    let other = server.client();
    let name = unique("try-with");
    let held = other.get_lock(name.clone()).lock().unwrap();
    let lock = client.get_lock(name);
    let mut ran = false;
    let outcome = lock
        .try_with_lock_for(Duration::from_millis(100), |_| {
            ran = true;
            Ok::<_, Error>(())
        })
        .unwrap();
    assert_eq!(outcome, None);
    assert!(!ran);
    held.unlock().unwrap();
    let outcome = lock
        .try_with_lock_for(Duration::from_millis(100), |_| Ok::<_, Error>(7))
        .unwrap();
    assert_eq!(outcome, Some(7));
}

// ---- cancellation ----------------------------------------------------------------

/// Runs `wait` (a blocking acquisition given `cancel`) on a thread of its own, cancels
/// once `ready` says it waits, and asserts that it then returned `Cancelled` (within the
/// hang guard: nothing but the cancel could end the wait that soon).
fn cancel_once<F>(cancel: &Cancel, mut ready: impl FnMut() -> bool, wait: F)
where
    F: FnOnce(&Cancel) -> redmutex::Result<()> + Send,
{
    let (done, outcome) = mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| done.send(wait(cancel)).unwrap());
        crate::support::eventually(HANG, "the waiter waits", &mut ready);
        cancel.cancel();
        let result = outcome
            .recv_timeout(HANG)
            .expect("the cancel woke the waiter");
        assert!(matches!(result, Err(Error::Cancelled)), "{result:?}");
    });
}

/// A waiter blocked behind a 30 s hold is woken by the cancel, not by the hold: it
/// returns `Cancelled` at once, holds nothing, and its subscription goes away.
#[test]
fn a_cancel_wakes_a_blocked_lock_and_leaves_nothing_behind() {
    let server = TestServer::start();
    let holder = server.client();
    let client = server.client();
    let mut raw = server.conn();
    let name = unique("cancel");
    let held = holder.get_lock(name.clone()).lock().unwrap();
    let cancel = Cancel::new();
    let channel = lock_channel(&name);
    cancel_once(
        &cancel,
        || numsub(&mut raw, &channel) == 1,
        |cancel| client.get_lock(name.clone()).lock_until(cancel).map(drop),
    );
    assert_eq!(hgetall(&mut raw, &name).len(), 1, "only the holder holds");
    await_numsub(&mut raw, &lock_channel(&name), 0);
    // A cancelled handle stays cancelled: the next wait fails at once, untried.
    let lock = client.get_lock(name.clone());
    assert!(matches!(lock.lock_until(&cancel), Err(Error::Cancelled)));
    held.unlock().unwrap();
}

/// A fair waiter that is cancelled leaves the queue at once, so the waiters behind it
/// are not held up until its slot would have ended.
#[test]
fn a_cancelled_fair_waiter_leaves_the_queue() {
    let server = TestServer::start();
    let holder = server.client();
    let client = server.client();
    let mut raw = server.conn();
    let name = unique("cancel-fair");
    let held = holder.get_fair_lock(name.clone()).lock().unwrap();
    let cancel = Cancel::new();
    cancel_once(
        &cancel,
        || fair_queue(&mut raw, &name).len() == 1,
        |cancel| {
            client
                .get_fair_lock(name.clone())
                .lock_until(cancel)
                .map(drop)
        },
    );
    assert!(
        fair_queue(&mut raw, &name).is_empty(),
        "the queue entry is gone"
    );
    assert!(fair_timeouts(&mut raw, &name).is_empty(), "so is its slot");
    assert_eq!(hgetall(&mut raw, &name).len(), 1, "only the holder holds");
    held.unlock().unwrap();
}

/// A cancel that comes as the lock is released: either the waiter got the lock and
/// returns its guard, or it did not and holds nothing. Never a hold that nobody owns.
fn a_cancel_racing_a_grant(fair: bool) {
    let server = TestServer::start();
    let holder = server.client();
    let client = server.client();
    let mut raw = server.conn();
    let (mut granted, mut cancelled) = (0, 0);
    for round in 0..20 {
        let name = unique("cancel-race");
        // The holder's hold, detached so that the release below is one call.
        if fair {
            holder.get_fair_lock(name.clone()).lock().unwrap().detach();
        } else {
            holder.get_lock(name.clone()).lock().unwrap().detach();
        }
        let cancel = Cancel::new();
        let (done, outcome) = mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                let result = if fair {
                    let lock = client.get_fair_lock(name.clone());
                    lock.lock_until(&cancel).map(|g| g.unlock())
                } else {
                    let lock = client.get_lock(name.clone());
                    lock.lock_until(&cancel).map(|g| {
                        // Held for real: the hash has this thread's field.
                        assert!(lock.is_held_by_current_thread().unwrap());
                        g.unlock()
                    })
                };
                done.send(result).unwrap();
            });
            if fair {
                crate::support::eventually(HANG, "the waiter queued", || {
                    fair_queue(&mut raw, &name).len() == 1
                });
            } else {
                await_numsub(&mut raw, &lock_channel(&name), 1);
            }
            // Release and cancel as close together as two calls get, in either order.
            let release = || {
                if fair {
                    holder.get_fair_lock(name.clone()).unlock().unwrap();
                } else {
                    holder.get_lock(name.clone()).unlock().unwrap();
                }
            };
            if round % 2 == 0 {
                release();
                cancel.cancel();
            } else {
                cancel.cancel();
                release();
            }
            match outcome.recv_timeout(HANG).expect("the waiter returned") {
                Ok(released) => {
                    released.unwrap();
                    granted += 1;
                }
                Err(Error::Cancelled) => cancelled += 1,
                Err(e) => panic!("{e}"),
            }
        });
        // Whichever way it went, nothing is held afterwards and nobody is queued.
        assert!(!exists(&mut raw, &name), "round {round}: a hold was left");
        if fair {
            assert!(fair_queue(&mut raw, &name).is_empty(), "round {round}");
        }
    }
    assert_eq!(granted + cancelled, 20);
}

#[test]
fn a_cancel_racing_a_grant_gives_a_guard_or_nothing() {
    a_cancel_racing_a_grant(false);
}

#[test]
fn a_cancel_racing_a_fair_grant_gives_a_guard_or_nothing() {
    a_cancel_racing_a_grant(true);
}

/// Script calls the server has run so far.
fn evalsha_calls(raw: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(raw).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

/// The spin lock has no messages: its pause between attempts (a minute here) ends at
/// the cancel.
#[test]
fn a_cancel_ends_a_spin_lock_pause() {
    let server = TestServer::start();
    let holder = server.client();
    let client = server.client();
    let mut raw = server.conn();
    let name = unique("cancel-spin");
    let held = holder.get_spin_lock(name.clone()).lock().unwrap();
    let before = evalsha_calls(&mut raw);
    cancel_once(
        &Cancel::new(),
        // Its first attempt failed: it is in its minute-long pause.
        || evalsha_calls(&mut raw) > before,
        |cancel| {
            let lock = client
                .get_spin_lock(name.clone())
                .with_backoff(redmutex::BackOff::Constant(Duration::from_secs(60)));
            lock.lock_until(cancel).map(drop)
        },
    );
    assert_eq!(hgetall(&mut raw, &name).len(), 1, "only the holder holds");
    held.unlock().unwrap();
}

// ---- explicit owners -------------------------------------------------------------

/// An explicit owner N is the hash field `<client-id>:N`, as Redisson's `threadId`. A
/// thread that passes the same owner releases it; a thread without it is not the owner.
#[test]
fn an_explicit_owner_is_released_by_whichever_thread_passes_it() {
    let server = TestServer::start();
    let client = server.client();
    let mut raw = server.conn();
    let name = unique("owner");
    let lock = client.get_lock(name.clone());
    let owner = Owner::unique();
    lock.lock_as(owner).unwrap();
    let field = format!("{}:{}", client.id(), owner.id());
    assert_eq!(
        hgetall(&mut raw, &name).into_iter().collect::<Vec<_>>(),
        [(field, "1".to_owned())]
    );
    assert!(lock.is_held_by(owner).unwrap());
    assert!(
        !lock.is_held_by_current_thread().unwrap(),
        "not the thread's hold"
    );
    std::thread::scope(|s| {
        // A third thread without the owner: not its hold.
        s.spawn(|| {
            assert!(matches!(lock.unlock(), Err(Error::NotHeld { .. })));
            assert!(matches!(
                lock.unlock_as(Owner::unique()),
                Err(Error::NotHeld { .. })
            ));
        })
        .join()
        .unwrap();
        assert!(
            exists(&mut raw, &name),
            "the refused releases changed nothing"
        );
        // Another thread with it: released.
        s.spawn(|| lock.unlock_as(owner).unwrap()).join().unwrap();
    });
    assert!(!exists(&mut raw, &name));
    assert!(matches!(lock.unlock_as(owner), Err(Error::NotHeld { .. })));
}

/// An explicit owner's hold under the watchdog is renewed like a thread's, and the
/// release from another thread stops the renewal.
#[test]
fn an_explicit_owners_hold_is_renewed_until_released() {
    let server = TestServer::start();
    let client = server.client_with_watchdog(Duration::from_secs(1));
    let mut raw = server.conn();
    let name = unique("owner-renewed");
    let lock = client.get_lock(name.clone());
    let owner = Owner::from_id(u64::MAX - 7);
    lock.lock_as(owner).unwrap();
    assert!(
        await_renewal("of the explicit owner's hold", || {
            crate::support::raw::pttl(&mut raw, &name)
        }) > 0
    );
    assert_eq!(client.renewing_count(), 1);
    std::thread::spawn(move || lock.unlock_as(owner).unwrap())
        .join()
        .unwrap();
    assert_eq!(client.renewing_count(), 0);
    assert!(!exists(&mut raw, &name));
}

/// Explicit owners take the fair lock in turn too, and a try with an owner gives up.
#[test]
fn explicit_owners_contend_like_threads() {
    let server = TestServer::start();
    let client = server.client();
    let name = unique("owner-fair");
    let lock = client.get_fair_lock(name.clone());
    let (a, b) = (Owner::unique(), Owner::unique());
    lock.lock_with_lease_as(a, Duration::from_secs(30)).unwrap();
    assert!(!lock.try_lock_as(b, Duration::ZERO, None).unwrap());
    assert!(
        !lock
            .try_lock_as(b, Duration::from_millis(50), None)
            .unwrap()
    );
    lock.unlock_as(a).unwrap();
    assert!(lock.try_lock_as(b, Duration::ZERO, None).unwrap());
    // The current thread is an owner like any other, and not `b`.
    assert!(
        !lock
            .try_lock_as(Owner::current_thread(), Duration::ZERO, None)
            .unwrap()
    );
    lock.unlock_as(b).unwrap();
}
