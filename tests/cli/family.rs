//! The rest of Redisson's lock family (issue 14) against real redis-servers: the fenced
//! lock and the fenced write, the spin lock, the non-reentrant locks, the expiry family
//! the MultiLock and the RedLock (`family/redlock.rs`). Their interop with Redisson is
//! in `tests/redisson/`.

mod redlock;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use crate::support::raw::{
    calls, exists, fair_queue, fair_queue_key, fair_timeouts_key, fenced_token_key, get, hgetall,
    lock_channel, permit_timeouts_key, pttl,
};
use crate::support::{Holder, TestServer, eventually, tap, unique};
use redmutex::{AnyLock, Error, RExpirable, Refusal};

/// Hang guard for anything that should take milliseconds.
const HANG: Duration = Duration::from_secs(60);

fn other_thread<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| s.spawn(f).join().unwrap())
}

// ---- fenced lock ---------------------------------------------------------------------

/// Every grant draws a new token, re-entry included; the counter lives beside the hash
/// in the same slot, without a TTL.
#[test]
fn fenced_tokens_rise_on_every_grant_including_reentry() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let a = server.client();
    let b = server.client();
    let name = unique("fenced");
    let lock = a.get_fenced_lock(name.clone());
    assert_eq!(lock.get_token().unwrap(), 0);
    let first = lock.lock_and_get_token().unwrap();
    let second = lock.lock().unwrap();
    assert_eq!((first.token(), second.token()), (1, 2));
    assert_eq!(lock.get_token().unwrap(), 2);
    assert_eq!(lock.hold_count().unwrap(), 2);
    assert_eq!(get(&mut raw, &fenced_token_key(&name)), Some(2));
    assert_eq!(pttl(&mut raw, &fenced_token_key(&name)), -1, "no TTL");
    let hash = hgetall(&mut raw, &name);
    assert_eq!(hash.get(&format!("{}:", a.id())[..]), None);
    assert_eq!(hash.len(), 1);
    assert_eq!(hash.values().next().map(String::as_str), Some("2"));

    let other = b.get_fenced_lock(name.clone());
    assert!(other_thread(|| other.try_lock().unwrap().is_none()));
    drop(second);
    drop(first);
    let third = other_thread(|| {
        other
            .try_lock_and_get_token(HANG, Duration::from_secs(30))
            .unwrap()
            .map(|g| {
                let t = g.token();
                g.unlock().unwrap();
                t
            })
    });
    assert_eq!(third, Some(3));
    assert_eq!(lock.get_token().unwrap(), 3);
}

/// A plain `RLock` on a fenced name takes the hash as Redisson's `RLock` does there,
/// without drawing a token, and the unlock message wakes fenced and plain waiters alike.
#[test]
fn a_plain_lock_on_a_fenced_name_draws_no_token_and_shares_the_channel() {
    let server = TestServer::start();
    let client = server.client();
    let name = unique("fenced-plain");
    let fenced = client.get_fenced_lock(name.clone());
    let plain = client.get_lock(name.clone());
    fenced.lock().unwrap().unlock().unwrap();
    let held = plain.lock().unwrap();
    assert_eq!(
        fenced.get_token().unwrap(),
        1,
        "the plain lock drew nothing"
    );
    std::thread::scope(|s| {
        // The waiter keeps its hold, so that only the plain unlock publishes.
        let waiter = s.spawn(|| {
            fenced.try_lock_for(HANG).unwrap().map(|g| {
                let token = g.token();
                g.detach();
                token
            })
        });
        let mut raw = server.conn();
        crate::support::raw::await_numsub(&mut raw, &lock_channel(&name), 1);
        let ((), got) = tap(&server, &lock_channel(&name), || held.unlock().unwrap());
        assert_eq!(got, ["0"]);
        assert_eq!(waiter.join().unwrap(), Some(2), "woken by the plain unlock");
    });
}

