//! Semaphores: Redisson's `RSemaphore` and `RPermitExpirableSemaphore` behaviours (protocol
//! doc §5.1, §5.2), the wire layout checked with raw commands, and the wake-up rule: a
//! release message wakes every waiter to retry once, whatever the number in it says.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::support::deploy::{Deployment, tap};
use crate::support::raw::{
    await_numsub, calls, get, now_ms, permit_leases, pttl, semaphore_channel,
};
use crate::support::{assert_waits_out, await_count, unique};
use redmutex::{Error, PermitId};

const NO_LEASE: f64 = 922_337_203_685_477.0;

// ---- RSemaphore -------------------------------------------------------------------

/// trySetPermits, availablePermits, addPermits, reducePermits, drainPermits,
/// releaseIfExists: the count is a plain string, and every change a waiter could use is
/// published as the new count.
pub(crate) fn permits_are_a_counter_and_changes_are_published<D: Deployment>(d: &D) {
    let client = d.client();
    let name = unique("sem");
    let mut raw = d.raw(&name);
    let sem = client.get_semaphore(name.clone());
    assert_eq!(sem.available_permits().unwrap(), 0);
    assert!(!sem.release_if_exists(1).unwrap());
    assert_eq!(
        get(&mut raw, &name),
        None,
        "release_if_exists created nothing"
    );
    let ((), got) = tap(d, &semaphore_channel(&name), || {
        assert!(sem.try_set_permits(3).unwrap());
        assert!(!sem.try_set_permits(5).unwrap());
        sem.add_permits(2).unwrap();
        sem.reduce_permits(1).unwrap();
        sem.release().unwrap();
        assert!(sem.release_if_exists(2).unwrap());
    });
    assert_eq!(got, ["3", "5", "4", "5", "7"]);
    assert_eq!(get(&mut raw, &name), Some(7));
    assert_eq!(sem.drain_permits().unwrap(), 7);
    assert_eq!(sem.available_permits().unwrap(), 0);
    sem.add_permits(-2).unwrap();
    assert_eq!(sem.available_permits().unwrap(), -2);
    assert!(sem.delete().unwrap());
    assert!(
        sem.try_set_permits_with_ttl(1, Duration::from_secs(60))
            .unwrap()
    );
    let ttl = pttl(&mut raw, &name);
    assert!(ttl > 50_000, "{ttl}");
    assert!(matches!(
        sem.try_set_permits_with_ttl(1, Duration::ZERO),
        Err(Error::InvalidArgument {
            argument: "ttl",
            ..
        })
    ));
}

/// testTryAcquire / testReleaseAcquire / testZero: guards give permits back, `detach`
/// keeps them taken, zero permits need no call.
pub(crate) fn guards_return_their_permits<D: Deployment>(d: &D) {
    let client = d.client();
    let name = unique("sem");
    let mut raw = d.raw(&name);
    let sem = client.get_semaphore(name.clone());
    assert!(sem.try_acquire().unwrap().is_none(), "no permits yet");
    let evals = calls(&mut raw, "evalsha");
    let none = sem
        .try_acquire_many(0)
        .unwrap()
        .expect("zero permits always");
    assert_eq!(none.permits(), 0);
    none.release().unwrap();
    assert_eq!(
        calls(&mut raw, "evalsha"),
        evals,
        "zero permits cost no call"
    );
    sem.try_set_permits(3).unwrap();
    let two = sem.try_acquire_many(2).unwrap().expect("two of three");
    assert_eq!(two.permits(), 2);
    assert!(sem.try_acquire_many(2).unwrap().is_none());
    let one = sem.try_acquire().unwrap().expect("the third");
    assert_eq!(sem.available_permits().unwrap(), 0);
    drop(two);
    assert_eq!(sem.available_permits().unwrap(), 2);
    one.detach();
    assert_eq!(sem.available_permits().unwrap(), 2);
    sem.release().unwrap(); // anyone may return a forgotten permit
    assert_eq!(sem.available_permits().unwrap(), 3);
    // Permits are not owned: a guard can move to another thread.
    let g = sem.acquire().unwrap();
    std::thread::scope(|s| {
        s.spawn(move || g.release().unwrap());
    });
    assert_eq!(sem.available_permits().unwrap(), 3);
}

