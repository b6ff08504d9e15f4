//! Acquires whose reply was lost, for every lock kind that can find such an acquire's
//! hold again and take it for its caller ("adopt" it): the adopted hold must never be
//! trusted past the moment Redis expires it.
//!
//! The scenario, through the fault proxy: an acquire runs in Redis but its reply is
//! dropped, so the caller sees a timeout and the thread has a hold nobody knows of, its
//! lease counted from when that acquire ran. Later the same thread acquires again on a
//! pooled connection that died meanwhile (the proxy reset every connection): the request
//! reads EOF, and the lock asks Redis whether it ran. Redis shows one hold more than the
//! thread counts, so the call returns it: the old hold. Its guard must date its lease no
//! later than Redis does. Each test then lets another client take the lock as soon as
//! Redis lets it, and judges the first holder by its own hold: by the time its field is
//! gone, its guard must already report the loss.

mod support;

use std::any::Any;
use std::time::Duration;

use redmutex::{Client, Config, HeldLock, Lock, LockGuard, Result};
use support::proxy::FaultProxy;
use support::raw::{fenced_token_key, get, pttl};
use support::{TestServer, await_no_unlock_latches, unique};

/// The explicit lease of the lease cases.
const LEASE: Duration = Duration::from_secs(3);
/// The watchdog timeout of the watchdog cases (renewed every third of it).
const WATCHDOG: Duration = Duration::from_secs(4);

/// How the holder acquires: with an explicit lease, or under the watchdog.
#[derive(Clone, Copy, Debug)]
enum Mode {
    Lease,
    Watchdog,
}

impl Mode {
    fn acquire<K: HeldLock>(self, lock: &Lock<K>) -> Result<LockGuard<K>> {
        match self {
            Self::Lease => lock.lock_with_lease(LEASE),
            Self::Watchdog => lock.lock(),
        }
    }

    /// How long the lost acquire's hold goes unknown before the thread asks again: long
    /// enough that Redis's expiry of it falls well before a lease counted from the new
    /// request would end, short enough that the hold is still there when it asks. (Time
    /// passing is the fault here; nothing is awaited.)
    fn gap(self) -> Duration {
        match self {
            Self::Lease => Duration::from_millis(1500),
            Self::Watchdog => Duration::from_millis(2500),
        }
    }
}

/// A client through `proxy`, quick to give up on a reply.
fn through(proxy: &FaultProxy) -> Client {
    Client::new(
        Config::builder()
            .address(proxy.url())
            .response_timeout(Duration::from_millis(300))
            .lock_watchdog_timeout(WATCHDOG)
            .build(),
    )
    .unwrap()
}

/// A contender: waits at most the given time for the lock, and returns its guard.
type Contender<'a> = Box<dyn Fn(Duration) -> Option<Box<dyn Any>> + 'a>;