/// `delete` removes the lock and its counter without a message; `force_unlock` removes
/// only the lock, so tokens keep rising.
#[test]
fn fenced_delete_resets_the_tokens_and_force_unlock_does_not() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client();
    let name = unique("fenced-del");
    let lock = client.get_fenced_lock(name.clone());
    lock.lock().unwrap().detach();
    assert!(lock.force_unlock().unwrap());
    assert_eq!(lock.lock().unwrap().token(), 2);
    let ((), got) = tap(&server, &lock_channel(&name), || {
        assert!(lock.delete().unwrap());
    });
    assert!(got.is_empty(), "delete publishes nothing: {got:?}");
    assert!(!exists(&mut raw, &name));
    assert!(!exists(&mut raw, &fenced_token_key(&name)));
    assert_eq!(lock.lock().unwrap().token(), 1);
}

/// The case a fenced write exists for. A holder frozen with SIGSTOP past its lease (its
/// watchdog frozen with it) had read a counter; meanwhile another client takes the lock
/// and increments the counter five times. On resume the frozen holder's fenced write of
/// its stale value is refused and changes nothing; its unfenced write of the same value
/// goes through and undoes the five increments.
#[test]
fn a_frozen_holders_fenced_write_is_refused_and_its_unfenced_write_corrupts() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let name = unique("{fenced-sigstop}");
    let counter = format!("{name}:counter");
    let _: () = redis::cmd("SET")
        .arg(&counter)
        .arg(10)
        .query(&mut raw)
        .unwrap();
    let mut holder = Holder::holding(&server.url(), &name, 1_000, &["--fenced-counter", &counter]);
    assert_eq!(holder.expect("read "), "read 10");
    holder.signal("STOP");

    // The holder's lease runs out while it is frozen; this waiter wakes at the holder's
    // TTL bound (no unlock is ever published) and takes the lock with a newer token.
    let client = server.client();
    let lock = client.get_fenced_lock(name.clone());
    let guard = lock
        .try_lock_for(HANG)
        .unwrap()
        .expect("the frozen lease ended");
    assert_eq!(guard.token(), 2);
    for _ in 0..5 {
        guard
            .fenced(|w| {
                w.incr_by(&counter, 1);
            })
            .unwrap();
    }
    assert_eq!(get(&mut raw, &counter), Some(15));

    holder.signal("CONT");
    holder.cue("go");
    assert_eq!(holder.expect("fenced "), "fenced refused NotHeld");
    assert_eq!(
        get(&mut raw, &counter),
        Some(15),
        "the refused write wrote nothing"
    );
    holder.cue("go");
    assert_eq!(holder.expect("unfenced "), "unfenced wrote 11");
    assert_eq!(
        get(&mut raw, &counter),
        Some(11),
        "the unfenced write lost five increments"
    );
    assert_eq!(holder.expect("unlock "), "unlock refused");
    assert!(lock.is_held_by_current_thread().unwrap());
    guard.unlock().unwrap();
}

/// Only the newest grant writes: after a re-entry the outer guard's token is stale, and
/// its fenced write is refused with the newest token, nothing written.
#[test]
fn a_fenced_write_with_a_stale_token_writes_nothing() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client();
    let name = unique("{fenced-stale}");
    let key = format!("{name}:v");
    let lock = client.get_fenced_lock(name.clone());
    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();
    let refused = outer.fenced(|w| {
        w.set(&key, "outer");
    });
    assert!(
        matches!(
            refused,
            Err(Error::FenceRefused {
                reason: Refusal::StaleToken { newest: 2 },
                ..
            })
        ),
        "{refused:?}"
    );
    assert!(!exists(&mut raw, &key));
    let replies = inner
        .fenced(|w| {
            w.set(&key, "inner")
                .hset(&format!("{name}:h"), "f", 1)
                .pexpire(&key, 60_000);
        })
        .unwrap();
    assert_eq!(
        replies,
        [
            redis::Value::Okay,
            redis::Value::Int(1),
            redis::Value::Int(1)
        ]
    );
    let v: String = redis::cmd("GET").arg(&key).query(&mut raw).unwrap();
    assert_eq!(v, "inner");
}

