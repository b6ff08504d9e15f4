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

use std::any::Any;
use std::time::Duration;

use crate::support::proxy::FaultProxy;
use crate::support::raw::{fenced_token_key, get, pttl};
use crate::support::{TestServer, await_no_unlock_latches, unique};
use redmutex::{Client, Config, HeldLock, Lock, LockGuard, Result};

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

/// A client through `proxy`, quick to give up on a reply. It keeps no idle connection
/// in reserve: a reserve opened in the background while a reply is to be dropped could
/// have its handshake's reply dropped instead.
fn through(proxy: &FaultProxy) -> Client {
    Client::new(
        Config::builder()
            .address(proxy.url())
            .response_timeout(Duration::from_millis(300))
            .lock_watchdog_timeout(WATCHDOG)
            .pool_min_idle(Some(0))
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
    let taken = contend(LEASE + WATCHDOG + Duration::from_secs(5));
    judged_by_its_own_hold(taken, guard.is_lost(), &format!("{mode:?} {}", lock.name()));
    proxy.pass();
    assert!(guard.unlock().is_err(), "the hold was gone");
}

/// The per-holder check, at the moment a contender got the lock (`taken`, released
/// here): the first holder's field is gone, so its guard must already report the loss
/// (`first_lost`, read after the contender's grant).
fn judged_by_its_own_hold<G>(taken: Option<G>, first_lost: bool, what: &str) {
    assert!(
        taken.is_some(),
        "{what}: the contender never got the lock, though the first hold expires"
    );
    assert!(
        first_lost,
        "{what}: another client holds the lock while its first holder's guard still \
         trusts its hold"
    );
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

fn fair(mode: Mode) {
    case(
        mode,
        |c, n| c.get_fair_lock(n),
        |c, n| contender_of(c.get_fair_lock(n)),
    );
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

fn read(mode: Mode) {
    case(
        mode,
        |c, n| c.get_read_write_lock(n).read_lock().clone(),
        |c, n| contender_of(c.get_read_write_lock(n).write_lock().clone()),
    );
}

fn write(mode: Mode) {
    case(
        mode,
        |c, n| c.get_read_write_lock(n).write_lock().clone(),
        |c, n| contender_of(c.get_read_write_lock(n).write_lock().clone()),
    );
}

/// The two tests of a kind whose case is `$case`: with an explicit lease, and under the
/// watchdog.
macro_rules! both_modes {
    ($($case:ident => $lease:ident, $watchdog:ident;)*) => {$(
        #[test]
        fn $lease() {
            $case(Mode::Lease);
        }

        #[test]
        fn $watchdog() {
            $case(Mode::Watchdog);
        }
    )*};
}

both_modes! {
    plain =>
        an_adopted_rlock_lease_ends_no_later_than_in_redis,
        an_adopted_rlock_watchdog_hold_is_renewed_or_reported_lost;
    fair =>
        an_adopted_fair_lock_lease_ends_no_later_than_in_redis,
        an_adopted_fair_lock_watchdog_hold_is_renewed_or_reported_lost;
    fenced =>
        an_adopted_fenced_lock_lease_ends_no_later_than_in_redis,
        an_adopted_fenced_lock_watchdog_hold_is_renewed_or_reported_lost;
    read =>
        an_adopted_read_lease_ends_no_later_than_in_redis,
        an_adopted_read_watchdog_hold_is_renewed_or_reported_lost;
    write =>
        an_adopted_write_lease_ends_no_later_than_in_redis,
        an_adopted_write_watchdog_hold_is_renewed_or_reported_lost;
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
        .unwrap();
    judged_by_its_own_hold(writer, guard.is_lost(), &format!("read {name}"));
    assert!(guard.unlock().is_err(), "the read hold was gone");
}

/// The token lock draws one token per call and keeps it for every attempt of that call,
/// so the only hold its lost-reply check can find is the one this call's request took:
/// an older call's hold carries another token. A request whose reply was lost (dropped,
/// or its connection closed and the transport sent it again) is dated from its own send,
/// which is before Redis set the TTL, so the guard never trusts past the key's expiry.
#[test]
fn a_token_lock_grant_whose_reply_was_lost_is_dated_from_its_own_send() {
    let server = TestServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = through(&proxy);
    let other = server.client();
    let mut raw = server.conn();
    for close in [false, true] {
        let name = unique("adopted-token");
        let lock = client.get_token_lock(name.clone());
        lock.try_lock_with_lease(Duration::ZERO, LEASE)
            .unwrap()
            .unwrap()
            .unlock()
            .unwrap();
        if close {
            proxy.close_at_next_reply();
        } else {
            proxy.drop_next_reply();
        }
        let guard = lock
            .try_lock_with_lease(Duration::ZERO, LEASE)
            .unwrap()
            .expect("the SET ran, so the lock is held");
        assert!(proxy.closed_at_reply() && proxy.reply_dropped());
        let held: Option<String> = redis::cmd("GET").arg(lock.key()).query(&mut raw).unwrap();
        assert_eq!(held.as_deref(), Some(guard.token()));
        let taken = other
            .get_token_lock(name.clone())
            .try_lock_for(LEASE + Duration::from_secs(5))
            .unwrap();
        let what = format!("token lock {name} (connection closed: {close})");
        judged_by_its_own_hold(taken, guard.is_lost(), &what);
        assert!(guard.unlock().is_err(), "the hold was gone");
    }
}

/// A MultiLock whose member acquire timed out takes back the hold that acquire may have
/// taken. Here it never ran (its request is held at the proxy and thrown away), and the
/// thread holds that member already through a guard of its own: taking back "one hold"
/// regardless would release the guard's hold while the guard still trusts it. The take
/// back only releases a hold Redis shows beyond the ones this client counts.
#[test]
fn a_timed_out_member_acquire_takes_back_no_hold_it_did_not_take() {
    let server = TestServer::start();
    let proxy = FaultProxy::start(server.port());
    // No idle reserve: the take-back needs a new connection, an event the test can see
    // at the proxy.
    let client = through(&proxy);
    let other = server.client();
    let name = unique("multi-taken-back");
    let lock = client.get_lock(name.clone());
    let multi = client.get_multi_lock([lock.clone().into()]);
    // Scripts loaded first.
    multi.try_lock().unwrap().unwrap().unlock().unwrap();
    let mut raw = server.conn();
    await_no_unlock_latches(&mut raw);
    let outer = lock.lock_with_lease(Duration::from_secs(60)).unwrap();

    let before = proxy.connections();
    proxy.freeze();
    let taken = std::thread::scope(|s| {
        s.spawn(|| {
            // The acquire timed out and the take-back opened a connection: throw away
            // every byte held at the proxy (the acquire among them), then let the rest
            // through.
            crate::support::eventually(Duration::from_secs(10), "the take-back", || {
                proxy.connections() > before
            });
            proxy.reset();
            proxy.resume();
        });
        multi.try_lock().unwrap()
    });
    assert!(taken.is_none(), "the member acquire timed out");
    assert_eq!(
        lock.hold_count().unwrap(),
        1,
        "the outer guard's hold is left"
    );
    if let Some(g) = other.get_lock(name.clone()).try_lock().unwrap() {
        assert!(
            outer.is_lost(),
            "another client holds {name} while the outer guard still trusts its hold"
        );
        drop(g);
    }

    // The same timeout when the acquire did run (its reply dropped): its hold, and only
    // that one, is taken back.
    proxy.drop_next_reply();
    assert!(multi.try_lock().unwrap().is_none(), "the reply was lost");
    assert!(proxy.reply_dropped());
    assert_eq!(
        lock.hold_count().unwrap(),
        1,
        "the outer guard's hold is left"
    );
    assert!(other.get_lock(name.clone()).try_lock().unwrap().is_none());
    outer.unlock().unwrap();
}

/// A RedLock member whose acquire timed out is released after the round, in case it
/// granted. Here it never ran, and the thread holds that member already (a reentrant
/// RedLock): releasing "one hold" regardless would take the outer guard's hold of it.
#[test]
fn a_redlock_member_that_timed_out_loses_no_hold_it_did_not_grant() {
    let servers: Vec<TestServer> = (0..3).map(|_| TestServer::start()).collect();
    let proxy = FaultProxy::start(servers[0].port());
    let first = through(&proxy);
    let rest: Vec<Client> = servers[1..].iter().map(TestServer::client).collect();
    let name = unique("red-taken-back");
    let red = first.get_red_lock(
        std::iter::once(&first)
            .chain(&rest)
            .map(|c| c.get_lock(name.clone())),
    );
    let mut raws: Vec<redis::Connection> = servers.iter().map(TestServer::conn).collect();
    let lease = Duration::from_secs(60);
    red.try_lock_with_lease(Duration::ZERO, lease)
        .unwrap()
        .unwrap()
        .unlock()
        .unwrap();
    for raw in &mut raws {
        await_no_unlock_latches(raw);
    }
    let outer = red
        .try_lock_with_lease(Duration::ZERO, lease)
        .unwrap()
        .unwrap();
    assert_eq!(outer.granted(), 3);

    let before = proxy.connections();
    proxy.freeze();
    let inner = std::thread::scope(|s| {
        s.spawn(|| {
            // The first member's acquire timed out and the client opened a connection
            // to look at it: the acquire held at the proxy is thrown away.
            crate::support::eventually(Duration::from_secs(10), "a new connection", || {
                proxy.connections() > before
            });
            proxy.reset();
            proxy.resume();
        });
        red.try_lock_with_lease(Duration::ZERO, lease).unwrap()
    });
    let inner = inner.expect("the two other members granted");
    assert_eq!(inner.granted(), 2);
    let fields = crate::support::raw::hgetall(&mut raws[0], &name);
    assert_eq!(
        fields.values().map(String::as_str).collect::<Vec<_>>(),
        ["1"],
        "the outer guard's hold of the first member is left"
    );
    let contender = servers[0].client();
    assert!(
        contender
            .get_lock(name.clone())
            .try_lock()
            .unwrap()
            .is_none()
    );
    inner.unlock().unwrap();
    outer.unlock().unwrap();
}
