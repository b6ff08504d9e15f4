//! Bad input and hostile server settings: odd and huge names, ACL refusals, memory
//! limits. Each works or fails with a clear error; nothing panics or hangs.

mod support;

use std::time::{Duration, Instant};

use redmutex::{Error, Loss};
use serial_test::serial;
use support::raw::{await_numsub, exists, lock_channel, numsub};
use support::{TestServer, assert_no_leftovers, unique};

/// Every odd name round-trips lock, reentry, queries and release, and its unlock message
/// goes out on the channel the brace rule names.
#[test]
#[serial]
fn odd_names_work_and_follow_the_brace_rule() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let names = [
        String::new(),
        " ".into(),
        "crlf\r\nname".into(),
        "nul\0name".into(),
        "emoji 🔒🦀".into(),
        "{".into(),
        "}".into(),
        "{}".into(),
        "}{".into(),
        "{tag}rest".into(),
        "rest{tag}".into(),
        "a{b}c{d}".into(),
        "redisson_lock__channel:{other}".into(),
        "redisson_unlock_latch:{other}:0123".into(),
        "x".repeat(1 << 20),
    ];
    {
        let client = server.client();
        for name in &names {
            let channel = if name.contains('{') {
                format!("redisson_lock__channel:{name}")
            } else {
                format!("redisson_lock__channel:{{{name}}}")
            };
            let mut listener = server.conn();
            let mut ps = listener.as_pubsub();
            ps.subscribe(&channel).unwrap();
            ps.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let lock = client.get_lock(name.clone());
            let a = lock.lock().unwrap();
            let b = lock.try_lock().unwrap().expect("reentrant");
            assert_eq!(lock.hold_count().unwrap(), 2);
            assert!(lock.is_locked().unwrap());
            b.unlock().unwrap();
            a.unlock().unwrap();
            let msg = ps.get_message().unwrap();
            assert_eq!(msg.get_channel_name(), channel);
            assert_eq!(msg.get_payload::<String>().unwrap(), "0");
            assert!(!exists(&mut raw, name), "{:?}", &name[..name.len().min(40)]);
        }
        // A waiter on a 1 MiB name still wakes by message.
        let big = client.get_lock("y".repeat(1 << 20));
        let held = big.lock().unwrap();
        std::thread::scope(|s| {
            let other = server.client();
            let w = s.spawn(move || {
                let lock = other.get_lock("y".repeat(1 << 20));
                lock.try_lock_for(Duration::from_secs(20))
                    .unwrap()
                    .map(|g| g.unlock().unwrap())
                    .is_some()
            });
            let channel = format!("redisson_lock__channel:{{{}}}", "y".repeat(1 << 20));
            support::eventually(Duration::from_secs(10), "waiter subscribed", || {
                numsub(&mut raw, &channel) == 1
            });
            held.unlock().unwrap();
            assert!(w.join().unwrap());
        });
    }
    assert_no_leftovers(&mut raw);
}

fn acl(raw: &mut redis::Connection, user: &str, rules: &[&str]) {
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg(user)
        .arg("reset")
        .arg("on")
        .arg(">pw")
        .arg(rules)
        .query(raw)
        .unwrap();
}

fn client_as(server: &TestServer, user: &str, watchdog: Duration) -> redmutex::Client {
    redmutex::Client::new(
        redmutex::Config::builder()
            .address(format!("redis://{user}:pw@127.0.0.1:{}/", server.port()))
            .lock_watchdog_timeout(watchdog)
            .retry_attempts(0)
            .build(),
    )
    .unwrap()
}

/// A `try_lock` by `user` with ACL `rules`: refused with a permission error, which is
/// returned for the test's own checks of what it says.
fn refused_try_lock(
    server: &TestServer,
    raw: &mut redis::Connection,
    user: &str,
    rules: &[&str],
) -> Error {
    acl(raw, user, rules);
    let client = client_as(server, user, Duration::from_secs(30));
    let err = client
        .get_lock(unique("acl"))
        .try_lock()
        .map(|g| g.is_some())
        .unwrap_err();
    assert!(matches!(err, Error::Permission(_)), "{err}");
    err
}

/// A user who may not run scripts: a permission error that names the command.
#[test]
#[serial]
fn a_user_without_eval_gets_a_permission_error() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let rules = ["~*", "&*", "+@all", "-@scripting"];
    let err = refused_try_lock(&server, &mut raw, "noeval", &rules);
    assert!(err.to_string().to_lowercase().contains("evalsha"), "{err}");
    assert_no_leftovers(&mut raw);
}

/// A user whose key pattern does not cover the lock: a permission error about keys.
#[test]
#[serial]
fn a_user_without_the_key_pattern_gets_a_permission_error() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let err = refused_try_lock(&server, &mut raw, "nokeys", &["~other:*", "&*", "+@all"]);
    assert!(err.to_string().contains("key"), "{err}");
    assert_no_leftovers(&mut raw);
}