/// On kinds without tokens the fenced write checks the owner field: a plain lock's, a
/// write lock's `:write` field. A lost hold is refused; a command that names the lock
/// itself is refused before anything runs; a command that fails after the checks
/// reports how many took effect.
#[test]
fn a_fenced_write_on_other_kinds_checks_the_owner() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client();
    let name = unique("{fenced-plain}");
    let key = format!("{name}:v");
    let lock = client.get_lock(name.clone());
    let guard = lock.lock().unwrap();
    guard
        .fenced(|w| {
            w.incr_by(&key, 2);
        })
        .unwrap();
    let bad = guard.fenced(|w| {
        w.del(&name);
    });
    assert!(matches!(bad, Err(Error::Config(_))), "{bad:?}");
    assert!(exists(&mut raw, &name), "the lock was not written");
    let partial = guard.fenced(|w| {
        w.incr_by(&key, 1).hset(&key, "f", "v").incr_by(&key, 1);
    });
    match partial {
        Err(Error::FencedPartial { applied, .. }) => assert_eq!(applied, 1),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        get(&mut raw, &key),
        Some(3),
        "the first command stays applied"
    );
    assert!(lock.force_unlock().unwrap());
    let lost = guard.fenced(|w| {
        w.incr_by(&key, 1);
    });
    assert!(lost.as_ref().is_err_and(Error::is_not_held), "{lost:?}");
    assert_eq!(get(&mut raw, &key), Some(3));
    drop(guard);

    let rw = client.get_read_write_lock(name.clone());
    let write = rw.write_lock().lock().unwrap();
    write
        .fenced(|w| {
            w.set(&key, 7);
        })
        .unwrap();
    assert_eq!(get(&mut raw, &key), Some(7));
}

/// The recipe for resources outside Redis: the resource keeps the highest token it has
/// accepted and refuses lower ones. A holder that lost its lock (here by a force unlock,
/// standing for any loss) is refused once the next holder has written.
#[test]
fn a_resource_outside_redis_refuses_lower_tokens() {
    /// The resource's side: one compare-and-set on the highest token seen.
    struct Storage {
        highest: AtomicU64,
        writes: std::sync::Mutex<Vec<&'static str>>,
    }
    impl Storage {
        fn write(&self, token: u64, what: &'static str) -> bool {
            let mut seen = self.highest.load(Ordering::SeqCst);
            loop {
                if token < seen {
                    return false;
                }
                match self
                    .highest
                    .compare_exchange(seen, token, Ordering::SeqCst, Ordering::SeqCst)
                {
                    Ok(_) => break,
                    Err(now) => seen = now,
                }
            }
            self.writes.lock().unwrap().push(what);
            true
        }
    }
    let server = TestServer::start();
    let (a, b) = (server.client(), server.client());
    let name = unique("fenced-resource");
    let storage = Storage {
        highest: AtomicU64::new(0),
        writes: Default::default(),
    };
    let old = a.get_fenced_lock(name.clone()).lock().unwrap();
    assert!(storage.write(old.token(), "old, while holding"));
    assert!(storage.write(old.token(), "old again, same grant"));
    assert!(b.get_fenced_lock(name.clone()).force_unlock().unwrap());
    let new = other_thread(|| {
        let g = b.get_fenced_lock(name.clone()).lock().unwrap();
        let t = g.token();
        assert!(storage.write(t, "new"));
        g.unlock().unwrap();
        t
    });
    assert!(new > old.token());
    assert!(!storage.write(old.token(), "old, after losing the lock"));
    assert_eq!(
        *storage.writes.lock().unwrap(),
        ["old, while holding", "old again, same grant", "new"]
    );
}

// ---- spin lock -------------------------------------------------------------------------

