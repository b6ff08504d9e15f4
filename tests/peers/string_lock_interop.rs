//! redmutex's string-token lock against the real peers on the same keys of real
//! `redis-server`s: go-redsync v4 over go-redis v9 (`tests/interop/go`) and redis-py's
//! `Lock` (`tests/interop/python`), both built from their registries on first use.
//!
//! Needs the `interop` feature, `redis-server`, a `go` (Go 1.25, fetched by older ones) and
//! python3 3.10+ on PATH (`scripts/setup.sh` installs them). No assertion depends on
//! timing: a waiter is shown to be waiting by the attempts Redis counts, expiry is
//! brought forward with PEXPIRE, and a wait that must end by a release is shorter than
//! the holder's TTL.

use redmutex_harness::peer;
use redmutex_harness::token_peer;

use std::time::Duration;

use crate::support::raw::{calls, pttl};
use crate::support::{Holder, TestServer, eventually, unique};
use peer::{Peer, Pending};
use redmutex::{Client, Error, ExtendMode, TokenFormat, TokenLockOptions};
use token_peer::{redis_py, redsync};

const HANG: Duration = Duration::from_secs(60);
/// What a waiter may wait when only a release (not the TTL) can end its wait.
const BELOW_TTL: Duration = Duration::from_secs(30);

fn get(raw: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(raw).unwrap()
}

fn cmd(raw: &mut redis::Connection, args: &[&str]) {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    let _: redis::Value = c.query(raw).unwrap();
}

fn err_class(reply: String) -> String {
    reply.split(' ').next().unwrap_or_default().to_owned()
}

/// Acquire attempts Redis has counted: the peers send SET, redmutex an EVALSHA.
fn attempts(raw: &mut redis::Connection) -> u64 {
    calls(raw, "set") + calls(raw, "evalsha")
}

/// Waits until a peer's `pending` acquire is provably waiting: Redis counted two more
/// attempts (a first one and a retry), and no reply came.
fn await_peer_waiting(raw: &mut redis::Connection, pending: &Pending) {
    let before = attempts(raw);
    eventually(HANG, "the peer retries", || attempts(raw) >= before + 2);
    assert_eq!(
        pending.try_wait(Duration::ZERO),
        None,
        "answered while held"
    );
}

/// Runs `wait` (a redmutex acquire) on a thread while the key is held; once Redis has
/// counted two attempts by it, runs `release`; returns what `wait` got.
fn while_waiting<T: Send>(
    raw: &mut redis::Connection,
    wait: impl FnOnce() -> T + Send,
    release: impl FnOnce(&mut redis::Connection),
) -> T {
    std::thread::scope(|s| {
        let before = attempts(raw);
        let waiter = s.spawn(wait);
        eventually(HANG, "the redmutex waiter retries", || {
            attempts(raw) >= before + 2
        });
        assert!(!waiter.is_finished(), "answered while held");
        release(raw);
        waiter.join().unwrap()
    })
}

fn is_redsync_shaped(v: &str) -> bool {
    v.len() == 24
        && v.ends_with("==")
        && v[..22]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

// --------------------------------------------------------------------- scenarios

#[test]
fn go_python_and_rust_workers_keep_an_exact_counter() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let go = redsync(&[server.url()]);
    let py = redis_py(&server.url());
    let key = unique("tokx:counter");
    let counter = unique("tokx:counter:n");
    const N: u64 = 25;
    let mut pending = Vec::new();
    for w in ["g1", "g2"] {
        pending.push(go.send(
            w,
            &format!("section {key} 10000 {counter} {N} pause=2 delay=10"),
        ));
    }
    for w in ["p1", "p2"] {
        pending.push(py.send(
            w,
            &format!("section {key} 10000 {counter} {N} pause=2 sleep=10"),
        ));
    }
    let client = server.client();
    let opts = TokenLockOptions::new()
        .retry_delay(Some((Duration::from_millis(5), Duration::from_millis(20))));
    std::thread::scope(|s| {
        for _ in 0..2 {
            let lock = client
                .get_token_lock_with(key.clone(), opts.clone())
                .unwrap();
            let mut conn = server.conn();
            let counter = counter.clone();
            s.spawn(move || {
                for _ in 0..N {
                    let guard = lock.lock_with_lease(Duration::from_secs(10)).unwrap();
                    let n: Option<u64> = redis::cmd("GET").arg(&counter).query(&mut conn).unwrap();
                    cmd(
                        &mut conn,
                        &["SET", &counter, &(n.unwrap_or(0) + 1).to_string()],
                    );
                    guard.unlock().unwrap();
                    std::thread::sleep(Duration::from_millis(2));
                }
            });
        }
    });
    for p in pending {
        assert_eq!(p.wait(Duration::from_secs(300)), Ok(N.to_string()));
    }
    assert_eq!(get(&mut raw, &counter), Some((6 * N).to_string()));
    assert_eq!(get(&mut raw, &key), None);
    go.quit();
    py.quit();
}

