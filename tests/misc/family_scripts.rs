//! The Lua scripts of the lock family's newer kinds (fenced, spin and non-reentrant locks,
//! the fenced write, the expiry family, range-checked semaphore counts), run directly
//! against a real server: each test calls one script, with the `lua/lib/` rules it is
//! sent with, and reads the keys back with raw commands, so the scripts' contracts are
//! pinned below the library that calls them.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::support::raw::calls;
use crate::support::{TestServer, tap, unique};
use redis::{Connection, RedisError, Script, Value};

const OWNER_A: &str = "5b3c1f9e-0d47-4a5e-9a51-6f1d2a7c8e01:1";
const OWNER_B: &str = "5b3c1f9e-0d47-4a5e-9a51-6f1d2a7c8e01:2";
const NON_REENTRANT: &str = "NON_REENTRANT_REACQUIRE";

fn script(src: &'static str) -> Script {
    Script::new(src)
}

fn acquire() -> Script {
    script(include_str!("../../lua/lock/acquire.lua"))
}
fn fenced_acquire() -> Script {
    script(include_str!("../../lua/fenced/fenced_acquire.lua"))
}
fn fenced_write() -> Script {
    script(include_str!("../../lua/fenced/fenced_write.lua"))
}
/// release.lua as src/protocol/hash.rs sends it, after lib/latch.lua.
fn release() -> Script {
    script(concat!(
        include_str!("../../lua/lib/latch.lua"),
        include_str!("../../lua/lock/release.lua")
    ))
}
/// fair_acquire.lua as src/lock/fair.rs sends it, after lib/fair_queue.lua.
fn fair_acquire() -> Script {
    script(concat!(
        include_str!("../../lua/lib/fair_queue.lua"),
        include_str!("../../lua/fair/fair_acquire.lua")
    ))
}
fn expire_keys() -> Script {
    script(include_str!("../../lua/expiry/expire_keys.lua"))
}
fn semaphore_release() -> Script {
    script(include_str!("../../lua/semaphore/semaphore_release.lua"))
}
fn semaphore_add() -> Script {
    script(include_str!("../../lua/semaphore/semaphore_add.lua"))
}
fn permit_add() -> Script {
    script(include_str!("../../lua/permit/permit_add.lua"))
}