/// A user without channel rights: the release's PUBLISH is refused after the DEL ran. The
/// error says so; redmutex re-reads the state (the lock is free, nothing is renewed), and
/// a waiter of another client still gets the lock, by the holder's TTL.
#[test]
#[serial]
fn a_refused_publish_is_reported_and_waiters_progress_by_ttl() {
    let server = TestServer::start();
    let mut raw = server.conn();
    acl(&mut raw, "nochan", &["~*", "resetchannels", "+@all"]);
    {
        let holder = client_as(&server, "nochan", Duration::from_millis(1500));
        let waiter = server.client();
        let name = unique("acl");
        let lock = holder.get_lock(name.clone());
        let guard = lock.lock().unwrap();
        std::thread::scope(|s| {
            let w = s.spawn(|| {
                let lock = waiter.get_lock(name.clone());
                let started = Instant::now();
                let got = lock
                    .try_lock_for(Duration::from_secs(20))
                    .unwrap()
                    .map(|g| g.unlock().unwrap());
                (got.is_some(), started.elapsed())
            });
            await_numsub(&mut raw, &lock_channel(&name), 1);
            let err = guard.unlock().unwrap_err();
            assert!(matches!(err, Error::Permission(_)), "{err}");
            assert!(err.to_string().contains("channel"), "{err}");
            assert!(
                !lock.is_locked().unwrap(),
                "the DEL ran before the refused PUBLISH"
            );
            assert_eq!(holder.renewing_count(), 0);
            let (got, waited) = w.join().unwrap();
            assert!(got);
            println!("waiter acquired by TTL after {waited:?} (holder lease 1500 ms)");
        });
    }
    assert_no_leftovers(&mut raw);
}

/// A waiter whose user may not subscribe still acquires, by the holder's TTL.
#[test]
#[serial]
fn a_waiter_that_cannot_subscribe_waits_by_ttl() {
    let server = TestServer::start();
    let mut raw = server.conn();
    acl(&mut raw, "nosub", &["~*", "resetchannels", "+@all"]);
    {
        let holder = server.client_with_watchdog(Duration::from_secs(30));
        let waiter = client_as(&server, "nosub", Duration::from_secs(30));
        let name = unique("acl");
        let lock = holder.get_lock(name.clone());
        let guard = lock.lock_with_lease(Duration::from_millis(800)).unwrap();
        let other = waiter.get_lock(name.clone());
        let got = other.try_lock_for(Duration::from_secs(20)).unwrap();
        assert!(got.is_some());
        drop(got);
        assert!(matches!(guard.unlock(), Err(Error::LockLost { .. })));
    }
    assert_no_leftovers(&mut raw);
}

/// maxmemory with noeviction: acquire and release fail with the OOM error before
/// changing anything; the held lock stays held and frees at its lease.
#[test]
#[serial]
fn out_of_memory_is_an_error_and_changes_nothing() {
    let server = TestServer::start();
    let mut raw = server.conn();
    {
        let client = server.client();
        let lock = client.get_lock(unique("oom"));
        let other = client.get_lock(unique("oom"));
        let guard = lock.lock_with_lease(Duration::from_secs(2)).unwrap();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory-policy")
            .arg("noeviction")
            .query(&mut raw)
            .unwrap();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory")
            .arg(1)
            .query(&mut raw)
            .unwrap();
        let err = other.try_lock().map(|g| g.is_some()).unwrap_err();
        assert!(
            matches!(err, Error::Redis(_)) && err.to_string().contains("OOM"),
            "{err}"
        );
        let err = guard.unlock().unwrap_err();
        assert!(err.to_string().contains("OOM"), "{err}");
        assert!(
            lock.is_locked().unwrap(),
            "a failed release must not free the lock"
        );
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory")
            .arg(0)
            .query(&mut raw)
            .unwrap();
        support::eventually(Duration::from_secs(5), "lease ran out", || {
            !lock.is_locked().unwrap()
        });
    }
    assert_no_leftovers(&mut raw);
}

/// A volatile eviction policy evicts the lock key (it has a TTL): the holder learns it
/// as a lost lock at the next renewal.
#[test]
#[serial]
fn an_evicted_lock_is_reported_lost() {
    let server = TestServer::start();
    let mut raw = server.conn();
    {
        let client = server.client_with_watchdog(Duration::from_secs(1));
        let lock = client.get_lock(unique("evict"));
        let guard = lock.lock().unwrap();
        let signal = guard.loss_signal();
        let info: String = redis::cmd("INFO").arg("memory").query(&mut raw).unwrap();
        let used: u64 = info
            .lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory-policy")
            .arg("volatile-lru")
            .query(&mut raw)
            .unwrap();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory")
            .arg(used.saturating_sub(1))
            .query(&mut raw)
            .unwrap();
        // Any write makes Redis evict volatile keys first; ours is the only one.
        let _ = redis::cmd("SET")
            .arg("filler")
            .arg("x".repeat(4096))
            .query::<()>(&mut raw);
        assert!(
            !exists(&mut raw, lock.name()),
            "the lock key was not evicted"
        );
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory")
            .arg(0)
            .query(&mut raw)
            .unwrap();
        assert_eq!(
            signal.recv_timeout(Duration::from_secs(5)).unwrap(),
            Loss::Lost
        );
        assert!(matches!(guard.unlock(), Err(Error::LockLost { .. })));
    }
    assert_no_leftovers(&mut raw);
}