/// testBlockingAcquire / testBlockingNAcquire: a waiter for three permits sleeps through
/// releases that leave it short and wakes on the one that completes them.
pub(crate) fn a_waiter_gets_its_permits_once_enough_were_released<D: Deployment>(d: &D) {
    let waiter = d.client();
    let releaser = d.client();
    let name = unique("sem");
    let mut raw = d.raw(&name);
    let sem = releaser.get_semaphore(name.clone());
    let got = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            let sem = waiter.get_semaphore(name.clone());
            let g = sem.acquire_many(3).unwrap();
            got.store(1, Ordering::SeqCst);
            g.detach();
        });
        await_numsub(&mut raw, &semaphore_channel(&name), 1);
        sem.release().unwrap();
        sem.release().unwrap();
        std::thread::sleep(Duration::from_millis(300)); // the waiter stays short meanwhile
        assert_eq!(got.load(Ordering::SeqCst), 0);
        let released = Instant::now();
        sem.release().unwrap();
        await_count(&got, 1, "waiter got three");
        assert!(released.elapsed() < Duration::from_secs(10));
    });
    assert_eq!(sem.available_permits().unwrap(), 0);
}

/// A release wakes every waiter of a client, and each retries once: with six waiters,
/// releasing two lets two in and costs one attempt per waiter; the four left go back to
/// sleep and get in on the next release.
pub(crate) fn a_release_wakes_every_waiter_to_retry_once<D: Deployment>(d: &D) {
    let client = d.client();
    let releaser = d.client();
    let name = unique("sem");
    let mut raw = d.raw(&name);
    let sem = releaser.get_semaphore(name.clone());
    sem.try_set_permits(0).unwrap();
    // Load the release script now, so that counting script calls below counts no
    // NOSCRIPT round.
    sem.release().unwrap();
    sem.try_acquire().unwrap().unwrap().detach();
    let inside = AtomicU64::new(0);
    std::thread::scope(|s| {
        let start = calls(&mut raw, "evalsha");
        for _ in 0..6 {
            let (client, name, inside) = (&client, name.clone(), &inside);
            s.spawn(move || {
                let sem = client.get_semaphore(name);
                let g = sem.acquire().unwrap();
                inside.fetch_add(1, Ordering::SeqCst);
                g.detach();
            });
        }
        // Every waiter has made its first attempt and its retry after subscribing.
        await_evalsha(&mut raw, start + 12);
        let before = calls(&mut raw, "evalsha");
        sem.release_many(2).unwrap();
        await_count(&inside, 2, "two got in");
        await_evalsha(&mut raw, before + 1 + 6);
        assert_eq!(inside.load(Ordering::SeqCst), 2);
        assert_eq!(sem.available_permits().unwrap(), 0);
        sem.release_many(4).unwrap();
        await_count(&inside, 6, "all six in");
    });
}

/// A count too small for a multi-permit waiter lets a smaller waiter behind it in, and
/// the big one gets its turn when there is enough.
pub(crate) fn a_small_release_serves_a_waiter_that_needs_less<D: Deployment>(d: &D) {
    let client = d.client();
    let releaser = d.client();
    let name = unique("sem");
    let mut raw = d.raw(&name);
    let sem = releaser.get_semaphore(name.clone());
    sem.try_set_permits(0).unwrap();
    sem.release().unwrap();
    sem.try_acquire().unwrap().unwrap().detach();
    let big = AtomicU64::new(0);
    let small = AtomicU64::new(0);
    std::thread::scope(|s| {
        let start = calls(&mut raw, "evalsha");
        s.spawn(|| {
            client
                .get_semaphore(name.clone())
                .acquire_many(2)
                .unwrap()
                .detach();
            big.store(1, Ordering::SeqCst);
        });
        await_evalsha(&mut raw, start + 2);
        s.spawn(|| {
            client
                .get_semaphore(name.clone())
                .acquire()
                .unwrap()
                .detach();
            small.store(1, Ordering::SeqCst);
        });
        await_evalsha(&mut raw, start + 4);
        let before = calls(&mut raw, "evalsha");
        sem.release().unwrap();
        await_count(&small, 1, "small waiter served");
        // The big waiter retried too, found one permit short of two, and sleeps.
        await_evalsha(&mut raw, before + 3);
        assert_eq!(big.load(Ordering::SeqCst), 0);
        sem.release_many(2).unwrap();
        await_count(&big, 1, "big waiter served");
    });
}