fn token_key(name: &str) -> String {
    format!("redisson_lock_token:{{{name}}}")
}
fn queue_key(name: &str) -> String {
    format!("redisson_lock_queue:{{{name}}}")
}
fn timeout_key(name: &str) -> String {
    format!("redisson_lock_timeout:{{{name}}}")
}
fn latch_key(name: &str, request: &str) -> String {
    format!("redisson_unlock_latch:{{{name}}}:{request}")
}
fn sc_channel(name: &str) -> String {
    format!("redisson_sc:{{{name}}}")
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn pttl(raw: &mut Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(raw).unwrap()
}
fn hget(raw: &mut Connection, key: &str, field: &str) -> Option<i64> {
    redis::cmd("HGET").arg(key).arg(field).query(raw).unwrap()
}
fn get(raw: &mut Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(raw).unwrap()
}
fn exists(raw: &mut Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query(raw).unwrap()
}
fn lrange(raw: &mut Connection, key: &str) -> Vec<String> {
    redis::cmd("LRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .query(raw)
        .unwrap()
}
fn zrange(raw: &mut Connection, key: &str) -> Vec<String> {
    redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .query(raw)
        .unwrap()
}

/// The error code of a script's error reply.
fn code(err: &RedisError) -> String {
    err.code().unwrap_or_default().to_owned()
}

/// Every script here in the house style of `lua/`: its contract names KEYS, ARGV and
/// what it returns.
#[test]
fn every_family_script_documents_its_contract() {
    for src in [
        include_str!("../../lua/fenced/fenced_acquire.lua"),
        include_str!("../../lua/fenced/fenced_write.lua"),
        include_str!("../../lua/lock/acquire.lua"),
        include_str!("../../lua/lock/release.lua"),
        include_str!("../../lua/fair/fair_acquire.lua"),
        include_str!("../../lua/expiry/expire_keys.lua"),
        include_str!("../../lua/semaphore/semaphore_release.lua"),
        include_str!("../../lua/semaphore/semaphore_add.lua"),
        include_str!("../../lua/permit/permit_add.lua"),
    ] {
        assert!(
            src.starts_with("-- ")
                && src.contains("KEYS[")
                && src.contains("ARGV[")
                && src.contains("Returns"),
            "{src}"
        );
    }
}

// ---- fenced_acquire.lua -------------------------------------------------------------

fn fenced(raw: &mut Connection, name: &str, lease: u64, owner: &str) -> (i64, i64) {
    fenced_acquire()
        .key(name)
        .key(token_key(name))
        .arg(lease)
        .arg(owner)
        .invoke(raw)
        .unwrap()
}

#[test]
fn fenced_acquire_draws_a_token_on_every_grant_including_reentry() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let name = unique("fenced");

    assert_eq!(fenced(&mut raw, &name, 30_000, OWNER_A), (1, 1));
    assert_eq!(hget(&mut raw, &name, OWNER_A), Some(1));
    assert!((29_000..=30_000).contains(&pttl(&mut raw, &name)));
    assert_eq!(get(&mut raw, &token_key(&name)).as_deref(), Some("1"));
    assert_eq!(
        pttl(&mut raw, &token_key(&name)),
        -1,
        "the counter has no TTL"
    );

    // Re-entry: the hold count and the token both move; the TTL is reset, not added.
    assert_eq!(fenced(&mut raw, &name, 10_000, OWNER_A), (1, 2));
    assert_eq!(hget(&mut raw, &name, OWNER_A), Some(2));
    assert!(pttl(&mut raw, &name) <= 10_000);

    // Another owner is refused with the PTTL, and the token does not move.
    let (flag, ttl) = fenced(&mut raw, &name, 30_000, OWNER_B);
    assert_eq!(flag, 0);
    assert!((1..=10_000).contains(&ttl), "{ttl}");
    assert_eq!(get(&mut raw, &token_key(&name)).as_deref(), Some("2"));
    assert_eq!(hget(&mut raw, &name, OWNER_B), None);

    // After a release (here: the key is gone) the next holder gets the next token.
    let _: () = redis::cmd("DEL").arg(&name).query(&mut raw).unwrap();
    assert_eq!(fenced(&mut raw, &name, 30_000, OWNER_B), (1, 3));
}

#[test]
fn fenced_acquire_tells_a_foreign_hold_without_ttl_from_a_grant() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let name = unique("fenced-nottl");
    let _: () = redis::cmd("HSET")
        .arg(&name)
        .arg(OWNER_B)
        .arg(1)
        .query(&mut raw)
        .unwrap();
    // Redisson's own script answers {-1, -1} here, which its client reads as a grant.
    assert_eq!(fenced(&mut raw, &name, 30_000, OWNER_A), (0, -1));
    assert!(!exists(&mut raw, &token_key(&name)));
}

#[test]
fn fenced_acquire_with_a_broken_counter_changes_nothing() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let name = unique("fenced-broken");
    let _: () = redis::cmd("SET")
        .arg(token_key(&name))
        .arg("not-a-number")
        .query(&mut raw)
        .unwrap();
    let err = fenced_acquire()
        .key(&name)
        .key(token_key(&name))
        .arg(30_000)
        .arg(OWNER_A)
        .invoke::<Value>(&mut raw)
        .unwrap_err();
    assert!(err.to_string().contains("not an integer"), "{err}");
    assert!(!exists(&mut raw, &name), "the lock must not be taken");
}

// ---- fenced_write.lua ---------------------------------------------------------------

/// One command of a fenced write: name, its keys, its other arguments.
struct Cmd {
    name: &'static str,
    keys: Vec<String>,
    args: Vec<String>,
}

fn cmd(name: &'static str, keys: &[&str], args: &[&str]) -> Cmd {
    Cmd {
        name,
        keys: keys.iter().map(|k| k.to_string()).collect(),
        args: args.iter().map(|a| a.to_string()).collect(),
    }
}

fn write(
    raw: &mut Connection,
    lock: &str,
    owner: &str,
    token: Option<i64>,
    cmds: &[Cmd],
) -> redis::RedisResult<Value> {
    let script = fenced_write();
    let mut call = script.prepare_invoke();
    call.key(lock).key(token_key(lock));
    for c in cmds {
        for k in &c.keys {
            call.key(k);
        }
    }
    call.arg(owner)
        .arg(token.map(|t| t.to_string()).unwrap_or_default())
        .arg(cmds.len());
    for c in cmds {
        call.arg(1 + c.keys.len() + c.args.len()).arg(c.name);
        for w in c.keys.iter().chain(&c.args) {
            call.arg(w);
        }
    }
    call.invoke(raw)
}

