//! The string-token peers against each other and against raw Redis: real go-redsync
//! (`tests/interop/go`) and real redis-py (`tests/interop/python`) locks on the same keys
//! of real `redis-server`s, before any Rust string lock exists. What these tests pin down
//! is what a redmutex string lock has to interoperate with.
//!
//! Needs the `interop` feature, `redis-server`, a `go` (Go 1.25, fetched by older ones) and
//! python3 3.10+ on PATH (`scripts/setup.sh` installs them); the peers are built on
//! first use (module proxy, PyPI). No assertion depends on timing: a waiter is shown to be
//! waiting by the SET NX attempts Redis counts, expiry is brought forward with PEXPIRE,
//! and TTL checks only tell apart results that differ by many seconds.

use redmutex_harness::peer;
use redmutex_harness::token_peer;

use std::time::Duration;

use crate::support::raw::calls;
use crate::support::{TestServer, eventually, unique};
use peer::{Peer, Pending};
use token_peer::{json_number, redis_py, redsync};

const HANG: Duration = Duration::from_secs(60);

fn get(conn: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(conn).unwrap()
}

fn pttl(conn: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(conn).unwrap()
}

fn raw(conn: &mut redis::Connection, args: &[&str]) {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let _: redis::Value = cmd.query(conn).unwrap();
}

/// Waits until `pending` is provably waiting on a held key: Redis has counted at least
/// two more SET calls than `before` (a first attempt and a retry), and no reply has come.
/// Only the waiting peer sends SET meanwhile.
fn await_retrying(raw: &mut redis::Connection, before: u64, pending: &Pending) {
    eventually(HANG, "the waiter retries SET NX", || {
        calls(raw, "set") >= before + 2
    });
    assert_eq!(
        pending.try_wait(Duration::ZERO),
        None,
        "the waiter got an answer while the key was held"
    );
}

fn is_redsync_value(v: &str) -> bool {
    // 16 random bytes, standard base64 with padding.
    v.len() == 24
        && v.ends_with("==")
        && v[..22]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

fn is_redis_py_token(t: &str) -> bool {
    // uuid1().hex: 32 lowercase hex digits, version nibble 1.
    t.len() == 32 && t.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) && &t[12..13] == "1"
}

fn err_class(reply: String) -> String {
    reply.split(' ').next().unwrap_or_default().to_owned()
}

// ------------------------------------------------------------------------------ scenarios

#[test]
fn go_and_python_exclude_each_other_and_hand_the_key_over() {
    let server = TestServer::start();
    let mut conn = server.conn();
    let go = redsync(&[server.url()]);
    let py = redis_py(&server.url());
    assert!(
        go.client_id().starts_with("redsync@v4."),
        "{}",
        go.client_id()
    );
    assert!(
        py.client_id().starts_with("redis-py@"),
        "{}",
        py.client_id()
    );
    let key = unique("str:excl");

    assert!(go.bool("g", &format!("trylock {key} 30000")));
    let go_value = go.ok("g", &format!("value {key}"));
    assert!(is_redsync_value(&go_value), "{go_value:?}");
    assert_eq!(get(&mut conn, &key).as_deref(), Some(go_value.as_str()));
    assert!(!py.bool("p", &format!("trylock {key} 30000")));
    assert_eq!(py.ok("p", &format!("token {key}")), "null");

    // Python waits (polling every 20 ms) until Go releases.
    let before = calls(&mut conn, "set");
    let waiting = py.send("p", &format!("lock {key} 30000 sleep=20"));
    await_retrying(&mut conn, before, &waiting);
    go.ok("g", &format!("unlock {key}"));
    assert_eq!(waiting.wait(HANG), Ok("true".into()));
    let token = py.ok("p", &format!("token {key}"));
    assert!(is_redis_py_token(&token), "{token:?}");
    assert_eq!(get(&mut conn, &key).as_deref(), Some(token.as_str()));
    assert!(py.bool("p", &format!("owned {key}")));

    // And the other way round, with redsync's own retry policy (32 tries, 50-250 ms).
    assert!(!go.bool("g", &format!("trylock {key} 30000")));
    let before = calls(&mut conn, "set");
    let waiting = go.send("g", &format!("lock {key} 30000"));
    await_retrying(&mut conn, before, &waiting);
    py.ok("p", &format!("unlock {key}"));
    assert_eq!(waiting.wait(HANG), Ok("true".into()));
    let second = go.ok("g", &format!("value {key}"));
    assert_ne!(second, go_value, "redsync draws a new value per acquire");
    assert_eq!(get(&mut conn, &key).as_deref(), Some(second.as_str()));
    assert!(!py.bool("p", &format!("owned {key}")));

    go.ok("g", &format!("unlock {key}"));
    assert_eq!(get(&mut conn, &key), None);
    go.quit();
    py.quit();
}