/// testTryAcquire with a wait: it lasts its time when nothing is released.
pub(crate) fn a_bounded_wait_runs_out<D: Deployment>(d: &D) {
    let client = d.client();
    let sem = client.get_semaphore(unique("sem"));
    assert_waits_out(Duration::from_millis(500), |wait| {
        sem.try_acquire_for(wait).unwrap().is_some()
    });
    assert!(
        sem.try_acquire_many_for(2, Duration::ZERO)
            .unwrap()
            .is_none()
    );
}

/// testConcurrency_MultiInstance: threads of three clients on a two-permit semaphore;
/// never more than two inside.
pub(crate) fn never_more_holders_than_permits<D: Deployment>(d: &D) {
    let clients: Vec<_> = (0..3).map(|_| d.client()).collect();
    let name = unique("sem");
    clients[0]
        .get_semaphore(name.clone())
        .try_set_permits(2)
        .unwrap();
    let inside = AtomicU64::new(0);
    let peak = AtomicU64::new(0);
    std::thread::scope(|s| {
        for client in &clients {
            for _ in 0..4 {
                let (name, inside, peak) = (name.clone(), &inside, &peak);
                s.spawn(move || {
                    let sem = client.get_semaphore(name);
                    for _ in 0..15 {
                        let g = sem.acquire().unwrap();
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(now, Ordering::SeqCst);
                        assert!(now <= 2, "{now} holders of 2 permits");
                        std::thread::sleep(Duration::from_millis(1));
                        inside.fetch_sub(1, Ordering::SeqCst);
                        g.release().unwrap();
                    }
                });
            }
        }
    });
    assert_eq!(peak.load(Ordering::SeqCst), 2);
    assert_eq!(
        clients[0].get_semaphore(name).available_permits().unwrap(),
        2
    );
}

// ---- RPermitExpirableSemaphore ------------------------------------------------------

/// The wire layout of §5.2: the id is 16 raw bytes in `{name}:timeout`, shown as 32
/// lowercase hex characters; no lease is scored 922337203685477, a lease by its end.
pub(crate) fn permit_ids_are_raw_bytes_on_the_wire_and_hex_for_people<D: Deployment>(d: &D) {
    let client = d.client();
    let name = unique("pes");
    let mut raw = d.raw(&name);
    let sem = client.get_permit_expirable_semaphore(name.clone());
    assert!(sem.try_set_permits(2).unwrap());
    let plain = sem.acquire().unwrap();
    let before = now_ms();
    let leased = sem.acquire_with_lease(Duration::from_secs(60)).unwrap();
    let after = now_ms();
    let text = plain.to_string();
    assert_eq!(text.len(), 32);
    assert!(
        text.chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    );
    let members = permit_leases(&mut raw, &name);
    assert_eq!(members.len(), 2);
    let by_id = |id: PermitId| {
        members
            .iter()
            .find(|(m, _)| m.as_slice() == id.as_bytes())
            .map(|(_, s)| *s)
            .expect("id stored as its 16 bytes")
    };
    assert_eq!(by_id(plain), NO_LEASE);
    let end = by_id(leased);
    assert!(end >= before + 60_000.0 && end <= after + 60_000.0, "{end}");
    assert_eq!(get(&mut raw, &name), Some(0));
    // An id a Redisson client would print parses back to the same permit.
    let printed: String = members[0].0.iter().map(|b| format!("{b:02x}")).collect();
    let id: PermitId = printed.parse().unwrap();
    sem.release(id).unwrap();
    assert_eq!(permit_leases(&mut raw, &name).len(), 1);
    assert_eq!(get(&mut raw, &name), Some(1));
}