#[test]
fn fenced_write_runs_every_command_while_owner_and_token_hold() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let lock = unique("fw");
    let (counter, hash, gone) = (
        format!("{{{lock}}}:counter"),
        format!("{{{lock}}}:hash"),
        format!("{{{lock}}}:gone"),
    );
    let _: () = redis::cmd("SET")
        .arg(&gone)
        .arg("x")
        .query(&mut raw)
        .unwrap();
    let (_, token) = fenced(&mut raw, &lock, 30_000, OWNER_A);

    let reply = write(
        &mut raw,
        &lock,
        OWNER_A,
        Some(token),
        &[
            cmd("SET", &[&counter], &["10"]),
            cmd("INCRBY", &[&counter], &["5"]),
            cmd("HSET", &[&hash], &["f", "v", "g", "w"]),
            cmd("EXPIRE", &[&hash], &["100"]),
            cmd("DEL", &[&gone], &[]),
            cmd("GET", &[&gone], &[]),
        ],
    )
    .unwrap();
    assert_eq!(
        reply,
        Value::Array(vec![
            Value::Okay,
            Value::Int(15),
            Value::Int(2),
            Value::Int(1),
            Value::Int(1),
            Value::Nil,
        ])
    );
    assert_eq!(get(&mut raw, &counter).as_deref(), Some("15"));
    assert!((1..=100_000).contains(&pttl(&mut raw, &hash)));
    assert!(!exists(&mut raw, &gone));
    // The lock and its token are only read.
    assert_eq!(hget(&mut raw, &lock, OWNER_A), Some(1));
    assert_eq!(get(&mut raw, &token_key(&lock)), Some(token.to_string()));

    // A plain (unfenced) lock skips the token check.
    let plain = unique("fw-plain");
    let _: () = acquire()
        .key(&plain)
        .arg(30_000)
        .arg(OWNER_A)
        .invoke(&mut raw)
        .unwrap();
    let k = format!("{{{plain}}}:k");
    let reply = write(
        &mut raw,
        &plain,
        OWNER_A,
        None,
        &[cmd("SET", &[&k], &["1"])],
    )
    .unwrap();
    assert_eq!(reply, Value::Array(vec![Value::Okay]));
    assert_eq!(get(&mut raw, &k).as_deref(), Some("1"));
}

#[test]
fn fenced_write_after_losing_the_lock_writes_nothing() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let lock = unique("fw-lost");
    let counter = format!("{{{lock}}}:counter");
    let _: () = redis::cmd("SET")
        .arg(&counter)
        .arg(7)
        .query(&mut raw)
        .unwrap();
    let (_, token_a) = fenced(&mut raw, &lock, 30_000, OWNER_A);
    // A's lease runs out (the key disappears) and B takes the lock with a newer token.
    let _: () = redis::cmd("DEL").arg(&lock).query(&mut raw).unwrap();
    let (granted, token_b) = fenced(&mut raw, &lock, 30_000, OWNER_B);
    assert_eq!((granted, token_b), (1, token_a + 1));

    let incr = [cmd("INCRBY", &[&counter], &["100"])];
    let err = write(&mut raw, &lock, OWNER_A, Some(token_a), &incr).unwrap_err();
    assert_eq!(code(&err), "FENCED_NOT_HELD", "{err}");
    assert_eq!(get(&mut raw, &counter).as_deref(), Some("7"));

    // The holder itself, with its own token, still writes.
    let reply = write(&mut raw, &lock, OWNER_B, Some(token_b), &incr).unwrap();
    assert_eq!(reply, Value::Array(vec![Value::Int(107)]));
}

#[test]
fn fenced_write_with_an_old_token_is_refused_even_for_the_holder() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let lock = unique("fw-stale");
    let k = format!("{{{lock}}}:k");
    let (_, first) = fenced(&mut raw, &lock, 30_000, OWNER_A);
    let (_, second) = fenced(&mut raw, &lock, 30_000, OWNER_A);
    let err = write(
        &mut raw,
        &lock,
        OWNER_A,
        Some(first),
        &[cmd("SET", &[&k], &["1"])],
    )
    .unwrap_err();
    assert_eq!(code(&err), "FENCED_STALE_TOKEN", "{err}");
    assert_eq!(err.detail(), Some(second.to_string().as_str()));
    assert!(!exists(&mut raw, &k));

    // A token for a lock whose counter was never drawn reads as 0.
    let plain = unique("fw-stale-plain");
    let _: () = acquire()
        .key(&plain)
        .arg(30_000)
        .arg(OWNER_A)
        .invoke(&mut raw)
        .unwrap();
    let err = write(
        &mut raw,
        &plain,
        OWNER_A,
        Some(1),
        &[cmd("SET", &[&k], &["1"])],
    )
    .unwrap_err();
    assert_eq!(code(&err), "FENCED_STALE_TOKEN");
    assert_eq!(err.detail(), Some("0"));
}