/// Spin-lock waiters poll with back-off: nothing is published or subscribed, and a
/// waiter takes the lock after the release at one of its attempts.
#[test]
fn spin_waiters_poll_and_nothing_is_published() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let (a, b) = (server.client(), server.client());
    let name = unique("spin");
    let lock = a.get_spin_lock(name.clone());
    let ((), got) = tap(&server, &lock_channel(&name), || {
        let guard = lock.lock().unwrap();
        let again = lock.lock().unwrap();
        assert_eq!(lock.hold_count().unwrap(), 2);
        std::thread::scope(|s| {
            let before = calls(&mut raw, "evalsha");
            let waiter = s.spawn(|| {
                b.get_spin_lock(name.clone())
                    .with_backoff(redmutex::BackOff::Constant(Duration::from_millis(5)))
                    .try_lock_for(HANG)
                    .unwrap()
                    .map(|g| g.unlock().unwrap())
            });
            // The waiter keeps trying while the lock is held.
            eventually(HANG, "the waiter retried", || {
                calls(&mut raw, "evalsha") >= before + 3
            });
            drop(again);
            drop(guard);
            assert!(waiter.join().unwrap().is_some());
        });
    });
    assert!(got.is_empty(), "spin locks publish nothing: {got:?}");
    assert_eq!(calls(&mut raw, "subscribe"), 1, "only the tap subscribed");
    lock.lock().unwrap().detach();
    assert!(lock.force_unlock().unwrap());
    assert!(!exists(&mut raw, &name));
}

/// An `RLock` waiter on a spin-locked name: the spin unlock publishes nothing, so the
/// waiter is not told and takes the lock when its sleep bound, the holder's remaining
/// lease, has passed; Redisson's `RLock` waiter behaves the same. Mutual exclusion holds
/// throughout.
#[test]
fn an_rlock_waiter_on_a_spin_locked_name_takes_it_at_its_ttl_bound() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let holder = server.client_with_watchdog(Duration::from_millis(1_500));
    let waiter = server.client();
    let name = unique("spin-rlock");
    let spin = holder.get_spin_lock(name.clone());
    let guard = spin.lock().unwrap();
    let plain = waiter.get_lock(name.clone());
    assert!(
        other_thread(|| plain.try_lock().unwrap().is_none()),
        "excluded"
    );
    let ((), got) = tap(&server, &lock_channel(&name), || {
        std::thread::scope(|s| {
            // It keeps the lock, so that its own unlock publishes nothing inside the tap.
            let w = s.spawn(|| plain.try_lock_for(HANG).unwrap().expect("took it").detach());
            crate::support::raw::await_numsub(&mut raw, &lock_channel(&name), 2);
            guard.unlock().unwrap();
            w.join().unwrap();
        });
    });
    assert!(
        got.is_empty(),
        "the waiter was not woken by a message: {got:?}"
    );
    assert!(plain.force_unlock().unwrap());
}

// ---- non-reentrant locks ---------------------------------------------------------------

/// Every acquisition form of the holder fails at once with `AlreadyHeld` (a wait that
/// ran out would be `Ok(None)`), and nothing changes; another thread gets the lock after
/// the one release.
#[test]
fn a_non_reentrant_lock_refuses_its_holder() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client();
    let name = unique("nonreentrant");
    let lock = client.get_non_reentrant_lock(name.clone());
    let guard = lock.lock_with_lease(Duration::from_secs(60)).unwrap();
    let ttl = pttl(&mut raw, &name);
    for refused in [
        lock.lock().map(drop),
        lock.try_lock().map(drop),
        lock.try_lock_for(HANG).map(drop),
        lock.try_lock_with_lease(HANG, Duration::from_millis(5))
            .map(drop),
    ] {
        assert!(
            matches!(refused, Err(Error::AlreadyHeld { .. })),
            "{refused:?}"
        );
    }
    assert_eq!(lock.hold_count().unwrap(), 1, "not counted");
    assert!(pttl(&mut raw, &name) <= ttl, "the lease was not reset");
    assert!(pttl(&mut raw, &name) > 5_000);
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            lock.try_lock_for(HANG)
                .unwrap()
                .map(|g| g.unlock().unwrap())
        });
        crate::support::raw::await_numsub(&mut raw, &lock_channel(&name), 1);
        guard.unlock().unwrap();
        assert!(w.join().unwrap().is_some());
    });
}