/// Runs the scenario on `lock` (a client through `proxy`), with `contend` on another
/// client, and asserts per-holder truth. `key` is the Redis key whose TTL is the hold's.
fn adopted_hold_is_never_trusted_past_its_expiry<K: HeldLock>(
    server: &TestServer,
    proxy: &FaultProxy,
    lock: &Lock<K>,
    mode: Mode,
    contend: Contender<'_>,
    inspect: impl FnOnce(&LockGuard<K>, &mut redis::Connection),
) {
    let mut raw = server.conn();
    // Scripts loaded and the first release's latch deleted first, so that the dropped
    // reply is the acquire's.
    mode.acquire(lock).unwrap().unlock().unwrap();
    await_no_unlock_latches(&mut raw);

    proxy.drop_next_reply();
    let err = mode.acquire(lock).map(drop).unwrap_err();
    assert!(proxy.reply_dropped());
    assert!(err.is_transient(), "{err}");
    assert_eq!(lock.hold_count().unwrap(), 1, "the lost acquire ran");

    std::thread::sleep(mode.gap());
    // One live connection back in the pool, then every connection killed: the next
    // request goes out on a dead one and reads EOF.
    lock.is_locked().unwrap();
    proxy.reset();
    let guard = mode.acquire(lock).unwrap();
    assert_eq!(
        lock.hold_count().unwrap(),
        1,
        "the old hold, adopted, not doubled"
    );
    if matches!(mode, Mode::Lease) {
        // The TTL is the old acquire's, so the adopted hold is the old one.
        let left = pttl(&mut raw, lock.name());
        assert!(
            left > 0 && u128::try_from(left).unwrap() < (LEASE - mode.gap() / 2).as_millis(),
            "PTTL {left} ms"
        );
    } else {
        // Renewed as the acquire would have renewed it: the old acquire's TTL is long
        // gone.
        let left = pttl(&mut raw, lock.name());
        assert!(
            u128::try_from(left).unwrap() > (WATCHDOG - mode.gap() / 2).as_millis(),
            "PTTL {left} ms"
        );
        // Renewals from now on fail, so the hold lives as long as its last renewal.
        proxy.blackhole();
    }
    inspect(&guard, &mut raw);

    // The contender gets the lock the moment Redis lets it: when the first holder's
    // field is gone. The first guard must know by then.
    let taken = contend(LEASE + WATCHDOG + Duration::from_secs(5))
        .expect("the contender got the lock once the first hold expired");
    assert!(
        guard.is_lost(),
        "{mode:?}: another client holds {} while its first holder's guard still trusts \
         its hold",
        lock.name()
    );
    drop(taken);
    proxy.pass();
    assert!(guard.unlock().is_err(), "the hold was gone");
}

/// One case: a fresh server and proxy, the holder's lock from `holder`, the contender's
/// from `contender`, both on the same name.
fn case<K: HeldLock>(
    mode: Mode,
    holder: impl Fn(&Client, String) -> Lock<K>,
    contender: impl for<'c> Fn(&'c Client, String) -> Contender<'c>,
) {
    case_inspected(mode, holder, contender, |_, _| {});
}

/// [`case`], with `inspect` looking at the adopted guard and the server.
fn case_inspected<K: HeldLock>(
    mode: Mode,
    holder: impl Fn(&Client, String) -> Lock<K>,
    contender: impl for<'c> Fn(&'c Client, String) -> Contender<'c>,
    inspect: impl FnOnce(&LockGuard<K>, &mut redis::Connection),
) {
    let server = TestServer::start();
    let proxy = FaultProxy::start(server.port());
    let name = unique("adopted");
    let client = through(&proxy);
    let other = server.client();
    let lock = holder(&client, name.clone());
    adopted_hold_is_never_trusted_past_its_expiry(
        &server,
        &proxy,
        &lock,
        mode,
        contender(&other, name),
        inspect,
    );
}

/// A contender that takes `lock` with `try_lock_for`.
fn contender_of<K: HeldLock>(lock: Lock<K>) -> Contender<'static> {
    Box::new(move |wait| {
        lock.try_lock_for(wait)
            .unwrap()
            .map(|g| Box::new(g) as Box<dyn Any>)
    })
}

fn plain(mode: Mode) {
    case(
        mode,
        |c, n| c.get_lock(n),
        |c, n| contender_of(c.get_lock(n)),
    );
}

#[test]
fn an_adopted_rlock_lease_ends_no_later_than_in_redis() {
    plain(Mode::Lease);
}

#[test]
fn an_adopted_rlock_watchdog_hold_is_renewed_or_reported_lost() {
    plain(Mode::Watchdog);
}

fn fair(mode: Mode) {
    case(
        mode,
        |c, n| c.get_fair_lock(n),
        |c, n| contender_of(c.get_fair_lock(n)),
    );
}

#[test]
fn an_adopted_fair_lock_lease_ends_no_later_than_in_redis() {
    fair(Mode::Lease);
}

