//! The fairness policy (`Config::fairness`): a thread that releases an `RLock` and asks
//! again at once lets the waiter its release woke go first, in another client or in its
//! own; with `Fairness::Barging` it takes the lock straight back, as Redisson does.
//!
//! Every bound here is a count of the re-acquiring thread's cycles, never a time. The
//! courtesy windows are long (a minute) so that a slow machine cannot end one before the
//! woken waiter arrives: what is tested is who goes first, not how fast.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::support::raw::{await_numsub, calls};
use crate::support::{TestServer, unique};
use redmutex::{Client, Fairness};

/// A courtesy window no test machine outlasts.
const LONG: Fairness = Fairness::Eventual {
    window: Duration::from_secs(60),
};

/// The most cycles the re-acquiring thread runs; without the policy the waiter usually
/// loses every one of them.
const CYCLES: u64 = 300;

fn client(server: &TestServer, fairness: Fairness) -> Client {
    server.client_with(|b| b.fairness(fairness))
}

/// `holder` (one thread of `holder_client`) holds `name` while `waiter` (a thread of
/// `waiter_client`) starts waiting for it; once the waiter's subscription is confirmed,
/// the holder releases and re-acquires in a loop. Returns how many of those cycles it
/// completed before the waiter got the lock (`CYCLES` when it never did meanwhile).
fn cycles_before_the_waiter_gets_in(
    server: &TestServer,
    holder_client: &Client,
    waiter_client: &Client,
    waiters_on_channel: i64,
) -> u64 {
    let name = unique("fair");
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let mut raw = server.conn();
    let cycles = AtomicU64::new(0);
    let got_in = AtomicBool::new(false);
    let holder_lock = holder_client.get_lock(name.clone());
    let mut guard = holder_lock.lock().unwrap();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let g = waiter_client.get_lock(name.clone()).lock().unwrap();
            // Read under the lock: the holder cannot count another cycle meanwhile.
            let seen = cycles.load(Ordering::SeqCst);
            got_in.store(true, Ordering::SeqCst);
            g.unlock().unwrap();
            seen
        });
        // The waiter's first attempt failed and its channel is subscribed: from here on
        // every release is heard.
        await_numsub(&mut raw, &channel, waiters_on_channel);
        for _ in 0..CYCLES {
            guard.unlock().unwrap();
            guard = holder_lock.lock().unwrap();
            if got_in.load(Ordering::SeqCst) {
                break;
            }
            cycles.fetch_add(1, Ordering::SeqCst);
        }
        guard.unlock().unwrap();
        waiter.join().unwrap()
    })
}

/// Another client waits while one thread releases and re-acquires: the waiter gets the
/// lock within the first releases, because the re-acquire waits for its unlock message.
/// The very first courteous wait subscribes the releaser's client to the channel afresh
/// and tries once that is confirmed, which may still beat the waiter; from then on the
/// subscription is there and the re-acquire waits for the message.
#[test]
fn a_waiting_client_gets_the_lock_from_a_thread_that_asks_again() {
    let server = TestServer::start();
    let (a, b) = (client(&server, LONG), client(&server, LONG));
    let seen = cycles_before_the_waiter_gets_in(&server, &a, &b, 1);
    assert!(
        seen <= 2,
        "the waiter got in only after {seen} re-acquisitions"
    );
}

/// The same within one client: a thread already waiting goes before the releaser.
#[test]
fn a_waiting_thread_goes_before_the_releasing_thread_of_its_own_client() {
    let server = TestServer::start();
    let a = client(&server, LONG);
    let seen = cycles_before_the_waiter_gets_in(&server, &a, &a, 1);
    assert_eq!(
        seen, 0,
        "the waiter got in only after {seen} re-acquisitions"
    );
}

/// A release nobody else heard opens no window: a lone thread's cycles never subscribe.
#[test]
fn an_uncontended_lock_never_holds_back() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let a = client(&server, LONG);
    let lock = a.get_lock(unique("alone"));
    for _ in 0..50 {
        lock.lock().unwrap().unlock().unwrap();
    }
    assert_eq!(calls(&mut raw, "subscribe"), 0);
}

/// A subscriber that hears the unlock messages but never takes the lock (as a Redisson
/// waiter that just gave up, or a tool watching the channel): with `Barging` the
/// releasing thread takes the lock straight back each time, never waiting (its client
/// never subscribes), while the subscriber still hears every release. The wire is the
/// same under either policy.
#[test]
fn barging_takes_the_lock_straight_back() {
    let server = TestServer::start();
    let name = unique("barge");
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let mut raw = server.conn();
    let mut listener = server.conn();
    listener
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut pubsub = listener.as_pubsub();
    pubsub.subscribe(&channel).unwrap();
    await_numsub(&mut raw, &channel, 1);
    let a = client(&server, Fairness::Barging);
    let lock = a.get_lock(name);
    let rounds = 20;
    for _ in 0..rounds {
        lock.lock().unwrap().unlock().unwrap();
    }
    for _ in 0..rounds {
        let msg = pubsub.get_message().unwrap();
        assert_eq!(msg.get_payload::<String>().unwrap(), "0");
    }
    assert_eq!(calls(&mut raw, "subscribe"), 1, "only the listener's own");
}

/// The same silent subscriber under `Eventual`: after each release it heard, the next
/// acquisition holds back as a waiter (its client subscribes the channel), and takes the
/// lock once that subscription is confirmed, as nobody else came for it.
#[test]
fn eventual_holds_back_after_a_release_someone_else_heard() {
    let server = TestServer::start();
    let name = unique("courteous");
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let mut raw = server.conn();
    let mut listener = server.conn();
    let mut pubsub = listener.as_pubsub();
    pubsub.subscribe(&channel).unwrap();
    await_numsub(&mut raw, &channel, 1);
    // A long window: with 20 ms, a loaded machine that paused this thread between the
    // release and the next acquire ended the window before the acquire looked at it.
    // The window costs nothing here: the courteous acquire subscribes afresh and tries
    // as soon as the subscription is confirmed (see `wait::acquire_after_courtesy`).
    let a = client(&server, LONG);
    let lock = a.get_lock(name);
    lock.lock().unwrap().unlock().unwrap();
    assert_eq!(calls(&mut raw, "subscribe"), 1, "the first acquire is free");
    lock.lock().unwrap().unlock().unwrap();
    assert!(
        calls(&mut raw, "subscribe") > 1,
        "the second acquire waited on the channel"
    );
}