#[test]
fn fenced_write_refuses_malformed_programs_before_writing() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let lock = unique("fw-bad");
    let k = format!("{{{lock}}}:k");
    let (_, token) = fenced(&mut raw, &lock, 30_000, OWNER_A);

    // Writing the lock hash or the token counter through a fenced write is refused.
    for target in [lock.clone(), token_key(&lock)] {
        let err = write(
            &mut raw,
            &lock,
            OWNER_A,
            Some(token),
            &[cmd("SET", &[&k], &["1"]), cmd("DEL", &[&target], &[])],
        )
        .unwrap_err();
        assert_eq!(code(&err), "FENCED_BAD_PROGRAM", "{err}");
    }
    assert!(!exists(&mut raw, &k), "the first command must not have run");
    assert_eq!(hget(&mut raw, &lock, OWNER_A), Some(1));

    // Counts that do not match the ARGV given.
    let cases: Vec<(Vec<String>, Vec<String>)> = vec![
        // Two commands announced, one given.
        (vec![k.clone()], vec!["2", "3", "SET", k.as_str(), "v"]),
        // The command wants more words than are left.
        (vec![k.clone()], vec!["1", "4", "SET", k.as_str(), "v"]),
        // A word left over.
        (
            vec![k.clone()],
            vec!["1", "3", "SET", k.as_str(), "v", "extra"],
        ),
        // Not a number, or no words.
        (vec![k.clone()], vec!["one", "3", "SET", k.as_str(), "v"]),
        (vec![k.clone()], vec!["1", "x", "SET", k.as_str(), "v"]),
        (vec![k.clone()], vec!["1", "0", "SET", k.as_str(), "v"]),
    ]
    .into_iter()
    .map(|(keys, argv)| {
        (
            keys,
            argv.into_iter().map(str::to_owned).collect::<Vec<_>>(),
        )
    })
    .collect();
    for (keys, argv) in cases {
        let script = fenced_write();
        let mut call = script.prepare_invoke();
        call.key(&lock).key(token_key(&lock));
        for key in &keys {
            call.key(key);
        }
        call.arg(OWNER_A).arg(token);
        for a in &argv {
            call.arg(a);
        }
        let err = call.invoke::<Value>(&mut raw).unwrap_err();
        assert_eq!(code(&err), "FENCED_BAD_PROGRAM", "{argv:?}: {err}");
        assert!(!exists(&mut raw, &k), "{argv:?}");
    }

    // An empty program only checks the lock.
    assert_eq!(
        write(&mut raw, &lock, OWNER_A, Some(token), &[]).unwrap(),
        Value::Array(vec![])
    );
    let err = write(&mut raw, &lock, OWNER_B, None, &[]).unwrap_err();
    assert_eq!(code(&err), "FENCED_NOT_HELD");
}

#[test]
fn fenced_write_reports_which_command_failed() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let lock = unique("fw-partial");
    let (a, h, c) = (
        format!("{{{lock}}}:a"),
        format!("{{{lock}}}:h"),
        format!("{{{lock}}}:c"),
    );
    let _: () = redis::cmd("HSET")
        .arg(&h)
        .arg("f")
        .arg("v")
        .query(&mut raw)
        .unwrap();
    let (_, token) = fenced(&mut raw, &lock, 30_000, OWNER_A);
    let err = write(
        &mut raw,
        &lock,
        OWNER_A,
        Some(token),
        &[
            cmd("SET", &[&a], &["1"]),
            cmd("INCRBY", &[&h], &["1"]),
            cmd("SET", &[&c], &["1"]),
        ],
    )
    .unwrap_err();
    assert_eq!(code(&err), "FENCED_PARTIAL", "{err}");
    let detail = err.detail().unwrap_or_default();
    assert!(detail.starts_with("2 WRONGTYPE"), "{detail}");
    // Scripts do not roll back: the first command stays applied, the third never ran.
    assert_eq!(get(&mut raw, &a).as_deref(), Some("1"));
    assert!(!exists(&mut raw, &c));
}