/// The non-reentrant fair lock: its holder is refused and not queued; other waiters
/// queue and are served in order.
#[test]
fn a_non_reentrant_fair_lock_refuses_its_holder_without_queueing_it() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client();
    let name = unique("nr-fair");
    let lock = client.get_non_reentrant_fair_lock(name.clone());
    let guard = lock.lock().unwrap();
    assert!(matches!(
        lock.try_lock_for(HANG),
        Err(Error::AlreadyHeld { .. })
    ));
    assert!(matches!(lock.try_lock(), Err(Error::AlreadyHeld { .. })));
    assert!(
        fair_queue(&mut raw, &name).is_empty(),
        "the holder is not queued"
    );
    let order = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for i in 0..2 {
            let (lock, order) = (&lock, &order);
            s.spawn(move || {
                let g = lock.lock().unwrap();
                order.lock().unwrap().push(i);
                g.unlock().unwrap();
            });
            eventually(HANG, "queued", || {
                fair_queue(&mut raw, &name).len() == i + 1
            });
        }
        guard.unlock().unwrap();
    });
    assert_eq!(*order.lock().unwrap(), [0, 1]);
}

// ---- expiry ------------------------------------------------------------------------------

/// The expiry family covers every key of an object: a fair lock's queue and timeouts, a
/// fenced lock's counter, a permit-expirable semaphore's timeout set; the conditions
/// follow Redis's NX/XX/GT/LT; `remain_time_to_live` reads the main key.
#[test]
fn expiry_covers_every_key_of_an_object() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client();
    let ttls = |raw: &mut redis::Connection, keys: &[&str]| -> Vec<i64> {
        keys.iter().map(|k| pttl(raw, k)).collect()
    };
    let long = Duration::from_secs(600);

    // A fair lock with a queued waiter.
    let name = unique("exp-fair");
    let fair = client.get_fair_lock(name.clone());
    let guard = fair.lock_with_lease(Duration::from_secs(60)).unwrap();
    let (queue, timeouts) = (fair_queue_key(&name), fair_timeouts_key(&name));
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            fair.try_lock_for(HANG)
                .unwrap()
                .map(|g| g.unlock().unwrap())
        });
        eventually(HANG, "queued", || {
            fair_queue(&mut server.conn(), &name).len() == 1
        });
        assert!(fair.clear_expire().unwrap());
        assert_eq!(ttls(&mut raw, &[&name, &queue, &timeouts]), [-1, -1, -1]);
        if !crate::support::server().has_7_0_options() {
            // Redis 6.2 has no PEXPIRE conditions: a clear error, and nothing changed.
            match fair.expire_if_not_set(long) {
                Err(redmutex::Error::Config(why)) => assert!(why.contains("7.0"), "{why}"),
                other => panic!("a conditional expiry on 6.2: {other:?}"),
            }
            assert_eq!(ttls(&mut raw, &[&name, &queue, &timeouts]), [-1, -1, -1]);
            assert!(fair.expire(long).unwrap());
            assert!(fair.expire(Duration::from_secs(60)).unwrap());
        } else {
            assert!(!fair.expire_if_set(long).unwrap(), "XX: nothing had a TTL");
            assert!(fair.expire_if_not_set(long).unwrap());
            assert!(
                ttls(&mut raw, &[&name, &queue, &timeouts])
                    .iter()
                    .all(|t| *t > 500_000)
            );
            assert!(!fair.expire_if_greater(Duration::from_secs(60)).unwrap());
            assert!(fair.expire_if_less(Duration::from_secs(60)).unwrap());
        }
        assert!(
            ttls(&mut raw, &[&name, &queue, &timeouts])
                .iter()
                .all(|t| *t <= 60_000)
        );
        let ttl = fair.remain_time_to_live().unwrap().unwrap();
        assert!(ttl <= Duration::from_secs(60), "{ttl:?}");
        guard.unlock().unwrap();
        assert!(w.join().unwrap().is_some(), "the waiter got its turn");
    });

    // A fenced lock's counter.
    let name = unique("exp-fenced");
    let fenced = client.get_fenced_lock(name.clone());
    fenced
        .lock_with_lease(Duration::from_secs(60))
        .unwrap()
        .detach();
    let at = SystemTime::now() + long;
    assert!(fenced.expire_at(at).unwrap());
    let token = fenced_token_key(&name);
    assert!(
        ttls(&mut raw, &[&name, &token])
            .iter()
            .all(|t| *t > 500_000)
    );
    assert!(fenced.clear_expire().unwrap());
    assert_eq!(ttls(&mut raw, &[&name, &token]), [-1, -1]);
    assert_eq!(fenced.remain_time_to_live().unwrap(), Some(Duration::MAX));

    // A permit-expirable semaphore's acquired permits.
    let name = unique("exp-pes");
    let pes = client.get_permit_expirable_semaphore(name.clone());
    pes.try_set_permits(2).unwrap();
    pes.acquire().unwrap();
    let acquired = permit_timeouts_key(&name);
    assert!(pes.expire(long).unwrap());
    assert!(
        ttls(&mut raw, &[&name, &acquired])
            .iter()
            .all(|t| *t > 500_000)
    );
    assert!(pes.clear_expire().unwrap());
    assert_eq!(ttls(&mut raw, &[&name, &acquired]), [-1, -1]);

    // Single-key objects, and an object that does not exist.
    let sem = client.get_semaphore(unique("exp-sem"));
    assert!(!sem.expire(long).unwrap());
    assert_eq!(sem.remain_time_to_live().unwrap(), None);
    sem.try_set_permits(1).unwrap();
    assert!(sem.expire(long).unwrap());
    let latch = client.get_count_down_latch(unique("exp-latch"));
    latch.try_set_count(1).unwrap();
    assert!(latch.expire(long).unwrap());
    assert!(latch.remain_time_to_live().unwrap().unwrap() > Duration::from_secs(500));
    assert!(matches!(
        sem.expire(Duration::ZERO),
        Err(Error::InvalidArgument {
            argument: "ttl",
            ..
        })
    ));
}