/// testReleaseWithoutPermits / testNotExistent: an unknown id is not held; tryRelease
/// answers false; a release publishes the new count.
pub(crate) fn releasing_by_id<D: Deployment>(d: &D) {
    let client = d.client();
    let name = unique("pes");
    let sem = client.get_permit_expirable_semaphore(name.clone());
    sem.try_set_permits(1).unwrap();
    let id = sem.acquire().unwrap();
    let stranger: PermitId = "00000000000000000000000000000001".parse().unwrap();
    assert!(matches!(sem.release(stranger), Err(Error::NotHeld { .. })));
    assert!(!sem.try_release(stranger).unwrap());
    let (released, got) = tap(d, &semaphore_channel(&name), || {
        sem.try_release(id).unwrap()
    });
    assert!(released);
    assert_eq!(got, ["1"]);
    assert!(!sem.try_release(id).unwrap(), "released twice");
    assert_eq!(sem.available_permits().unwrap(), 1);
}

/// tryRelease(ids) is all or nothing.
pub(crate) fn releasing_many_is_all_or_nothing<D: Deployment>(d: &D) {
    let client = d.client();
    let sem = client.get_permit_expirable_semaphore(unique("pes"));
    sem.try_set_permits(3).unwrap();
    let ids = sem.acquire_many(3).unwrap();
    assert_eq!(ids.len(), 3);
    let stranger = PermitId::from_bytes([7; 16]);
    assert_eq!(sem.try_release_many(&[ids[0], stranger]).unwrap(), 0);
    assert!(matches!(
        sem.release_many(&[ids[1], stranger]),
        Err(Error::NotHeld { .. })
    ));
    assert_eq!(sem.acquired_permits().unwrap(), 3);
    assert_eq!(sem.try_release_many(&ids[..2]).unwrap(), 2);
    sem.release_many(&ids[2..]).unwrap();
    assert_eq!(sem.available_permits().unwrap(), 3);
    assert_eq!(sem.acquired_permits().unwrap(), 0);
    assert!(sem.acquire_many(0).unwrap().is_empty());
}

/// testExpiration / testReleaseExpired: a permit whose lease ended is reclaimed by the
/// next script that looks, and releasing it afterwards reports it not held.
pub(crate) fn expired_permits_are_reclaimed<D: Deployment>(d: &D) {
    let client = d.client();
    let name = unique("pes");
    let mut raw = d.raw(&name);
    let sem = client.get_permit_expirable_semaphore(name.clone());
    sem.try_set_permits(1).unwrap();
    let id = sem.acquire_with_lease(Duration::from_millis(300)).unwrap();
    assert!(sem.try_acquire().unwrap().is_none());
    assert_eq!(sem.permits().unwrap(), 1);
    std::thread::sleep(Duration::from_millis(400)); // the lease ending is the point
    // Nothing has run since: the permit is still in the set until a script reclaims it.
    assert_eq!(permit_leases(&mut raw, &name).len(), 1);
    let (available, got) = tap(d, &semaphore_channel(&name), || {
        sem.available_permits().unwrap()
    });
    assert_eq!(available, 1);
    assert_eq!(got, ["1"], "the reclaim publishes the new count");
    assert!(permit_leases(&mut raw, &name).is_empty());
    assert!(matches!(sem.release(id), Err(Error::NotHeld { .. })));
    assert_eq!(sem.acquired_permits().unwrap(), 0);
}

/// A waiter whose permits are all leased wakes when the earliest lease ends, with no
/// release message at all, and takes the reclaimed permit.
pub(crate) fn a_waiter_wakes_when_a_leased_permit_expires<D: Deployment>(d: &D) {
    let holder = d.client();
    let waiter = d.client();
    let name = unique("pes");
    let sem = holder.get_permit_expirable_semaphore(name.clone());
    sem.try_set_permits(1).unwrap();
    let started = Instant::now();
    sem.acquire_with_lease(Duration::from_millis(700)).unwrap();
    let id = waiter
        .get_permit_expirable_semaphore(name)
        .try_acquire_for(Duration::from_secs(30))
        .unwrap()
        .expect("the expired permit");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(650), "{waited:?}");
    assert!(waited < Duration::from_secs(15), "{waited:?}");
    sem.release(id).unwrap();
}