#[test]
fn neither_peer_is_reentrant_and_each_worker_is_its_own_owner() {
    let server = TestServer::start();
    let mut conn = server.conn();
    let go = redsync(&[server.url()]);
    let py = redis_py(&server.url());
    let (gk, pk) = (unique("str:re:go"), unique("str:re:py"));

    assert!(go.bool("a", &format!("trylock {gk} 30000")));
    let v = go.ok("a", &format!("value {gk}"));
    // The holder meets its own key; its value is kept.
    assert!(!go.bool("a", &format!("trylock {gk} 30000")));
    assert_eq!(go.ok("a", &format!("value {gk}")), v);
    assert!(!go.bool("b", &format!("trylock {gk} 30000")));
    assert_eq!(get(&mut conn, &gk).as_deref(), Some(v.as_str()));

    assert!(py.bool("a", &format!("trylock {pk} 30000")));
    let t = py.ok("a", &format!("token {pk}"));
    assert!(!py.bool("a", &format!("trylock {pk} 30000")));
    assert_eq!(py.ok("a", &format!("token {pk}")), t);
    // A blocking acquire with a blocking timeout gives up.
    assert!(!py.bool(
        "b",
        &format!("lock {pk} 30000 blocking_timeout=200 sleep=20")
    ));
    assert_eq!(get(&mut conn, &pk).as_deref(), Some(t.as_str()));
    // redsync's Lock gives up after its tries.
    assert!(!go.bool("b", &format!("lock {pk} 30000 tries=3 delay=10")));
    go.quit();
    py.quit();
}

#[test]
fn a_release_or_extend_with_a_foreign_value_changes_nothing() {
    let server = TestServer::start();
    let mut conn = server.conn();
    let go = redsync(&[server.url()]);
    let py = redis_py(&server.url());

    // redis-py: the key was re-taken by someone else (no TTL, so any PEXPIRE would show).
    let k = unique("str:foreign:py");
    assert!(py.bool("p", &format!("trylock {k} 30000")));
    raw(&mut conn, &["SET", &k, "foreign"]);
    assert!(!py.bool("p", &format!("owned {k}")));
    for cmd in [format!("extend {k} 5000"), format!("reacquire {k}")] {
        assert_eq!(err_class(py.err("p", &cmd)), "LockNotOwnedError", "{cmd}");
    }
    assert_eq!(
        err_class(py.err("p", &format!("unlock {k}"))),
        "LockNotOwnedError"
    );
    assert_eq!(get(&mut conn, &k).as_deref(), Some("foreign"));
    assert_eq!(pttl(&mut conn, &k), -1);
    // release() forgets the token before it runs the script, even when that fails.
    assert_eq!(py.ok("p", &format!("token {k}")), "null");
    assert_eq!(err_class(py.err("p", &format!("unlock {k}"))), "LockError");

    // redsync: the same, and a release of a missing key is its own error.
    let k = unique("str:foreign:go");
    assert!(go.bool("g", &format!("trylock {k} 30000")));
    raw(&mut conn, &["SET", &k, "foreign"]);
    assert!(!go.bool("g", &format!("valid {k}")));
    assert_eq!(err_class(go.err("g", &format!("extend {k}"))), "ErrTaken");
    assert_eq!(err_class(go.err("g", &format!("unlock {k}"))), "ErrTaken");
    assert_eq!(get(&mut conn, &k).as_deref(), Some("foreign"));
    assert_eq!(pttl(&mut conn, &k), -1);
    raw(&mut conn, &["DEL", &k]);
    assert_eq!(
        err_class(go.err("g", &format!("unlock {k}"))),
        "ErrLockAlreadyExpired"
    );
    // Extend of a vanished key: refused, unless WithSetNXOnExtend re-creates it.
    assert_eq!(err_class(go.err("g", &format!("extend {k}"))), "ErrTaken");
    assert_eq!(get(&mut conn, &k), None);
    let k = unique("str:setnx:go");
    assert!(go.bool("g", &format!("trylock {k} 30000 setnx")));
    let v = go.ok("g", &format!("value {k}"));
    raw(&mut conn, &["DEL", &k]);
    go.ok("g", &format!("extend {k}"));
    assert_eq!(get(&mut conn, &k).as_deref(), Some(v.as_str()));
    assert!(pttl(&mut conn, &k) > 0);
    go.quit();
    py.quit();
}