#[test]
fn each_sides_hold_is_seen_as_held_by_the_others() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let go = redsync(&[server.url()]);
    let py = redis_py(&server.url());
    let client = server.client();
    let key = unique("tokx:seen");
    let lock = client.get_token_lock(key.clone());

    // Rust holds: neither peer gets it; redis-py sees it locked, by someone else.
    let guard = lock.lock_with_lease(Duration::from_secs(30)).unwrap();
    assert!(is_redsync_shaped(guard.token()), "{}", guard.token());
    assert!(!go.bool("g", &format!("trylock {key} 30000")));
    assert!(!py.bool("p", &format!("trylock {key} 30000")));
    assert!(py.bool("p", &format!("locked {key}")));
    assert!(!py.bool("p", &format!("owned {key}")));
    assert_eq!(get(&mut raw, &key).as_deref(), Some(guard.token()));
    guard.unlock().unwrap();

    // Go holds: Rust sees the value and cannot take the key.
    assert!(go.bool("g", &format!("trylock {key} 30000")));
    let value = go.ok("g", &format!("value {key}"));
    assert!(lock.is_locked().unwrap());
    assert_eq!(lock.holder_token().unwrap(), Some(value.clone()));
    assert!(lock.try_lock().unwrap().is_none());
    assert_eq!(get(&mut raw, &key), Some(value));
    go.ok("g", &format!("unlock {key}"));

    // Python holds: the same.
    assert!(py.bool("p", &format!("trylock {key} 30000")));
    let token = py.ok("p", &format!("token {key}"));
    assert_eq!(lock.holder_token().unwrap(), Some(token.clone()));
    assert!(lock.try_lock().unwrap().is_none());
    py.ok("p", &format!("unlock {key}"));
    assert!(!lock.is_locked().unwrap());

    // redis-py's token shape, when a Python service expects it.
    let shaped = client
        .get_token_lock_with(
            key.clone(),
            TokenLockOptions::new().token_format(TokenFormat::UuidHex),
        )
        .unwrap();
    let guard = shaped.lock_with_lease(Duration::from_secs(30)).unwrap();
    assert_eq!(guard.token().len(), token.len());
    assert!(!py.bool("p", &format!("trylock {key} 30000")));
    drop(guard);
    go.quit();
    py.quit();
}

#[test]
fn a_release_by_one_side_lets_another_acquire() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let go = redsync(&[server.url()]);
    let py = redis_py(&server.url());
    let client = server.client();
    let key = unique("tokx:handover");
    let lock = client.get_token_lock(key.clone());
    // Every hold lives 60 s: each wait below ends by the release or not at all.

    // Rust → Go.
    let guard = lock.lock_with_lease(Duration::from_secs(60)).unwrap();
    let waiting = go.send("g", &format!("lock {key} 60000 tries=100000 delay=20"));
    await_peer_waiting(&mut raw, &waiting);
    guard.unlock().unwrap();
    assert_eq!(waiting.wait(BELOW_TTL), Ok("true".into()));

    // Go → Rust.
    let got = while_waiting(
        &mut raw,
        || {
            lock.try_lock_for(BELOW_TTL)
                .unwrap()
                .map(|g| g.token().to_owned())
        },
        |_| {
            go.ok("g", &format!("unlock {key}"));
        },
    );
    let rust_token = got.expect("the Rust waiter did not get the key Go released");
    // The guard was dropped on the waiter's thread: the key is free again.
    assert_eq!(get(&mut raw, &key), None);
    assert!(!rust_token.is_empty());

    // Rust → Python.
    let guard = lock.lock_with_lease(Duration::from_secs(60)).unwrap();
    let waiting = py.send("p", &format!("lock {key} 60000 sleep=20"));
    await_peer_waiting(&mut raw, &waiting);
    guard.unlock().unwrap();
    assert_eq!(waiting.wait(BELOW_TTL), Ok("true".into()));

    // Python → Rust.
    let got = while_waiting(
        &mut raw,
        || lock.try_lock_for(BELOW_TTL).unwrap().is_some(),
        |_| {
            py.ok("p", &format!("unlock {key}"));
        },
    );
    assert!(got, "the Rust waiter did not get the key Python released");
    go.quit();
    py.quit();
}