/// testBlockingAcquire: a waiter wakes on a release message.
pub(crate) fn a_waiter_wakes_on_a_release<D: Deployment>(d: &D) {
    let holder = d.client();
    let waiter = d.client();
    let name = unique("pes");
    let mut raw = d.raw(&name);
    let sem = holder.get_permit_expirable_semaphore(name.clone());
    sem.try_set_permits(1).unwrap();
    let id = sem.acquire().unwrap();
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            let sem = waiter.get_permit_expirable_semaphore(name.clone());
            let got = sem.acquire().unwrap();
            sem.release(got).unwrap();
            Instant::now()
        });
        await_numsub(&mut raw, &semaphore_channel(&name), 1);
        let released = Instant::now();
        sem.release(id).unwrap();
        assert!(w.join().unwrap().duration_since(released) < Duration::from_secs(10));
    });
}

/// testSetPermits / testAddPermits / testGetPermits: setPermits counts acquired permits
/// against the total; addPermits publishes only additions, and only the number added.
pub(crate) fn set_and_add_permits<D: Deployment>(d: &D) {
    let client = d.client();
    let name = unique("pes");
    let sem = client.get_permit_expirable_semaphore(name.clone());
    let ((), got) = tap(d, &semaphore_channel(&name), || {
        sem.set_permits(5).unwrap();
        let _a = sem.acquire_many(2).unwrap();
        sem.set_permits(3).unwrap();
        sem.add_permits(4).unwrap();
        sem.add_permits(-1).unwrap();
    });
    assert_eq!(got, ["5", "3", "4"]);
    assert_eq!(sem.acquired_permits().unwrap(), 2);
    assert_eq!(sem.available_permits().unwrap(), 1 + 4 - 1);
    assert_eq!(sem.permits().unwrap(), 6);
    assert!(!sem.try_set_permits(9).unwrap());
    assert!(sem.delete().unwrap());
    assert_eq!(sem.permits().unwrap(), 0);
}

/// testUpdateLeaseTime / testGetLeaseTime.
pub(crate) fn lease_times_can_be_read_and_changed<D: Deployment>(d: &D) {
    let client = d.client();
    let sem = client.get_permit_expirable_semaphore(unique("pes"));
    sem.try_set_permits(2).unwrap();
    let plain = sem.acquire().unwrap();
    let leased = sem.acquire_with_lease(Duration::from_secs(10)).unwrap();
    assert_eq!(sem.lease_time(plain).unwrap(), Some(Duration::MAX));
    let left = sem.lease_time(leased).unwrap().unwrap();
    assert!(
        left > Duration::from_secs(8) && left <= Duration::from_secs(10),
        "{left:?}"
    );
    assert!(
        sem.update_lease_time(leased, Duration::from_secs(100))
            .unwrap()
    );
    assert!(sem.lease_time(leased).unwrap().unwrap() > Duration::from_secs(90));
    assert!(
        sem.update_lease_time(plain, Duration::from_millis(200))
            .unwrap()
    );
    std::thread::sleep(Duration::from_millis(300)); // the new lease running out is the point
    assert_eq!(
        sem.lease_time(plain).unwrap(),
        None,
        "expired and reclaimed"
    );
    assert!(
        !sem.update_lease_time(plain, Duration::from_secs(5))
            .unwrap(),
        "an expired permit is not revived"
    );
    assert!(matches!(
        sem.update_lease_time(leased, Duration::ZERO),
        Err(Error::InvalidArgument {
            argument: "lease",
            ..
        })
    ));
    sem.release(leased).unwrap();
}