#[test]
fn extend_semantics_differ_between_the_peers() {
    let server = TestServer::start();
    let mut conn = server.conn();
    let go = redsync(&[server.url()]);
    let py = redis_py(&server.url());

    // redsync's Extend resets the TTL to the mutex's full expiry.
    let k = unique("str:ext:go");
    assert!(go.bool("g", &format!("trylock {k} 60000")));
    raw(&mut conn, &["PEXPIRE", &k, "10000"]);
    go.ok("g", &format!("extend {k}"));
    let t = pttl(&mut conn, &k);
    assert!(t > 10_000 && t <= 60_000, "redsync extend: PTTL {t}");
    let until = go.num("g", &format!("until {k}"));
    assert!(until > 0 && until <= 60_000, "until {until}");

    // redis-py's extend adds to the remaining PTTL ...
    let k = unique("str:ext:py");
    assert!(py.bool("p", &format!("trylock {k} 60000")));
    raw(&mut conn, &["PEXPIRE", &k, "10000"]);
    py.ok("p", &format!("extend {k} 20000"));
    let t = pttl(&mut conn, &k);
    assert!(t > 20_000 && t <= 30_000, "redis-py extend (add): PTTL {t}");
    // ... or replaces it ...
    py.ok("p", &format!("extend {k} 5000 replace"));
    let t = pttl(&mut conn, &k);
    assert!(t > 0 && t <= 5_000, "redis-py extend (replace): PTTL {t}");
    // ... and reacquire resets it to the lock's timeout.
    py.ok("p", &format!("reacquire {k}"));
    let t = pttl(&mut conn, &k);
    assert!(t > 30_000 && t <= 60_000, "redis-py reacquire: PTTL {t}");
    // A held key without a TTL: extend refuses (its script needs PTTL >= 0) although the
    // token matches; reacquire does not check and sets one.
    raw(&mut conn, &["PERSIST", &k]);
    assert_eq!(
        err_class(py.err("p", &format!("extend {k} 1000"))),
        "LockNotOwnedError"
    );
    assert!(py.bool("p", &format!("owned {k}")));
    assert_eq!(pttl(&mut conn, &k), -1);
    py.ok("p", &format!("reacquire {k}"));
    let t = pttl(&mut conn, &k);
    assert!(
        t > 0 && t <= 60_000,
        "redis-py reacquire after PERSIST: PTTL {t}"
    );

    // A redis-py lock without a timeout has no TTL and cannot be extended.
    let k = unique("str:ext:none");
    assert!(py.bool("p", &format!("trylock {k} 0")));
    assert_eq!(pttl(&mut conn, &k), -1);
    let e = py.err("p", &format!("extend {k} 1000"));
    assert!(
        e.starts_with("LockError") && e.contains("no timeout"),
        "{e}"
    );
    go.quit();
    py.quit();
}

