//! The count-down latch: Redisson's `RCountDownLatch` behaviours (protocol doc §5.3), its
//! always-braced channel, and the wake-up rule: only the count-down that reaches zero
//! wakes waiters, and it wakes all of them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::support::deploy::{Deployment, tap};
use crate::support::raw::{await_numsub, calls, exists, get, latch_channel};
use crate::support::{assert_waits_out, await_count, unique};

/// testTrySetCount / testCountDown: the count is a plain string; setting it publishes
/// "1", the count-down that reaches zero deletes it and publishes "0", once.
pub(crate) fn the_count_lives_in_a_string_and_zero_is_published_once<D: Deployment>(d: &D) {
    let client = d.client();
    let name = unique("latch");
    let mut raw = d.raw(&name);
    let latch = client.get_count_down_latch(name.clone());
    assert_eq!(latch.get_count().unwrap(), 0);
    let ((), got) = tap(d, &latch_channel(&name), || {
        assert!(latch.try_set_count(2).unwrap());
        assert!(!latch.try_set_count(5).unwrap());
        assert_eq!(get(&mut raw, &name), Some(2));
        latch.count_down().unwrap();
        assert_eq!(latch.get_count().unwrap(), 1);
        latch.count_down().unwrap();
        latch.count_down().unwrap(); // below zero: nothing to open
    });
    assert_eq!(got, ["1", "0"]);
    assert_eq!(latch.get_count().unwrap(), 0);
    assert!(!exists(&mut raw, &name));
    assert!(latch.try_set_count(1).unwrap(), "a new round can start");
}

/// testAwaitTimeout / testAwaitTimeoutFail: an open latch returns at once; a closed one
/// waits its time out.
pub(crate) fn waiting_with_a_timeout<D: Deployment>(d: &D) {
    let client = d.client();
    let latch = client.get_count_down_latch(unique("latch"));
    assert!(latch.wait_for(Duration::ZERO).unwrap(), "no latch is open");
    latch.wait().unwrap();
    latch.try_set_count(1).unwrap();
    assert_waits_out(Duration::from_millis(500), |wait| {
        latch.wait_for(wait).unwrap()
    });
}

/// Waiters of several clients all open on the last count-down; count-downs before it
/// wake nobody (no waiter reads the count again), and the last one wakes every waiter
/// once.
pub(crate) fn only_the_last_count_down_opens_and_it_opens_everyone<D: Deployment>(d: &D) {
    let waiters = [d.client(), d.client()];
    let counter = d.client();
    let name = unique("latch");
    let mut raw = d.raw(&name);
    let latch = counter.get_count_down_latch(name.clone());
    latch.try_set_count(3).unwrap();
    let opened = AtomicU64::new(0);
    std::thread::scope(|s| {
        for i in 0..8 {
            let (client, name, opened) = (&waiters[i % 2], name.clone(), &opened);
            s.spawn(move || {
                client.get_count_down_latch(name).wait().unwrap();
                opened.fetch_add(1, Ordering::SeqCst);
            });
        }
        await_numsub(&mut raw, &latch_channel(&name), 2);
        // Time passing is the point: every waiter has re-read the count after
        // subscribing and sleeps now.
        std::thread::sleep(Duration::from_millis(500));
        let gets = calls(&mut raw, "get");
        latch.count_down().unwrap();
        latch.count_down().unwrap();
        std::thread::sleep(Duration::from_millis(300)); // nobody moves meanwhile
        assert_eq!(opened.load(Ordering::SeqCst), 0);
        assert_eq!(calls(&mut raw, "get"), gets, "no waiter woke");
        latch.count_down().unwrap();
        await_count(&opened, 8, "all opened");
        assert_eq!(
            calls(&mut raw, "get") - gets,
            8,
            "each waiter read the count once"
        );
    });
}

/// testDelete / testDeleteFailed: delete publishes "1", which wakes nobody; waiters keep
/// waiting for a count that reaches zero.
pub(crate) fn delete_does_not_open_waiters<D: Deployment>(d: &D) {
    let client = d.client();
    let waiter = d.client();
    let name = unique("latch");
    let mut raw = d.raw(&name);
    let latch = client.get_count_down_latch(name.clone());
    assert!(!latch.delete().unwrap());
    latch.try_set_count(1).unwrap();
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            waiter
                .get_count_down_latch(name.clone())
                .wait_for(Duration::from_secs(30))
                .unwrap()
        });
        await_numsub(&mut raw, &latch_channel(&name), 1);
        std::thread::sleep(Duration::from_millis(300)); // the waiter's re-read is done
        let gets = calls(&mut raw, "get");
        let (deleted, got) = tap(d, &latch_channel(&name), || latch.delete().unwrap());
        assert!(deleted);
        assert_eq!(got, ["1"]);
        assert_eq!(calls(&mut raw, "get"), gets, "\"1\" woke nobody");
        // A new round that reaches zero opens the waiter.
        latch.try_set_count(1).unwrap();
        latch.count_down().unwrap();
        assert!(w.join().unwrap());
    });
}

/// A count-down of a latch that is not counting creates nothing.
pub(crate) fn counting_down_nothing_leaves_nothing<D: Deployment>(d: &D) {
    let client = d.client();
    let name = unique("latch");
    let mut raw = d.raw(&name);
    let latch = client.get_count_down_latch(name.clone());
    let ((), got) = tap(d, &latch_channel(&name), || {
        latch.count_down().unwrap();
    });
    assert!(got.is_empty());
    assert!(!exists(&mut raw, &name));
    assert!(matches!(
        latch.try_set_count(u64::MAX),
        Err(redmutex::Error::Config(_))
    ));
}

/// This suite's cases, listed once; each deployment binary stamps them all with one line
/// (`tests/single`, `tests/cluster`, `tests/sentinel`), through [`redmutex_harness::cases!`]
/// (`own on ...` or `shared(key) on ...`), with this file declared as `latch_suite` at its root.
macro_rules! latch_cases {
    ($($on:tt)*) => {
        redmutex_harness::cases!($($on)*; latch_suite;
            [
                the_count_lives_in_a_string_and_zero_is_published_once,
                waiting_with_a_timeout,
                counting_down_nothing_leaves_nothing,
            ]
            alone [
                only_the_last_count_down_opens_and_it_opens_everyone,
                delete_does_not_open_waiters,
            ]
        );
    };
}
pub(crate) use latch_cases;