/// testConcurrency: threads of two clients on three permits with short leases they
/// release in time; never more than three inside, nothing left acquired at the end.
pub(crate) fn never_more_permit_holders_than_permits<D: Deployment>(d: &D) {
    let clients = [d.client(), d.client()];
    let name = unique("pes");
    clients[0]
        .get_permit_expirable_semaphore(name.clone())
        .try_set_permits(3)
        .unwrap();
    let inside = AtomicU64::new(0);
    std::thread::scope(|s| {
        for client in &clients {
            for _ in 0..4 {
                let (name, inside) = (name.clone(), &inside);
                s.spawn(move || {
                    let sem = client.get_permit_expirable_semaphore(name);
                    for _ in 0..10 {
                        let id = sem.acquire_with_lease(Duration::from_secs(30)).unwrap();
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        assert!(now <= 3, "{now} holders of 3 permits");
                        std::thread::sleep(Duration::from_millis(1));
                        inside.fetch_sub(1, Ordering::SeqCst);
                        sem.release(id).unwrap();
                    }
                });
            }
        }
    });
    let sem = clients[1].get_permit_expirable_semaphore(name);
    assert_eq!(sem.acquired_permits().unwrap(), 0);
    assert_eq!(sem.available_permits().unwrap(), 3);
}

// ---- the wake rule: no waiter sleeps while enough permits for it are free ------------
//
// A message on `redisson_sc:{name}` is not a budget. Redisson publishes the new count
// from some calls and the number added or released from others (the permit-expirable
// semaphore's addPermits and release(ids)), and the count may have changed again by the
// time a waiter retries. These tests fail when a waiter is woken only if the number in a
// message covers its need: the waiters' bounded waits then run out with enough permits
// free, and a wait that runs out returns `None` without another attempt, so only a
// wake-up by a message can make them pass.

/// How long the waiters below may wait: a bound that only a missed wake-up reaches.
const WAKE_WAIT: Duration = Duration::from_secs(20);

/// Waits until Redis has run `EVALSHA` `n` times in all: the way to know that waiters
/// made their retry after subscribing and are asleep.
fn await_evalsha(raw: &mut redis::Connection, n: u64) {
    crate::support::eventually(
        Duration::from_secs(10),
        &format!("{n} EVALSHA calls"),
        || calls(raw, "evalsha") >= n,
    );
}

/// Issue 14, bug 1, first scenario: a permit-expirable semaphore without permits, a
/// waiter for three, and three additions of one permit, each published as "1" (the
/// number added). The waiter retries on each and gets its permits on the third.
pub(crate) fn a_multi_permit_waiter_wakes_on_single_permit_additions<D: Deployment>(d: &D) {
    let client = d.client();
    let adder = d.client();
    let name = unique("pes");
    let mut raw = d.raw(&name);
    let pes = adder.get_permit_expirable_semaphore(name.clone());
    pes.try_set_permits(0).unwrap();
    // Load the scripts, so that EVALSHA counts below count no NOSCRIPT round.
    pes.add_permits(1).unwrap();
    pes.try_acquire().unwrap().unwrap();
    let ((), got) = tap(d, &semaphore_channel(&name), || {
        std::thread::scope(|s| {
            let before = calls(&mut raw, "evalsha");
            let waiter = s.spawn(|| {
                client
                    .get_permit_expirable_semaphore(name.clone())
                    .try_acquire_many_for(3, WAKE_WAIT)
                    .unwrap()
            });
            // The first attempt, then the retry after the subscription's confirmation.
            await_evalsha(&mut raw, before + 2);
            for _ in 0..3 {
                pes.add_permits(1).unwrap();
            }
            let ids = waiter.join().unwrap().expect("woken by the third addition");
            assert_eq!(ids.len(), 3);
        });
    });
    assert_eq!(
        got,
        ["1", "1", "1"],
        "each addition publishes the number added"
    );
    assert_eq!(pes.available_permits().unwrap(), 0);
}

/// The same with the permits coming back one id at a time through `release_many`, which
/// publishes the number released ("1"), as Redisson's `release(List)` does.
pub(crate) fn a_multi_permit_waiter_wakes_on_single_id_releases<D: Deployment>(d: &D) {
    let client = d.client();
    let holder = d.client();
    let name = unique("pes");
    let mut raw = d.raw(&name);
    let pes = holder.get_permit_expirable_semaphore(name.clone());
    pes.try_set_permits(3).unwrap();
    let ids = pes.acquire_many(3).unwrap();
    // Load the release script (one id out and back in).
    pes.release_many(&ids[..1]).unwrap();
    let first = pes.acquire().unwrap();
    let ids = [first, ids[1], ids[2]];
    std::thread::scope(|s| {
        let before = calls(&mut raw, "evalsha");
        let waiter = s.spawn(|| {
            client
                .get_permit_expirable_semaphore(name.clone())
                .try_acquire_many_for(3, WAKE_WAIT)
                .unwrap()
        });
        await_evalsha(&mut raw, before + 2);
        for id in ids {
            pes.release_many(&[id]).unwrap();
        }
        let got = waiter.join().unwrap().expect("woken by the third release");
        assert_eq!(got.len(), 3);
    });
}