/// Reads MONITOR lines until one contains `marker`.
fn monitored(mon: &mut redis::Connection, marker: &str) -> Vec<String> {
    let mut lines = Vec::new();
    loop {
        let line = match mon.recv_response().unwrap() {
            redis::Value::SimpleString(s) => s,
            redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
            other => panic!("unexpected MONITOR reply {other:?}"),
        };
        if line.contains(marker) {
            return lines;
        }
        lines.push(line);
    }
}

/// The MONITOR lines whose command is `cmd` (case-insensitive) on `key`, from "cmd" on.
fn commands_on<'a>(lines: &'a [String], cmd: &str, key: &str) -> Vec<&'a str> {
    let needle = format!("\"{}\" \"{key}\"", cmd.to_lowercase());
    lines
        .iter()
        .filter_map(|l| {
            let i = l.to_lowercase().find(&needle)?;
            Some(&l[i..])
        })
        .collect()
}

#[test]
fn wire_commands_of_both_peers() {
    let server = TestServer::start();
    let mut conn = server.conn();
    let mut mon = server.conn();
    raw(&mut mon, &["MONITOR"]);
    let go = redsync(&[server.url()]);
    let py = redis_py(&server.url());
    let (g8, g15, p15, p0) = (
        unique("str:wire:g8"),
        unique("str:wire:g15"),
        unique("str:wire:p15"),
        unique("str:wire:p0"),
    );
    assert!(go.bool("g", &format!("trylock {g8} 8000")));
    assert!(go.bool("g", &format!("trylock {g15} 1500")));
    go.ok("g", &format!("extend {g8}"));
    go.ok("g", &format!("unlock {g8}"));
    assert!(py.bool("p", &format!("trylock {p15} 1500")));
    assert!(py.bool("p", &format!("trylock {p0} 0")));
    py.ok("p", &format!("extend {p15} 1000"));
    py.ok("p", &format!("unlock {p15}"));
    let marker = unique("marker");
    raw(&mut conn, &["ECHO", &marker]);
    let lines = monitored(&mut mon, &marker);
    let gv8 = go.ok("g", &format!("value {g8}"));
    let gv15 = go.ok("g", &format!("value {g15}"));
    let pt0 = py.ok("p", &format!("token {p0}"));

    // go-redis sends whole seconds as EX, anything else as PX; NX comes last.
    assert_eq!(
        commands_on(&lines, "set", &g8),
        [format!("\"set\" \"{g8}\" \"{gv8}\" \"ex\" \"8\" \"nx\"")]
    );
    assert_eq!(
        commands_on(&lines, "set", &g15),
        [format!(
            "\"set\" \"{g15}\" \"{gv15}\" \"px\" \"1500\" \"nx\""
        )]
    );
    // Extend passes the full expiry in ms; release passes the value only.
    let sha: Vec<&String> = lines
        .iter()
        .filter(|l| l.to_lowercase().contains("\"evalsha\""))
        .collect();
    let touch = format!("\"1\" \"{g8}\" \"{gv8}\" \"8000\"");
    let delete = format!("\"1\" \"{g8}\" \"{gv8}\"");
    assert!(
        sha.iter()
            .any(|l| l.contains("d75bb8b5bd13532ddedd17762e772346e39b321e") && l.ends_with(&touch)),
        "{lines:#?}"
    );
    assert!(
        sha.iter()
            .any(|l| l.contains("e950836ed1e694540c503ef9972b8de518044d3b") && l.ends_with(&delete)),
        "{lines:#?}"
    );
    // redis-py: NX then PX in ms, and no PX at all without a timeout; extend passes the
    // added ms and "0" (add) as ARGV[2], ARGV[3].
    let p15_sets = commands_on(&lines, "set", &p15);
    assert_eq!(p15_sets.len(), 1, "{lines:#?}");
    assert!(
        p15_sets[0].ends_with("\"NX\" \"PX\" \"1500\""),
        "{}",
        p15_sets[0]
    );
    assert_eq!(
        commands_on(&lines, "set", &p0),
        [format!("\"SET\" \"{p0}\" \"{pt0}\" \"NX\"")]
    );
    assert!(
        lines.iter().any(|l| l.contains("\"EVALSHA\"")
            && l.contains(&p15)
            && l.ends_with("\"1000\" \"0\"")),
        "{lines:#?}"
    );
    go.quit();
    py.quit();
}