// ---- release.lua without a message (the spin lock's) ---------------------------------

#[test]
fn a_release_without_message_counts_down_replays_its_latch_and_never_publishes() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let name = unique("spin");
    for _ in 0..2 {
        let _: () = acquire()
            .key(&name)
            .arg(30_000)
            .arg(OWNER_A)
            .invoke(&mut raw)
            .unwrap();
    }
    let publishes = calls(&mut raw, "publish");
    let release = |raw: &mut Connection, owner: &str, request: &str| -> Option<i64> {
        release()
            .key(&name)
            .key(format!("redisson_lock__channel:{{{name}}}"))
            .key(latch_key(&name, request))
            .arg("")
            .arg(5_000)
            .arg(owner)
            .arg("PUBLISH")
            .arg(20_000)
            .invoke(raw)
            .unwrap()
    };

    assert_eq!(release(&mut raw, OWNER_B, "r0"), None, "not the holder");
    assert_eq!(hget(&mut raw, &name, OWNER_A), Some(2));
    // "Held nothing" is an outcome too (see the next test).
    assert_eq!(
        get(&mut raw, &latch_key(&name, "r0")).as_deref(),
        Some("none")
    );

    assert_eq!(release(&mut raw, OWNER_A, "r1"), Some(0));
    assert_eq!(hget(&mut raw, &name, OWNER_A), Some(1));
    assert!(
        pttl(&mut raw, &name) <= 5_000,
        "partial release resets the lease"
    );
    assert_eq!(get(&mut raw, &latch_key(&name, "r1")).as_deref(), Some("0"));
    assert!((1..=20_000).contains(&pttl(&mut raw, &latch_key(&name, "r1"))));
    // A retry of the same request does not release a second hold.
    assert_eq!(release(&mut raw, OWNER_A, "r1"), Some(0));
    assert_eq!(hget(&mut raw, &name, OWNER_A), Some(1));

    assert_eq!(release(&mut raw, OWNER_A, "r2"), Some(1));
    assert!(!exists(&mut raw, &name));
    assert_eq!(get(&mut raw, &latch_key(&name, "r2")).as_deref(), Some("1"));
    assert_eq!(release(&mut raw, OWNER_A, "r2"), Some(1), "replayed");

    assert_eq!(
        calls(&mut raw, "publish"),
        publishes,
        "spin releases publish nothing"
    );
}

// ---- acquire.lua refusing a re-entry (the non-reentrant lock's) ----------------------

#[test]
fn a_refused_reentry_changes_nothing() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let name = unique("nonreentrant");
    let take = |raw: &mut Connection, lease: u64, owner: &str| -> redis::RedisResult<Option<i64>> {
        acquire()
            .key(&name)
            .arg(lease)
            .arg(owner)
            .arg("0")
            .invoke(raw)
    };

    assert_eq!(take(&mut raw, 60_000, OWNER_A).unwrap(), None);
    assert_eq!(hget(&mut raw, &name, OWNER_A), Some(1));

    let err = take(&mut raw, 1_000, OWNER_A).unwrap_err();
    assert_eq!(code(&err), NON_REENTRANT, "{err}");
    assert_eq!(hget(&mut raw, &name, OWNER_A), Some(1), "not counted");
    assert!(pttl(&mut raw, &name) > 1_000, "the lease is not reset");

    let ttl = take(&mut raw, 60_000, OWNER_B).unwrap().unwrap();
    assert!((1_001..=60_000).contains(&ttl), "{ttl}");
    assert_eq!(hget(&mut raw, &name, OWNER_B), None);
}

// ---- fair_acquire.lua refusing a re-entry (the non-reentrant fair lock's) -----------

/// A non-reentrant fair acquisition: `queue` false is the single attempt of `tryLock()`.
fn fair_call(
    raw: &mut Connection,
    name: &str,
    owner: &str,
    (wait, now): (u64, u64),
    queue: bool,
) -> redis::RedisResult<Option<i64>> {
    fair_acquire()
        .key(name)
        .key(queue_key(name))
        .key(timeout_key(name))
        .arg(30_000)
        .arg(owner)
        .arg(wait)
        .arg(now)
        .arg(if queue { "1" } else { "0" })
        .arg("0")
        .invoke(raw)
}