/// Issue 14, bug 1, second scenario, made deterministic: waiters A (needs 3, first) and B
/// (needs 1) on one client. A release to 3 is published as "3", and another client takes
/// one permit before either retries (a MULTI block runs the three steps at once, as a
/// Java waiter that wins the race would). A retries and goes back to sleep; B must not
/// sleep with 2 permits free. A gets its turn when the count reaches 3 again.
pub(crate) fn a_message_wakes_every_waiter_of_a_semaphore<D: Deployment>(d: &D) {
    let client = d.client();
    let name = unique("sem");
    let mut raw = d.raw(&name);
    let chan = semaphore_channel(&name);
    let sem = client.get_semaphore(name.clone());
    sem.try_set_permits(0).unwrap();
    sem.release().unwrap();
    sem.try_acquire().unwrap().unwrap().detach();
    std::thread::scope(|s| {
        let before = calls(&mut raw, "evalsha");
        let a = s.spawn(|| {
            sem.try_acquire_many_for(3, WAKE_WAIT)
                .unwrap()
                .map(|g| g.detach())
        });
        await_evalsha(&mut raw, before + 2);
        let b = s.spawn(|| {
            sem.try_acquire_many_for(1, WAKE_WAIT)
                .unwrap()
                .map(|g| g.detach())
        });
        await_evalsha(&mut raw, before + 4);
        release_then_steal_one(&mut raw, &name, &chan, 3);
        assert!(b.join().unwrap().is_some(), "B slept with 2 permits free");
        assert_eq!(sem.available_permits().unwrap(), 1);
        sem.release_many(2).unwrap();
        assert!(a.join().unwrap().is_some(), "A slept with 3 permits free");
    });
    assert_eq!(sem.available_permits().unwrap(), 0);
}

/// The second scenario on a permit-expirable semaphore.
pub(crate) fn a_message_wakes_every_waiter_of_a_permit_semaphore<D: Deployment>(d: &D) {
    let client = d.client();
    let name = unique("pes");
    let mut raw = d.raw(&name);
    let chan = semaphore_channel(&name);
    let pes = client.get_permit_expirable_semaphore(name.clone());
    pes.try_set_permits(0).unwrap();
    pes.add_permits(1).unwrap();
    pes.try_acquire().unwrap().unwrap();
    std::thread::scope(|s| {
        let before = calls(&mut raw, "evalsha");
        let a = s.spawn(|| pes.try_acquire_many_for(3, WAKE_WAIT).unwrap());
        await_evalsha(&mut raw, before + 2);
        let b = s.spawn(|| pes.try_acquire_many_for(1, WAKE_WAIT).unwrap());
        await_evalsha(&mut raw, before + 4);
        release_then_steal_one(&mut raw, &name, &chan, 3);
        assert!(b.join().unwrap().is_some(), "B slept with 2 permits free");
        assert_eq!(pes.available_permits().unwrap(), 1);
        pes.add_permits(2).unwrap();
        assert!(a.join().unwrap().is_some(), "A slept with 3 permits free");
    });
    assert_eq!(pes.available_permits().unwrap(), 0);
}

/// Adds `n` permits and publishes the new count, then takes one permit away, in one
/// MULTI block: a release whose message says n while n − 1 permits are free when the
/// waiters retry.
fn release_then_steal_one(raw: &mut redis::Connection, name: &str, chan: &str, n: i64) {
    let () = redis::pipe()
        .atomic()
        .cmd("INCRBY")
        .arg(name)
        .arg(n)
        .ignore()
        .cmd("PUBLISH")
        .arg(chan)
        .arg(n)
        .ignore()
        .cmd("DECRBY")
        .arg(name)
        .arg(1)
        .ignore()
        .query(raw)
        .unwrap();
}