#[test]
fn go_and_python_workers_keep_an_exact_counter() {
    let server = TestServer::start();
    let mut conn = server.conn();
    let go = redsync(&[server.url()]);
    let py = redis_py(&server.url());
    let key = unique("str:counter:lock");
    let counter = unique("str:counter:value");
    const N: i64 = 25;

    // A short pause after each release lets the pollers in; the sections themselves are
    // a non-atomic GET then SET that only the lock protects.
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
    for p in pending {
        assert_eq!(p.wait(Duration::from_secs(300)), Ok(N.to_string()));
    }
    assert_eq!(get(&mut conn, &counter), Some((4 * N).to_string()));
    assert_eq!(get(&mut conn, &key), None);
    go.quit();
    py.quit();
}

#[test]
fn a_killed_holder_keeps_the_key_until_it_expires() {
    let server = TestServer::start();
    let mut conn = server.conn();
    let go = redsync(&[server.url()]);

    // Python holds and dies: nothing releases its key.
    let k = unique("str:kill:py");
    let py = redis_py(&server.url());
    assert!(py.bool("p", &format!("trylock {k} 60000")));
    let token = py.ok("p", &format!("token {k}"));
    py.kill();
    assert!(!go.bool("g", &format!("trylock {k} 60000")));
    assert_eq!(get(&mut conn, &k).as_deref(), Some(token.as_str()));
    // Bring the expiry forward; the polling waiter takes the key once it is gone.
    let before = calls(&mut conn, "set");
    let waiting = go.send("g", &format!("lock {k} 60000 tries=100000 delay=20"));
    await_retrying(&mut conn, before, &waiting);
    raw(&mut conn, &["PEXPIRE", &k, "200"]);
    assert_eq!(waiting.wait(HANG), Ok("true".into()));
    let v = go.ok("g", &format!("value {k}"));
    assert_eq!(get(&mut conn, &k).as_deref(), Some(v.as_str()));

    // Go holds and dies: the same for a Python waiter.
    let py = redis_py(&server.url());
    go.kill();
    assert!(!py.bool("p", &format!("trylock {k} 60000")));
    let before = calls(&mut conn, "set");
    let waiting = py.send("p", &format!("lock {k} 60000 sleep=20"));
    await_retrying(&mut conn, before, &waiting);
    raw(&mut conn, &["PEXPIRE", &k, "200"]);
    assert_eq!(waiting.wait(HANG), Ok("true".into()));
    let t = py.ok("p", &format!("token {k}"));
    assert_eq!(get(&mut conn, &k).as_deref(), Some(t.as_str()));
    py.quit();
}

fn values(servers: &[TestServer], key: &str) -> Vec<Option<String>> {
    servers.iter().map(|s| get(&mut s.conn(), key)).collect()
}