#[test]
fn a_non_reentrant_fair_acquire_queues_others_and_refuses_the_holder() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let name = unique("nr-fair");
    let wait = 5_000;

    assert_eq!(
        fair_call(&mut raw, &name, OWNER_A, (wait, now_ms()), true).unwrap(),
        None
    );
    assert_eq!(hget(&mut raw, &name, OWNER_A), Some(1));

    let err = fair_call(&mut raw, &name, OWNER_A, (wait, now_ms()), true).unwrap_err();
    assert_eq!(code(&err), NON_REENTRANT, "{err}");
    assert_eq!(hget(&mut raw, &name, OWNER_A), Some(1));
    assert!(
        lrange(&mut raw, &queue_key(&name)).is_empty(),
        "the holder is not queued"
    );

    // Another owner is queued once, and told to sleep at most the lease.
    for _ in 0..2 {
        let ttl = fair_call(&mut raw, &name, OWNER_B, (wait, now_ms()), true)
            .unwrap()
            .unwrap();
        assert!((1..=30_000).contains(&ttl), "{ttl}");
    }
    assert_eq!(lrange(&mut raw, &queue_key(&name)), vec![OWNER_B]);
    assert_eq!(zrange(&mut raw, &timeout_key(&name)), vec![OWNER_B]);

    // Once the lock is gone the head takes it and leaves the queue.
    let _: () = redis::cmd("DEL").arg(&name).query(&mut raw).unwrap();
    assert_eq!(
        fair_call(&mut raw, &name, OWNER_B, (wait, now_ms()), true).unwrap(),
        None
    );
    assert_eq!(hget(&mut raw, &name, OWNER_B), Some(1));
    assert!(!exists(&mut raw, &queue_key(&name)));
    assert!(!exists(&mut raw, &timeout_key(&name)));
}

#[test]
fn a_non_reentrant_fair_acquire_purges_a_stale_head_before_granting() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let name = unique("nr-fair-stale");
    let now = now_ms();
    // A waiter whose slot ended a second ago sits at the head of the queue.
    let _: () = redis::cmd("RPUSH")
        .arg(queue_key(&name))
        .arg(OWNER_B)
        .query(&mut raw)
        .unwrap();
    let _: () = redis::cmd("ZADD")
        .arg(timeout_key(&name))
        .arg(now - 1_000)
        .arg(OWNER_B)
        .query(&mut raw)
        .unwrap();
    assert_eq!(
        fair_call(&mut raw, &name, OWNER_A, (5_000, now), true).unwrap(),
        None
    );
    assert!(!exists(&mut raw, &queue_key(&name)));
    assert!(!exists(&mut raw, &timeout_key(&name)));
}

#[test]
fn a_non_reentrant_fair_try_acquire_never_queues() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let name = unique("nr-fair-try");
    assert_eq!(
        fair_call(&mut raw, &name, OWNER_A, (5_000, now_ms()), false).unwrap(),
        None
    );
    let err = fair_call(&mut raw, &name, OWNER_A, (5_000, now_ms()), false).unwrap_err();
    assert_eq!(code(&err), NON_REENTRANT, "{err}");
    assert_eq!(hget(&mut raw, &name, OWNER_A), Some(1));
    assert_eq!(
        fair_call(&mut raw, &name, OWNER_B, (5_000, now_ms()), false).unwrap(),
        Some(1)
    );
    assert!(!exists(&mut raw, &queue_key(&name)));
    assert!(!exists(&mut raw, &timeout_key(&name)));
}

// ---- expire_keys.lua ------------------------------------------------------------------

fn expire(raw: &mut Connection, keys: &[String], action: &str, value: u64, condition: &str) -> i64 {
    let script = expire_keys();
    let mut call = script.prepare_invoke();
    for k in keys {
        call.key(k);
    }
    call.arg(action).arg(value).arg(condition);
    call.invoke(raw).unwrap()
}

