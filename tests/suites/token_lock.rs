//! The plain string-token lock (`TokenLock`) on every deployment: exclusion, token
//! checks, loss and the wake-up message. What needs one server of its own (the wire
//! format with key prefixes, the watchdog's silence when idle, faults, the quorum) is in
//! `tests/single/string_lock.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use redmutex::{Error, TokenLockOptions};

use crate::support::deploy::{Deployment, tap};
use crate::support::raw::{await_numsub, pttl};
use crate::support::unique;

const HANG: Duration = Duration::from_secs(60);

/// The key's value, as a string.
pub(crate) fn get(raw: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(raw).unwrap()
}

/// Runs one raw command whose reply does not matter.
pub(crate) fn cmd(raw: &mut redis::Connection, args: &[&str]) {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    let _: redis::Value = c.query(raw).unwrap();
}

/// redmutex's wake-up channel of a token lock whose key has no braces, spelled out.
pub(crate) fn wake_channel(key: &str) -> String {
    format!("redmutex_token_lock__channel:{{{key}}}")
}

pub(crate) fn threads_of_two_clients_exclude_each_other_and_keep_an_exact_counter<D: Deployment>(
    d: &D,
) {
    let name = unique("tok:excl");
    // In the lock's slot: one raw connection serves both on a cluster.
    let counter = format!("{{{name}}}:n");
    let busy = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicU64::new(0));
    const PER_THREAD: u64 = 30;
    std::thread::scope(|s| {
        for _ in 0..2 {
            let client = d.client();
            for _ in 0..3 {
                let (client, name, counter) = (client.clone(), name.clone(), counter.clone());
                let (busy, overlaps) = (Arc::clone(&busy), Arc::clone(&overlaps));
                let mut raw = d.raw(&name);
                s.spawn(move || {
                    let lock = client.get_token_lock(name);
                    for _ in 0..PER_THREAD {
                        let guard = lock.lock().unwrap();
                        if busy.swap(true, Ordering::SeqCst) {
                            overlaps.fetch_add(1, Ordering::SeqCst);
                        }
                        let n: Option<u64> =
                            redis::cmd("GET").arg(&counter).query(&mut raw).unwrap();
                        cmd(
                            &mut raw,
                            &["SET", &counter, &(n.unwrap_or(0) + 1).to_string()],
                        );
                        busy.store(false, Ordering::SeqCst);
                        guard.unlock().unwrap();
                    }
                });
            }
        }
    });
    let mut raw = d.raw(&name);
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    assert_eq!(get(&mut raw, &counter), Some((6 * PER_THREAD).to_string()));
    assert_eq!(get(&mut raw, &name), None);
}

pub(crate) fn a_release_or_extend_with_a_wrong_token_changes_nothing<D: Deployment>(d: &D) {
    let client = d.client();
    let name = unique("tok:wrong");
    let mut raw = d.raw(&name);
    let lock = client.get_token_lock(name.clone());

    // Re-taken by someone else (no TTL, so any PEXPIRE would show).
    let guard = lock.lock().unwrap();
    cmd(&mut raw, &["SET", &name, "foreign"]);
    assert!(!guard.is_held().unwrap());
    assert!(matches!(
        guard.extend(Duration::from_secs(5)),
        Err(Error::LockLost { .. })
    ));
    assert!(guard.is_lost());
    assert!(matches!(guard.unlock(), Err(Error::LockLost { .. })));
    assert_eq!(get(&mut raw, &name).as_deref(), Some("foreign"));
    assert_eq!(pttl(&mut raw, &name), -1);

    // A holder held elsewhere: a try fails, changing nothing.
    assert!(lock.try_lock().unwrap().is_none());
    assert_eq!(get(&mut raw, &name).as_deref(), Some("foreign"));
    assert_eq!(pttl(&mut raw, &name), -1);

    // Gone: the release is refused too, and nothing is created.
    cmd(&mut raw, &["DEL", &name]);
    let guard = lock.lock().unwrap();
    cmd(&mut raw, &["DEL", &name]);
    assert!(matches!(
        guard.extend(Duration::from_secs(5)),
        Err(Error::LockLost { .. })
    ));
    assert!(matches!(guard.unlock(), Err(Error::LockLost { .. })));
    assert_eq!(get(&mut raw, &name), None);
    assert_eq!(client.renewing_count(), 0);
}