#[test]
fn redsync_quorum_over_five_servers() {
    let mut servers: Vec<TestServer> = (0..5).map(|_| TestServer::start()).collect();
    let urls: Vec<String> = servers.iter().map(TestServer::url).collect();
    let a = redsync(&urls);
    let b = redsync(&urls);
    let q = unique("str:q");

    assert!(a.bool("a", &format!("trylock {q} 30000")));
    let va = a.ok("a", &format!("value {q}"));
    assert_eq!(values(&servers, &q), vec![Some(va.clone()); 5]);
    assert!(!b.bool("b", &format!("trylock {q} 30000")));
    assert_eq!(values(&servers, &q), vec![Some(va.clone()); 5]);
    assert!(!b.bool("b", &format!("valid {q}")));
    assert!(a.bool("a", &format!("valid {q}")));

    // Two members held by someone else: 3 of 5 is a quorum.
    let r = unique("str:q:r");
    for s in &servers[..2] {
        raw(&mut s.conn(), &["SET", &r, "foreign"]);
    }
    assert!(a.bool("a", &format!("trylock {r} 30000")));
    let vr = a.ok("a", &format!("value {r}"));
    let f = Some("foreign".to_owned());
    let mine = Some(vr.clone());
    assert_eq!(
        values(&servers, &r),
        [f.clone(), f.clone(), mine.clone(), mine.clone(), mine]
    );
    a.ok("a", &format!("unlock {r}"));
    assert_eq!(
        values(&servers, &r),
        [f.clone(), f.clone(), None, None, None]
    );

    // Three held by someone else: refused, and the two grants it did get are released.
    let s3 = unique("str:q:s");
    for s in &servers[..3] {
        raw(&mut s.conn(), &["SET", &s3, "foreign"]);
    }
    assert!(!a.bool("a", &format!("trylock {s3} 30000")));
    assert_eq!(
        values(&servers, &s3),
        [f.clone(), f.clone(), f.clone(), None, None]
    );

    // A minority down: the holder still extends and releases, the other still acquires.
    servers[3].kill();
    servers[4].kill();
    assert!(!b.bool("b", &format!("trylock {q} 30000")));
    a.ok("a", &format!("extend {q}"));
    a.ok("a", &format!("unlock {q}"));
    assert!(b.bool("b", &format!("trylock {q} 30000")));
    let vb = b.ok("b", &format!("value {q}"));
    assert_eq!(values(&servers[..3], &q), vec![Some(vb); 3]);

    // A majority down: no quorum either way, and the error says a node failed.
    servers[2].kill();
    assert_eq!(err_class(b.err("b", &format!("extend {q}"))), "RedisError");
    assert_eq!(
        err_class(a.err("a", &format!("trylock {} 30000", unique("str:q:t")))),
        "RedisError"
    );
    assert_eq!(err_class(b.err("b", &format!("unlock {q}"))), "RedisError");
    a.quit();
    b.quit();
}

fn check_bench(peer: &Peer, name: &str) {
    let json = peer.ok("bench", &format!("bench {name}:u 8000 50 warmup=5"));
    assert_eq!(json_number(&json, "cycles"), Some(50.0), "{json}");
    for k in ["mean_ns", "p50_ns", "p99_ns", "min_ns"] {
        assert!(
            json_number(&json, k).is_some_and(|v| v > 0.0),
            "{k}: {json}"
        );
    }
    let json = peer.ok("bench", &format!("handoff {name}:h 8000 2 300"));
    assert_eq!(json_number(&json, "threads"), Some(2.0), "{json}");
    assert!(json_number(&json, "ops").is_some_and(|v| v > 0.0), "{json}");
    for k in ["handoff_samples", "takeover_samples"] {
        assert!(json_number(&json, k).is_some(), "{k}: {json}");
    }
    eprintln!("{} bench: {json}", peer.version());
}

#[test]
fn bench_commands_report_figures() {
    let server = TestServer::start();
    let go = redsync(&[server.url()]);
    let py = redis_py(&server.url());
    check_bench(&go, &unique("str:bench:go"));
    check_bench(&py, &unique("str:bench:py"));
    go.quit();
    py.quit();
}

#[test]
fn bad_commands_get_error_replies() {
    let server = TestServer::start();
    for peer in [redsync(&[server.url()]), redis_py(&server.url())] {
        let e = peer.err("t", "frobnicate x");
        assert!(
            e.starts_with("IllegalArgumentException unknown command"),
            "{e}"
        );
        let e = peer.err("t", "trylock k notanumber");
        assert!(e.starts_with("NumberFormatException"), "{e}");
        let e = peer.err("t", "unlock never-locked");
        assert!(e.starts_with("IllegalArgumentException"), "{e}");
        let e = peer.err("t", "trylock");
        assert!(e.starts_with("IllegalArgumentException usage"), "{e}");
        peer.quit();
    }
}