#[test]
fn expire_keys_covers_every_key_of_a_fair_lock() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let name = unique("expire-fair");
    let keys = vec![name.clone(), queue_key(&name), timeout_key(&name)];
    let _: () = redis::cmd("HSET")
        .arg(&name)
        .arg(OWNER_A)
        .arg(1)
        .query(&mut raw)
        .unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg(&keys[1])
        .arg(OWNER_B)
        .query(&mut raw)
        .unwrap();
    let _: () = redis::cmd("ZADD")
        .arg(&keys[2])
        .arg(now_ms() + 60_000)
        .arg(OWNER_B)
        .query(&mut raw)
        .unwrap();

    assert_eq!(expire(&mut raw, &keys, "pexpire", 50_000, ""), 1);
    for k in &keys {
        assert!((1..=50_000).contains(&pttl(&mut raw, k)), "{k}");
    }
    // The conditions are Redis 7.0's (the client turns 6.2's refusal into a clear error,
    // tests/cli/family.rs).
    if crate::support::server().has_7_0_options() {
        // NX: every key already has a TTL, so nothing changes.
        assert_eq!(expire(&mut raw, &keys, "pexpire", 90_000, "NX"), 0);
        for k in &keys {
            assert!(pttl(&mut raw, k) <= 50_000, "{k}");
        }
        // GT with a later time moves all of them.
        assert_eq!(
            expire(&mut raw, &keys, "pexpireat", now_ms() + 80_000, "GT"),
            1
        );
        for k in &keys {
            assert!((50_001..=80_000).contains(&pttl(&mut raw, k)), "{k}");
        }
    }

    assert_eq!(expire(&mut raw, &keys, "persist", 0, ""), 1);
    for k in &keys {
        assert_eq!(pttl(&mut raw, k), -1, "{k}");
    }
    assert_eq!(
        expire(&mut raw, &keys, "persist", 0, ""),
        0,
        "nothing left to clear"
    );

    // Missing keys are skipped; a key set alone still counts.
    let fenced_keys = vec![name.clone(), token_key(&name)];
    assert_eq!(expire(&mut raw, &fenced_keys, "pexpire", 10_000, ""), 1);
    assert!(!exists(&mut raw, &token_key(&name)));
    let none = vec![unique("missing"), unique("missing")];
    assert_eq!(expire(&mut raw, &none, "pexpire", 10_000, ""), 0);
}

#[test]
fn expire_keys_refuses_an_unknown_action() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let name = unique("expire-bad");
    let _: () = redis::cmd("SET").arg(&name).arg(1).query(&mut raw).unwrap();
    let err = expire_keys()
        .key(&name)
        .arg("del")
        .arg(0)
        .arg("")
        .invoke::<i64>(&mut raw)
        .unwrap_err();
    assert_eq!(code(&err), "EXPIRE_BAD_ACTION", "{err}");
    assert!(exists(&mut raw, &name));
}

// ---- range-checked semaphore counts ---------------------------------------------------

const INT_MAX: i64 = 2_147_483_647;

#[test]
fn semaphore_release_stays_inside_java_int() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let name = unique("sem-release");
    let release = |raw: &mut Connection, n: i64, only_existing: bool| {
        semaphore_release()
            .key(&name)
            .key(sc_channel(&name))
            .arg(n)
            .arg("PUBLISH")
            .arg(if only_existing { "1" } else { "0" })
            .invoke::<Option<i64>>(raw)
    };

    assert_eq!(release(&mut raw, 3, true).unwrap(), None);
    assert!(!exists(&mut raw, &name));
    let (reply, messages) = tap(&server, &sc_channel(&name), || {
        release(&mut server.conn(), 3, false).unwrap()
    });
    assert_eq!(reply, Some(3));
    assert_eq!(messages, vec!["3"], "the new count is published");

    let _: () = redis::cmd("SET")
        .arg(&name)
        .arg(INT_MAX - 7)
        .arg("PX")
        .arg(60_000)
        .query(&mut raw)
        .unwrap();
    assert_eq!(release(&mut raw, 7, true).unwrap(), Some(INT_MAX));
    assert!(pttl(&mut raw, &name) > 0, "INCRBY keeps the TTL");
    let err = release(&mut raw, 1, false).unwrap_err();
    assert_eq!(code(&err), "PERMITS_OUT_OF_RANGE", "{err}");
    assert_eq!(get(&mut raw, &name), Some(INT_MAX.to_string()));
}