// ---- MultiLock ---------------------------------------------------------------------------

/// Members of several kinds on two servers are held together; a second MultiLock that
/// shares one member is refused, and the members it got first are released again.
#[test]
fn a_multi_lock_holds_members_of_any_kind_on_any_server() {
    let (s1, s2) = (TestServer::start(), TestServer::start());
    let (mut raw1, mut raw2) = (s1.conn(), s2.conn());
    let (c1, c2) = (s1.client(), s2.client());
    let (a, b, c) = (unique("m-a"), unique("m-b"), unique("m-c"));
    let multi = c1.get_multi_lock([
        c1.get_lock(a.clone()).into(),
        c2.get_fair_lock(b.clone()).into(),
        c2.get_fenced_lock(c.clone()).into(),
    ]);
    assert_eq!(multi.members().len(), 3);
    let guard = multi.lock().unwrap();
    assert!(multi.is_held_by_current_thread().unwrap());
    assert!(exists(&mut raw1, &a) && exists(&mut raw2, &b) && exists(&mut raw2, &c));
    assert_eq!(get(&mut raw2, &fenced_token_key(&c)), Some(1));

    let (x, y) = (unique("m-x"), unique("m-y"));
    let rival = c2.get_multi_lock([
        c2.get_lock(x.clone()).into(),
        c1.get_lock(a.clone()).into(),
        c2.get_lock(y.clone()).into(),
    ]);
    other_thread(|| {
        assert!(rival.try_lock().unwrap().is_none());
        assert!(
            rival
                .try_lock_for(Duration::from_millis(200))
                .unwrap()
                .is_none()
        );
    });
    assert!(!exists(&mut raw2, &x), "the partial grant was released");
    assert!(!exists(&mut raw2, &y), "never reached");
    guard.unlock().unwrap();
    assert!(!exists(&mut raw1, &a) && !exists(&mut raw2, &b) && !exists(&mut raw2, &c));
    let got = other_thread(|| rival.try_lock().unwrap().map(|g| g.unlock().unwrap()));
    assert!(got.is_some());
}