#[test]
fn extend_semantics_agree_with_each_peer() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let go = redsync(&[server.url()]);
    let py = redis_py(&server.url());
    let client = server.client();
    let lease = Duration::from_secs(60);

    // Replace, as redsync's Extend: both TTLs go back to the full 60 s from 10 s.
    let (rk, gk) = (unique("tokx:ext:r"), unique("tokx:ext:g"));
    let r = client
        .get_token_lock(rk.clone())
        .lock_with_lease(lease)
        .unwrap();
    assert!(go.bool("g", &format!("trylock {gk} 60000")));
    for k in [&rk, &gk] {
        cmd(&mut raw, &["PEXPIRE", k, "10000"]);
    }
    r.extend(lease).unwrap();
    go.ok("g", &format!("extend {gk}"));
    for k in [&rk, &gk] {
        let t = pttl(&mut raw, k);
        assert!(t > 50_000 && t <= 60_000, "{k}: {t}");
    }

    // Add, as redis-py's extend: 10 s left plus 20 s, on both.
    let add = TokenLockOptions::new().extend_mode(ExtendMode::Add);
    let (rk, pk) = (unique("tokx:ext:ra"), unique("tokx:ext:p"));
    let r = client
        .get_token_lock_with(rk.clone(), add)
        .unwrap()
        .lock_with_lease(lease)
        .unwrap();
    assert!(py.bool("p", &format!("trylock {pk} 60000")));
    for k in [&rk, &pk] {
        cmd(&mut raw, &["PEXPIRE", k, "10000"]);
    }
    r.extend(Duration::from_secs(20)).unwrap();
    py.ok("p", &format!("extend {pk} 20000"));
    for k in [&rk, &pk] {
        let t = pttl(&mut raw, k);
        assert!(t > 20_000 && t <= 30_000, "{k}: {t}");
    }
    // A key made persistent: both refuse to add to it, and leave it as it is.
    for k in [&rk, &pk] {
        cmd(&mut raw, &["PERSIST", k]);
    }
    assert!(matches!(
        r.extend(Duration::from_secs(1)),
        Err(Error::Config(_))
    ));
    assert_eq!(
        err_class(py.err("p", &format!("extend {pk} 1000"))),
        "LockNotOwnedError"
    );
    for k in [&rk, &pk] {
        assert_eq!(pttl(&mut raw, k), -1, "{k}");
    }

    // Replace with a shorter time, as redis-py's extend(replace_ttl=True).
    let (rk, pk) = (unique("tokx:ext:rr"), unique("tokx:ext:pr"));
    let r2 = client
        .get_token_lock(rk.clone())
        .lock_with_lease(lease)
        .unwrap();
    assert!(py.bool("q", &format!("trylock {pk} 60000")));
    r2.extend(Duration::from_secs(5)).unwrap();
    py.ok("q", &format!("extend {pk} 5000 replace"));
    for k in [&rk, &pk] {
        let t = pttl(&mut raw, k);
        assert!(t > 0 && t <= 5_000, "{k}: {t}");
    }
    drop((r, r2));
    go.quit();
    py.quit();
}