#[test]
fn semaphore_add_stays_inside_java_int_and_publishes_positive_counts() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let name = unique("sem-add");
    let add = |raw: &mut Connection, n: i64| {
        semaphore_add()
            .key(&name)
            .key(sc_channel(&name))
            .arg(n)
            .arg("PUBLISH")
            .invoke::<i64>(raw)
    };

    let (reply, messages) = tap(&server, &sc_channel(&name), || {
        let mut conn = server.conn();
        (
            add(&mut conn, 2).unwrap(),
            add(&mut conn, -2).unwrap(),
            add(&mut conn, -1).unwrap(),
        )
    });
    assert_eq!(reply, (2, 0, -1));
    assert_eq!(
        messages,
        vec!["2"],
        "0 and -1 wake nobody and are not published"
    );

    let err = add(&mut raw, INT_MAX + 2).unwrap_err();
    assert_eq!(code(&err), "PERMITS_OUT_OF_RANGE", "{err}");
    assert_eq!(get(&mut raw, &name).as_deref(), Some("-1"));
    assert_eq!(add(&mut raw, INT_MAX + 1).unwrap(), INT_MAX);
    // From INT_MAX, -2^32 would land one below INT_MIN.
    let err = add(&mut raw, -(1_i64 << 32)).unwrap_err();
    assert_eq!(code(&err), "PERMITS_OUT_OF_RANGE", "{err}");
    assert_eq!(add(&mut raw, -(1_i64 << 32) + 1).unwrap(), -INT_MAX - 1);

    // SET drops a TTL, as Redisson's addPermits does.
    let _: () = redis::cmd("PEXPIRE")
        .arg(&name)
        .arg(60_000)
        .query(&mut raw)
        .unwrap();
    add(&mut raw, 1).unwrap();
    assert_eq!(pttl(&mut raw, &name), -1);
}

#[test]
fn permit_add_counts_acquired_permits_and_publishes_the_delta() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let name = unique("pes-add");
    let timeouts = format!("{{{name}}}:timeout");
    for id in ["a", "b", "c"] {
        let _: () = redis::cmd("ZADD")
            .arg(&timeouts)
            .arg(922_337_203_685_477_i64)
            .arg(id)
            .query(&mut raw)
            .unwrap();
    }
    let add = |raw: &mut Connection, n: i64| {
        permit_add()
            .key(&name)
            .key(sc_channel(&name))
            .key(&timeouts)
            .arg(n)
            .arg("PUBLISH")
            .invoke::<i64>(raw)
    };

    let (reply, messages) = tap(&server, &sc_channel(&name), || {
        let mut conn = server.conn();
        (
            add(&mut conn, 1).unwrap(),
            add(&mut conn, 1).unwrap(),
            add(&mut conn, -1).unwrap(),
        )
    });
    assert_eq!(reply, (1, 2, 1));
    assert_eq!(
        messages,
        vec!["1", "1"],
        "the delta, and only when positive"
    );

    // Total = available + 3 acquired must stay within Java's int.
    assert_eq!(add(&mut raw, INT_MAX - 4).unwrap(), INT_MAX - 3);
    let err = add(&mut raw, 1).unwrap_err();
    assert_eq!(code(&err), "PERMITS_OUT_OF_RANGE", "{err}");
    assert_eq!(get(&mut raw, &name), Some((INT_MAX - 3).to_string()));
}

/// A release whose first try's reply timed out is tried again on another connection. If
/// the retry finds no hold (the lease ran out meanwhile) and the thread then takes the
/// lock again, under the same owner field, the first try may still reach Redis after all
/// (a stalled link delivers it late). It must replay the retry's answer, not take off the
/// newer hold: the latch records "held nothing" as it records the other outcomes.
#[test]
fn a_late_first_try_of_a_release_replays_held_nothing_instead_of_releasing_a_newer_hold() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let name = unique("late-release");
    let release = |raw: &mut Connection| -> Option<i64> {
        release()
            .key(&name)
            .key(format!("redisson_lock__channel:{{{name}}}"))
            .key(latch_key(&name, "r0"))
            .arg("0")
            .arg(30_000)
            .arg(OWNER_A)
            .arg("PUBLISH")
            .arg(20_000)
            .invoke(raw)
            .unwrap()
    };
    // The retry: the hold is gone already.
    assert_eq!(release(&mut raw), None);
    // The same thread takes the lock again.
    let granted: Option<i64> = acquire()
        .key(&name)
        .arg(30_000)
        .arg(OWNER_A)
        .invoke(&mut raw)
        .unwrap();
    assert_eq!(granted, None);
    // The first try arrives: it replays, and the newer hold stays.
    assert_eq!(release(&mut raw), None);
    assert_eq!(
        hget(&mut raw, &name, OWNER_A),
        Some(1),
        "the newer hold was released"
    );
}