/// Issue 14, bug 2: Redisson reads permit counts and messages as a Java `int`, and a
/// wrapped count makes its waiters throw and stay blocked. Every call that could push a
/// count outside −2³¹..2³¹−1 is refused with `Error::Config` and changes nothing.
pub(crate) fn counts_beyond_java_int_are_refused<D: Deployment>(d: &D) {
    let client = d.client();
    let max = i32::MAX.unsigned_abs();
    let config = |r: redmutex::Result<()>| assert!(matches!(r, Err(Error::Config(_))), "{r:?}");

    let name = unique("sem-int");
    let mut raw = d.raw(&name);
    let sem = client.get_semaphore(name.clone());
    config(sem.try_set_permits(max + 1).map(drop));
    config(
        sem.try_set_permits_with_ttl(u32::MAX, Duration::from_secs(9))
            .map(drop),
    );
    assert_eq!(get(&mut raw, &name), None, "nothing was created");
    assert!(sem.try_set_permits(max - 1).unwrap());
    config(sem.release_many(2));
    config(sem.release_if_exists(2).map(drop));
    config(sem.add_permits(2));
    assert_eq!(get(&mut raw, &name), Some(i64::from(max) - 1));
    sem.release().unwrap();
    assert_eq!(sem.available_permits().unwrap(), i64::from(i32::MAX));
    config(sem.add_permits(-(1_i64 << 33)));
    sem.add_permits(-i64::from(i32::MAX)).unwrap();
    sem.reduce_permits(max).unwrap();
    assert_eq!(sem.available_permits().unwrap(), -i64::from(i32::MAX));
    sem.reduce_permits(1).unwrap();
    config(sem.reduce_permits(1));
    assert_eq!(sem.available_permits().unwrap(), i64::from(i32::MIN));

    let name = unique("pes-int");
    let pes = client.get_permit_expirable_semaphore(name.clone());
    config(pes.try_set_permits(max + 1).map(drop));
    config(pes.set_permits(max + 1));
    assert!(pes.try_set_permits(max).unwrap());
    pes.acquire_many(2).unwrap();
    // 2 acquired + (max − 2) available is the largest total Java can read.
    config(pes.add_permits(1));
    assert_eq!(pes.permits().unwrap(), i64::from(i32::MAX));
    pes.add_permits(-5).unwrap();
    pes.add_permits(5).unwrap();
    assert_eq!(pes.available_permits().unwrap(), i64::from(max) - 2);
}

/// This suite's cases, listed once; each deployment binary stamps them all with one line
/// (`tests/single`, `tests/cluster`, `tests/sentinel`), through [`redmutex_harness::cases!`]
/// (`own on ...` or `shared(key) on ...`), with this file declared as `semaphore_suite` at its root.
macro_rules! semaphore_cases {
    ($($on:tt)*) => {
        redmutex_harness::cases!($($on)*; semaphore_suite;
            [
                permits_are_a_counter_and_changes_are_published,
                a_waiter_gets_its_permits_once_enough_were_released,
                a_bounded_wait_runs_out,
                never_more_holders_than_permits,
                permit_ids_are_raw_bytes_on_the_wire_and_hex_for_people,
                releasing_by_id,
                releasing_many_is_all_or_nothing,
                expired_permits_are_reclaimed,
                a_waiter_wakes_when_a_leased_permit_expires,
                a_waiter_wakes_on_a_release,
                set_and_add_permits,
                lease_times_can_be_read_and_changed,
                never_more_permit_holders_than_permits,
                counts_beyond_java_int_are_refused,
            ]
            alone [
                guards_return_their_permits,
                a_release_wakes_every_waiter_to_retry_once,
                a_small_release_serves_a_waiter_that_needs_less,
                a_multi_permit_waiter_wakes_on_single_permit_additions,
                a_multi_permit_waiter_wakes_on_single_id_releases,
                a_message_wakes_every_waiter_of_a_semaphore,
                a_message_wakes_every_waiter_of_a_permit_semaphore,
            ]
        );
    };
}
pub(crate) use semaphore_cases;
