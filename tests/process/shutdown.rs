//! Shutdown: threads are joined, later calls fail with `Shutdown`, waiters are released.

use std::time::Duration;

use crate::support::raw::{await_numsub, lock_channel};
use crate::support::{TestServer, thread_names, unique};
use redmutex::Error;
use serial_test::serial;

fn redmutex_threads() -> usize {
    thread_names()
        .iter()
        .filter(|n| n.starts_with("redmutex-"))
        .count()
}

/// Waits for the thread count to settle at `n`: a joined thread can stay listed in /proc
/// for a moment while the kernel reaps it.
fn settles_at(n: usize) {
    crate::support::eventually(
        Duration::from_secs(5),
        &format!("{n} redmutex threads"),
        || redmutex_threads() == n,
    );
}

// Serial: these count the process's threads, which other tests' clients would change.
#[test]
#[serial]
fn shutdown_joins_the_threads_and_fails_later_calls() {
    let server = TestServer::start();
    settles_at(0);
    let client = server.client();
    let lock = client.get_lock(unique("sd"));
    lock.lock().unwrap().unlock().unwrap();
    // A new thread names itself once it runs, so this too may take a moment.
    settles_at(2);
    client.shutdown();
    settles_at(0);
    assert!(client.is_shut_down());
    assert!(matches!(lock.lock(), Err(Error::Shutdown)));
    assert!(matches!(lock.try_lock(), Err(Error::Shutdown)));
    assert!(matches!(lock.is_locked(), Err(Error::Shutdown)));
    client.shutdown(); // twice is fine
}

#[test]
#[serial]
fn dropping_the_last_clone_joins_the_threads() {
    let server = TestServer::start();
    settles_at(0);
    let client = server.client();
    let clone = client.clone();
    drop(client);
    settles_at(2);
    drop(clone);
    settles_at(0);
}

/// A thread blocked in lock() returns Shutdown when its client shuts down.
#[test]
#[serial]
fn a_waiter_is_released_by_shutdown() {
    let server = TestServer::start();
    let holder = server.client();
    let waiter = server.client();
    let name = unique("sd");
    let held = holder.get_lock(name.clone());
    let _guard = held.lock().unwrap();
    std::thread::scope(|s| {
        let w = s.spawn(|| waiter.get_lock(name.clone()).lock().map(|_| ()));
        let mut raw = server.conn();
        await_numsub(&mut raw, &lock_channel(&name), 1);
        waiter.shutdown();
        let result = w.join().unwrap();
        assert!(matches!(result, Err(Error::Shutdown)), "{result:?}");
    });
}

#[test]
#[serial]
fn a_wrong_address_or_password_fails_at_connect() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("s3cret")
        .query(&mut raw)
        .unwrap();
    let bad = redmutex::Client::open(&format!("redis://:wrong@127.0.0.1:{}/", server.port()))
        .unwrap_err();
    assert!(!bad.to_string().contains("wrong@"), "{bad}");
    let good =
        redmutex::Client::open(&format!("redis://:s3cret@127.0.0.1:{}/", server.port())).unwrap();
    assert!(!format!("{good:?}").contains("s3cret"));
    good.get_lock(unique("sd"))
        .lock()
        .unwrap()
        .unlock()
        .unwrap();
    let refused = redmutex::Client::new(
        redmutex::Config::builder()
            .address("redis://127.0.0.1:1/")
            .connection_timeout(Duration::from_millis(500))
            .build(),
    )
    .unwrap_err();
    assert!(matches!(refused, Error::Connect { .. }), "{refused}");
    let nonsense = redmutex::Client::open("not a url").unwrap_err();
    assert!(matches!(nonsense, Error::Config(_)), "{nonsense}");
}