/// A waiting MultiLock holds the members it has while it waits for the next one, and
/// takes it when it is released.
#[test]
fn a_multi_lock_waits_for_a_busy_member() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client();
    let (a, b) = (unique("mw-a"), unique("mw-b"));
    let busy = client.get_lock(b.clone());
    let blocker = busy.lock().unwrap();
    let multi = client.get_multi_lock([client.get_lock(a.clone()).into(), busy.clone().into()]);
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            multi
                .try_lock_for(HANG)
                .unwrap()
                .map(|g| g.unlock().unwrap())
        });
        crate::support::raw::await_numsub(&mut raw, &lock_channel(&b), 1);
        assert!(
            exists(&mut raw, &a),
            "the first member is held while waiting"
        );
        blocker.unlock().unwrap();
        assert!(w.join().unwrap().is_some());
    });
}

/// With a lease, members wait under a temporary lease of twice the wait and get the
/// caller's lease on success, on their lock key only (a fenced member's counter keeps
/// no TTL).
#[test]
fn a_multi_lock_lease_replaces_the_temporary_one() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client();
    let (a, f) = (unique("ml-a"), unique("ml-f"));
    let multi = client.get_multi_lock([
        client.get_lock(a.clone()).into(),
        AnyLock::from(client.get_fenced_lock(f.clone())),
    ]);
    let guard = multi
        .try_lock_with_lease(Duration::from_secs(100), Duration::from_secs(3))
        .unwrap()
        .unwrap();
    for key in [&a, &f] {
        let ttl = pttl(&mut raw, key);
        assert!((1..=3_000).contains(&ttl), "{key}: {ttl}");
    }
    assert_eq!(pttl(&mut raw, &fenced_token_key(&f)), -1);
    assert!(!guard.is_lost());
    guard.unlock().unwrap();
}

/// Unlock releases every member, even after one fails, and reports each failure.
#[test]
fn a_multi_lock_unlock_releases_all_and_reports_each_failure() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client();
    let (a, b, c) = (unique("mu-a"), unique("mu-b"), unique("mu-c"));
    let multi = client.get_multi_lock([&a, &b, &c].map(|n| client.get_lock(n.clone()).into()));
    let guard = multi.lock().unwrap();
    assert!(client.get_lock(b.clone()).force_unlock().unwrap());
    match guard.unlock() {
        Err(Error::Members(failures)) => {
            assert_eq!(failures.len(), 1, "{failures:?}");
            assert_eq!(failures[0].0, b);
            assert!(matches!(failures[0].1, Error::LockLost { .. }));
        }
        other => panic!("{other:?}"),
    }
    assert!(!exists(&mut raw, &a) && !exists(&mut raw, &c));
}

/// A member whose server is down ends the attempt with its error, after the members
/// granted before it were released.
#[test]
fn a_multi_lock_member_error_releases_the_partial_grant() {
    let s1 = TestServer::start();
    let mut s2 = TestServer::start();
    let mut raw1 = s1.conn();
    let (c1, c2) = (s1.client(), s2.client());
    let a = unique("me-a");
    let multi = c1.get_multi_lock([
        c1.get_lock(a.clone()).into(),
        c2.get_lock(unique("me-b")).into(),
    ]);
    s2.kill();
    let err = multi.try_lock_for(Duration::from_secs(5)).unwrap_err();
    assert!(
        err.is_transient() || matches!(err, Error::Redis(_) | Error::PoolTimeout { .. }),
        "{err:?}"
    );
    assert!(!exists(&mut raw1, &a), "the first member was released");
    assert!(matches!(
        c1.get_multi_lock([]).try_lock(),
        Err(Error::Config(_))
    ));
}