/// A hold whose key is deleted, or retaken by someone else, is reported lost by the
/// next renewal (one period, 1 s here), and its release says so.
///
/// The lease leaves a loaded machine room: with 600 ms each renewal attempt was capped
/// at 50 ms and one unanswered for 300 ms already made the hold `PossiblyLost`, which a
/// busy cluster node delivered first. A 3 s lease needs a watchdog starved for 1.5 s
/// for that; if it still happens, `PossiblyLost` is what the guard honestly says of a
/// hold it could not confirm, and is accepted (the release must still refuse).
pub(crate) fn loss_is_signalled_when_the_key_is_deleted_or_retaken<D: Deployment>(d: &D) {
    let client = d.client_with_watchdog(Duration::from_secs(3));
    for retake in [false, true] {
        let name = unique("tok:loss");
        let mut raw = d.raw(&name);
        let lock = client.get_token_lock(name.clone());
        let guard = lock.lock().unwrap();
        let signal = guard.loss_signal();
        if retake {
            cmd(&mut raw, &["SET", &name, "someone-else", "PX", "60000"]);
        } else {
            cmd(&mut raw, &["DEL", &name]);
        }
        let loss = signal.recv_timeout(HANG).expect("no loss signalled");
        if loss == redmutex::Loss::PossiblyLost {
            println!("{name}: reported possibly lost before a renewal found it gone");
        } else {
            assert_eq!(loss, redmutex::Loss::Lost);
        }
        assert!(guard.is_lost());
        assert!(matches!(guard.unlock(), Err(Error::LockLost { .. })));
        if retake {
            assert_eq!(get(&mut raw, &name).as_deref(), Some("someone-else"));
        }
    }
}

pub(crate) fn a_redmutex_release_wakes_a_waiter_at_once_with_a_message_of_its_own<D: Deployment>(
    d: &D,
) {
    // Only a message can end this wait early: no retry pauses, and the holder's key
    // lives 30 s (renewed) while the waiter waits at most 20 s.
    let opts = TokenLockOptions::new().retry_delay(None);
    let holder = d.client();
    let waiter = d.client();
    let name = unique("tok:wake");
    let mut raw = d.raw(&name);
    let held = holder
        .get_token_lock_with(name.clone(), opts.clone())
        .unwrap();
    let guard = held.lock().unwrap();
    let (got_tx, got) = std::sync::mpsc::channel();
    let (release_tx, release) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        let (waiter, name, opts) = (&waiter, &name, &opts);
        s.spawn(move || {
            let lock = waiter
                .get_token_lock_with(name.clone(), opts.clone())
                .unwrap();
            let guard = lock.try_lock_for(Duration::from_secs(20)).unwrap();
            got_tx.send(guard.is_some()).unwrap();
            // Hold on until the test has counted the messages.
            release.recv().unwrap();
            drop(guard);
        });
        await_numsub(&mut raw, &wake_channel(name), 1);
        let (woken, messages) = tap(d, &wake_channel(name), || {
            guard.unlock().unwrap();
            got.recv_timeout(HANG).unwrap()
        });
        assert!(woken, "the waiter was not woken");
        assert_eq!(messages, ["0"]);
        release_tx.send(()).unwrap();
    });
}

/// This suite's cases, listed once; each deployment binary stamps them all with one line
/// (`tests/single`, `tests/cluster`, `tests/sentinel`), through [`redmutex_harness::cases!`]
/// (`own on ...` or `shared(key) on ...`), with this file declared as `token_suite` at its root.
macro_rules! token_lock_cases {
    ($($on:tt)*) => {
        redmutex_harness::cases!($($on)*; token_suite;
            [
                threads_of_two_clients_exclude_each_other_and_keep_an_exact_counter,
                a_release_or_extend_with_a_wrong_token_changes_nothing,
                loss_is_signalled_when_the_key_is_deleted_or_retaken,
                a_redmutex_release_wakes_a_waiter_at_once_with_a_message_of_its_own,
            ]
            alone [
            ]
        );
    };
}
pub(crate) use token_lock_cases;