#[test]
fn a_killed_holder_is_taken_over_at_its_ttl_and_not_before() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client();
    let url = server.url();

    // A Rust holder process dies; Go, then Python, wait for its key to expire.
    for peer in ["go", "py"] {
        let key = unique("tokx:kill:rust");
        let holder = Holder::spawn(&[
            "--url",
            &url,
            "--lock",
            &key,
            "--kind",
            "token",
            "--lease-ms",
            "60000",
        ]);
        let token = holder.expect("held").trim_start_matches("held ").to_owned();
        assert_eq!(get(&mut raw, &key).as_deref(), Some(token.as_str()));
        holder.signal("KILL");
        let p: Peer = if peer == "go" {
            redsync(std::slice::from_ref(&url))
        } else {
            redis_py(&url)
        };
        let waiting = if peer == "go" {
            p.send("w", &format!("lock {key} 60000 tries=100000 delay=20"))
        } else {
            p.send("w", &format!("lock {key} 60000 sleep=20"))
        };
        // Not before: the key still holds the dead holder's token while the peer retries.
        await_peer_waiting(&mut raw, &waiting);
        assert_eq!(get(&mut raw, &key).as_deref(), Some(token.as_str()));
        // At the TTL (brought forward): the peer takes over.
        cmd(&mut raw, &["PEXPIRE", &key, "200"]);
        assert_eq!(waiting.wait(HANG), Ok("true".into()), "{peer}");
        assert_ne!(get(&mut raw, &key).as_deref(), Some(token.as_str()));
        p.kill();
        drop(holder);
    }

    // A Go holder, then a Python holder, dies; a Rust waiter takes over.
    for peer in ["go", "py"] {
        let key = unique("tokx:kill:peer");
        let p: Peer = if peer == "go" {
            redsync(std::slice::from_ref(&url))
        } else {
            redis_py(&url)
        };
        assert!(p.bool("h", &format!("trylock {key} 60000")));
        let dead = get(&mut raw, &key).unwrap();
        p.kill();
        let lock = client.get_token_lock(key.clone());
        let got = while_waiting(
            &mut raw,
            || {
                lock.try_lock_for(HANG)
                    .unwrap()
                    .map(|g| g.token().to_owned())
            },
            |raw| {
                // Not before: still the dead holder's token.
                assert_eq!(get(raw, &key).as_deref(), Some(dead.as_str()));
                cmd(raw, &["PEXPIRE", &key, "200"]);
            },
        );
        let mine = got.unwrap_or_else(|| panic!("no takeover from {peer}"));
        assert_ne!(mine, dead);
    }
}

#[test]
fn redsync_quorum_and_ours_on_the_same_servers_never_hold_at_once() {
    let servers: Vec<TestServer> = (0..5).map(|_| TestServer::start()).collect();
    let urls: Vec<String> = servers.iter().map(TestServer::url).collect();
    let clients: Vec<Client> = servers.iter().map(TestServer::client).collect();
    let go = redsync(&urls);
    let key = unique("tokx:q");
    let counter = unique("tokx:q:n");
    let quick = TokenLockOptions::new()
        .retry_delay(Some((Duration::from_millis(5), Duration::from_millis(20))));
    let lock = Client::get_quorum_token_lock_with(&clients, key.clone(), quick).unwrap();

    // Each side's quorum hold is seen by the other.
    let held = lock.lock_with_lease(Duration::from_secs(30)).unwrap();
    assert!(!go.bool("g", &format!("trylock {key} 30000")));
    drop(held);
    assert!(go.bool("g", &format!("trylock {key} 30000")));
    std::thread::scope(|s| {
        s.spawn(|| {
            assert!(
                lock.try_lock_with_lease(Duration::ZERO, Duration::from_secs(30))
                    .unwrap()
                    .is_none()
            );
        });
    });
    go.ok("g", &format!("unlock {key}"));

    // Both sides increment one counter (on the first server) under their quorum locks.
    const N: u64 = 20;
    let mut pending = Vec::new();
    for w in ["g1", "g2"] {
        pending.push(go.send(
            w,
            &format!("section {key} 10000 {counter} {N} pause=2 delay=10"),
        ));
    }
    std::thread::scope(|s| {
        for _ in 0..2 {
            let lock = lock.clone();
            let mut conn = servers[0].conn();
            let counter = counter.clone();
            s.spawn(move || {
                for _ in 0..N {
                    let g = lock.lock_with_lease(Duration::from_secs(10)).unwrap();
                    let n: Option<u64> = redis::cmd("GET").arg(&counter).query(&mut conn).unwrap();
                    cmd(
                        &mut conn,
                        &["SET", &counter, &(n.unwrap_or(0) + 1).to_string()],
                    );
                    assert!(!g.is_lost(), "the hold ran out inside the critical section");
                    g.unlock().unwrap();
                    std::thread::sleep(Duration::from_millis(2));
                }
            });
        }
    });
    for p in pending {
        assert_eq!(p.wait(Duration::from_secs(300)), Ok(N.to_string()));
    }
    assert_eq!(
        get(&mut servers[0].conn(), &counter),
        Some((4 * N).to_string())
    );
    for s in &servers {
        assert_eq!(get(&mut s.conn(), &key), None);
    }
    go.quit();
}