#[test]
fn an_adopted_fair_lock_watchdog_hold_is_renewed_or_reported_lost() {
    fair(Mode::Watchdog);
}

fn fenced(mode: Mode) {
    case_inspected(
        mode,
        |c, n| c.get_fenced_lock(n),
        |c, n| contender_of(c.get_fenced_lock(n)),
        |guard, raw| {
            // The adopted grant carries the token its acquire drew: the newest.
            let counter = get(raw, &fenced_token_key(guard.lock().name()));
            assert_eq!(counter, Some(i64::try_from(guard.token()).unwrap()));
        },
    );
}

#[test]
fn an_adopted_fenced_lock_lease_ends_no_later_than_in_redis() {
    fenced(Mode::Lease);
}

#[test]
fn an_adopted_fenced_lock_watchdog_hold_is_renewed_or_reported_lost() {
    fenced(Mode::Watchdog);
}

fn read(mode: Mode) {
    case(
        mode,
        |c, n| c.get_read_write_lock(n).read_lock().clone(),
        |c, n| contender_of(c.get_read_write_lock(n).write_lock().clone()),
    );
}

#[test]
fn an_adopted_read_lease_ends_no_later_than_in_redis() {
    read(Mode::Lease);
}

#[test]
fn an_adopted_read_watchdog_hold_is_renewed_or_reported_lost() {
    read(Mode::Watchdog);
}

fn write(mode: Mode) {
    case(
        mode,
        |c, n| c.get_read_write_lock(n).write_lock().clone(),
        |c, n| contender_of(c.get_read_write_lock(n).write_lock().clone()),
    );
}

#[test]
fn an_adopted_write_lease_ends_no_later_than_in_redis() {
    write(Mode::Lease);
}

#[test]
fn an_adopted_write_watchdog_hold_is_renewed_or_reported_lost() {
    write(Mode::Watchdog);
}

/// A read hold lives in the hash and in its own timeout key, and a release by another
/// reader cuts the hash's TTL to the longest timeout key left. An adopted read hold is
/// trusted no longer than its own timeout key, even while another reader keeps the hash
/// alive for longer.
#[test]
fn an_adopted_read_lease_ends_with_its_own_timeout_key() {
    let server = TestServer::start();
    let proxy = FaultProxy::start(server.port());
    let name = unique("adopted-read");
    let client = through(&proxy);
    let other = server.client();
    let mut raw = server.conn();
    let read = client.get_read_write_lock(name.clone()).read_lock().clone();
    read.lock_with_lease(LEASE).unwrap().unlock().unwrap();
    await_no_unlock_latches(&mut raw);
    let theirs = other.get_read_write_lock(name.clone());
    // Under the other client's watchdog (30 s): the hash lives far beyond LEASE.
    let reader = theirs.read_lock().lock().unwrap();

    proxy.drop_next_reply();
    let err = read.lock_with_lease(LEASE).map(drop).unwrap_err();
    assert!(proxy.reply_dropped());
    assert!(err.is_transient(), "{err}");
    std::thread::sleep(Mode::Lease.gap());
    read.is_locked().unwrap();
    proxy.reset();
    let guard = read.lock_with_lease(LEASE).unwrap();
    assert_eq!(read.hold_count().unwrap(), 1, "the old hold, adopted");
    assert!(pttl(&mut raw, &name) > i64::try_from(LEASE.as_millis()).unwrap());

    // Now only the adopted hold's timeout key keeps the hash.
    reader.unlock().unwrap();
    let writer = theirs
        .write_lock()
        .try_lock_for(LEASE + Duration::from_secs(5))
        .unwrap()
        .expect("the writer got the lock once the adopted read expired");
    assert!(
        guard.is_lost(),
        "a writer holds {name} while an adopted read guard still trusts its hold"
    );
    writer.unlock().unwrap();
    assert!(guard.unlock().is_err(), "the read hold was gone");
}
