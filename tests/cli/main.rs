//! The `redmutex` tool end to end: `status`, `unlock`, `watch`, `doctor` and the error
//! paths, run as a child process against real servers, with locks held from Rust
//! (in this process and in killed child processes) and, with the `interop` feature, from
//! the Java Redisson peer.
//! Human output is checked for what a person needs to read; `--json` is parsed.

use redmutex_harness as support;
#[cfg(feature = "interop")]
use redmutex_harness::peer;
mod topologies;
// Binaries of their own once, folded in: the supervised `redmutex run`, and the rest
// of the lock family (whose holders are `redmutex hold` processes).
mod family;
mod run;
mod verify;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::raw::{exists, fair_queue_key, hgetall, lock_channel, pttl};
use support::{Holder, TestServer, eventually, redmutex_bin, unique};

/// Hang guard for what should take milliseconds.
const HANG: Duration = Duration::from_secs(30);
/// A waiter that wakes within this of a forced unlock was woken by its message: without
/// one it would sleep for the 30 s lease.
const WAKE_BOUND: Duration = Duration::from_secs(5);

/// Runs `redmutex args...` to the end, with `stdin` as its input.
fn run(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(redmutex_bin())
        .args(args)
        .env_remove("REDMUTEX_URL")
        .env_remove("REDMUTEX_PASSWORD")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs `redmutex args...`, which must fail with one line on stderr and nothing on
/// stdout; its exit code and that line.
fn fails(args: &[&str]) -> (Option<i32>, String) {
    let out = run(args, "");
    let text = stderr(&out);
    assert_eq!(text.lines().count(), 1, "{args:?}: {text}");
    assert!(stdout(&out).is_empty(), "{args:?}: {}", stdout(&out));
    (out.status.code(), text)
}

/// Runs a command that must succeed; its stdout.
fn ok(args: &[&str]) -> String {
    let out = run(args, "");
    assert!(
        out.status.success(),
        "{args:?} failed ({}): {}{}",
        out.status,
        stdout(&out),
        stderr(&out)
    );
    stdout(&out)
}

/// `status --json` of `names`, one JSON object per name.
fn status_json(url: &str, names: &[&str]) -> Vec<Value> {
    let mut args = vec!["status", "--json", "--url", url];
    args.extend_from_slice(names);
    let text = ok(&args);
    match serde_json::from_str(&text).unwrap() {
        Value::Array(objects) => objects,
        other => panic!("not an array: {other}"),
    }
}

/// The names of the server's connections, read on a connection closed afterwards.
fn connection_names(server: &TestServer) -> Vec<String> {
    let mut conn = server.conn();
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut conn).unwrap();
    list.lines()
        .filter_map(|l| l.split(' ').find_map(|kv| kv.strip_prefix("name=")))
        .map(str::to_owned)
        .collect()
}

#[test]
fn status_shows_a_redmutex_holder_with_its_thread_count_ttl_and_connection() {
    let server = TestServer::start();
    let client = server.client();
    let name = unique("st-lock");
    let lock = client.get_lock(name.clone());
    let first = lock.lock().unwrap();
    let second = lock.lock().unwrap();
    let objects = status_json(&server.url(), &[&name]);
    let object = &objects[0];
    assert_eq!(object["name"], name.as_str());
    assert_eq!(object["kind"], "lock");
    let ttl = object["ttl_ms"].as_i64().unwrap();
    assert!((1..=30_000).contains(&ttl), "{ttl}");
    let holders = object["holders"].as_array().unwrap();
    assert_eq!(holders.len(), 1, "{object}");
    let holder = &holders[0];
    assert_eq!(holder["client_id"], client.id());
    assert_eq!(holder["count"], 2);
    let thread = holder["thread"].as_u64().unwrap();
    assert_eq!(
        holder["owner"],
        format!("{}:{thread}", client.id()).as_str()
    );
    assert_eq!(holder["connected"], true);

    let text = ok(&["status", "--url", &server.url(), &name]);
    assert!(text.contains("lock (Redisson RLock): held"), "{text}");
    assert!(
        text.contains(&format!("holder {} : {thread}  holds 2", client.id())),
        "{text}"
    );
    assert!(
        text.contains(&format!("connected (redmutex:{})", client.id())),
        "{text}"
    );
    drop(second);
    first.unlock().unwrap();
    let free = status_json(&server.url(), &[&name]);
    assert_eq!(free[0]["kind"], "none");
    assert_eq!(free[0]["holders"].as_array().unwrap().len(), 0);
}

#[test]
fn a_killed_holder_stands_out_as_not_connected() {
    let server = TestServer::start();
    let name = unique("st-dead");
    let mut holder = Holder::holding(&server.url(), &name, 30_000, &[]);
    let id = hgetall(&mut server.conn(), &name)
        .keys()
        .next()
        .and_then(|f| f.rsplit_once(':'))
        .map(|(id, _)| id.to_owned())
        .unwrap();
    let alive = status_json(&server.url(), &[&name]);
    assert_eq!(alive[0]["holders"][0]["connected"], true, "{}", alive[0]);

    holder.child.kill().unwrap();
    holder.child.wait().unwrap();
    let named = format!("redmutex:{id}");
    eventually(HANG, "the killed holder's connections close", || {
        !connection_names(&server).contains(&named)
    });
    let dead = status_json(&server.url(), &[&name]);
    assert_eq!(dead[0]["holders"][0]["client_id"], id.as_str());
    assert_eq!(dead[0]["holders"][0]["connected"], false, "{}", dead[0]);
    let text = ok(&["status", "--url", &server.url(), &name]);
    assert!(text.contains("NOT CONNECTED"), "{text}");
}

#[cfg(feature = "interop")]
#[test]
fn a_redisson_holder_is_shown_with_its_token_and_client_name() {
    for version in peer::versions() {
        let server = TestServer::start();
        let dir = std::env::temp_dir().join(unique("cli-yaml").replace(':', "-"));
        std::fs::create_dir_all(&dir).unwrap();
        let yaml = dir.join("redisson.yaml");
        std::fs::write(
            &yaml,
            format!(
                "singleServerConfig:\n  address: \"redis://127.0.0.1:{}\"\n  clientName: \"orders-svc\"\n",
                server.port()
            ),
        )
        .unwrap();
        let peer = peer::Peer::start_yaml(&version, &yaml, 30_000);
        let name = unique("st-java");
        peer.ok("t1", &format!("fenced.lock {name}"));
        peer.ok("t1", &format!("fenced.lock {name}"));
        let field = peer.field(&peer.thread_id("t1"));

        let objects = status_json(&server.url(), &[&name]);
        let object = &objects[0];
        assert_eq!(object["kind"], "fenced-lock", "{version}: {object}");
        assert_eq!(object["token"], 2, "{version}: {object}");
        let holder = &object["holders"][0];
        assert_eq!(holder["owner"], field.as_str());
        assert_eq!(holder["client_id"], peer.client_id());
        assert_eq!(holder["count"], 2);
        // Redisson names its connections with clientName, never with its id.
        assert_eq!(holder["connected"], Value::Null, "{version}: {object}");
        let text = ok(&["status", "--url", &server.url(), &name]);
        assert!(
            text.contains("fenced lock (Redisson RFencedLock): held"),
            "{text}"
        );
        assert!(text.contains("last fencing token 2"), "{text}");
        assert!(text.contains("connected: unknown"), "{text}");
        assert!(text.contains("orders-svc ×"), "{text}");
        peer.quit();
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn every_kind_is_told_apart_and_a_scan_folds_side_keys_into_their_objects() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client();
    let other = server.client();
    let p = unique("kinds");
    let n = |k: &str| format!("{p}:{k}");

    let lock = client.get_lock(n("lock")).lock().unwrap();
    let fair_held = client.get_fair_lock(n("fair")).lock().unwrap();
    let waiter_client = other.clone();
    let fair_name = n("fair");
    let fair_waiter = std::thread::spawn(move || {
        let lock = waiter_client.get_fair_lock(fair_name);
        lock.try_lock_for(HANG)
            .unwrap()
            .map(|g| g.unlock().unwrap())
            .is_some()
    });
    eventually(HANG, "a queued fair waiter", || {
        support::raw::lrange(&mut raw, &fair_queue_key(&n("fair"))).len() == 1
    });
    let rw = client.get_read_write_lock(n("rw"));
    let read = rw.read_lock().lock().unwrap();
    let rw_other = other.get_read_write_lock(n("rw"));
    std::thread::spawn(move || rw_other.read_lock().lock().unwrap().detach())
        .join()
        .unwrap();
    let semaphore = client.get_semaphore(n("sem"));
    let sem_name = n("sem");
    let sem_client = other.clone();
    let sem_waiter = std::thread::spawn(move || {
        sem_client
            .get_semaphore(sem_name)
            .try_acquire_for(HANG)
            .unwrap()
            .map(|p| p.release().unwrap())
            .is_some()
    });
    support::raw::await_numsub(&mut raw, &format!("redisson_sc:{{{}}}", n("sem")), 1);
    let pes = client.get_permit_expirable_semaphore(n("pes"));
    assert!(pes.try_set_permits(3).unwrap());
    let leased = pes.acquire_with_lease(Duration::from_secs(60)).unwrap();
    let unleased = pes.acquire().unwrap();
    let latch = client.get_count_down_latch(n("latch"));
    assert!(latch.try_set_count(2).unwrap());
    let latch_name = n("latch");
    let latch_client = other.clone();
    let latch_waiter =
        std::thread::spawn(move || latch_client.get_count_down_latch(latch_name).wait_for(HANG));
    support::raw::await_numsub(
        &mut raw,
        &format!("redisson_countdownlatch__channel__{{{}}}", n("latch")),
        1,
    );
    let _: () = redis::cmd("SET")
        .arg(n("token"))
        .arg("Zm9vYmFyYmF6cXV4MTIzNA==")
        .arg("PX")
        .arg(60_000)
        .query(&mut raw)
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg(n("fenced"))
        .arg("0b5e7c4e-1111-4222-8333-444455556666:9")
        .arg(1)
        .query(&mut raw)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(format!("redisson_lock_token:{{{}}}", n("fenced")))
        .arg(7)
        .query(&mut raw)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(n("counter"))
        .arg(5)
        .query(&mut raw)
        .unwrap();

    let expected = [
        ("lock", "lock"),
        ("fair", "fair-lock"),
        ("rw", "read-write-lock"),
        ("sem", "semaphore"),
        ("pes", "permit-expirable-semaphore"),
        ("latch", "count-down-latch"),
        ("token", "token-lock"),
        ("fenced", "fenced-lock"),
        ("counter", "semaphore-or-latch"),
    ];
    let names: Vec<String> = expected.iter().map(|(k, _)| n(k)).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let objects = status_json(&server.url(), &refs);
    for ((key, kind), object) in expected.iter().zip(&objects) {
        assert_eq!(object["kind"], *kind, "{key}: {object}");
    }
    let by = |k: &str| &objects[expected.iter().position(|(e, _)| *e == k).unwrap()];
    let fair = by("fair");
    assert_eq!(fair["queue"].as_array().unwrap().len(), 1, "{fair}");
    assert_eq!(fair["queue"][0]["client_id"], other.id());
    assert!(
        fair["queue"][0]["deadline_in_ms"].as_i64().unwrap() > 0,
        "{fair}"
    );
    let rw_json = by("rw");
    assert_eq!(rw_json["mode"], "read");
    assert_eq!(rw_json["holders"].as_array().unwrap().len(), 2, "{rw_json}");
    for reader in rw_json["holders"].as_array().unwrap() {
        assert_eq!(reader["mode"], "read");
        let lease = reader["leases_ms"][0].as_i64().unwrap();
        assert!(lease > 0, "{reader}");
    }
    assert_eq!(by("sem")["count"], 0);
    let pes_json = by("pes");
    assert_eq!(pes_json["count"], 1);
    let leases: BTreeSet<bool> = pes_json["holders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["leases_ms"][0].is_null())
        .collect();
    assert_eq!(leases, BTreeSet::from([false, true]), "{pes_json}");
    assert_eq!(by("latch")["count"], 2);
    assert_eq!(
        by("token")["holders"][0]["owner"],
        "Zm9vYmFyYmF6cXV4MTIzNA=="
    );
    assert_eq!(by("fenced")["token"], 7);
    assert_eq!(
        by("fenced")["holders"][0]["client_id"],
        "0b5e7c4e-1111-4222-8333-444455556666"
    );
    let as_latch = status_json(
        &server.url(),
        &["--kind", "count-down-latch", &n("counter")],
    );
    assert_eq!(as_latch[0]["kind"], "count-down-latch");
    let text = ok(&["status", "--url", &server.url(), &n("counter")]);
    assert!(text.contains("--kind semaphore"), "{text}");

    let n_sem = n("sem");
    // The scan matches side keys too (queue, timeouts, token, permits, read-hold
    // timeouts) and must fold each into its object.
    let scanned = ok(&[
        "status",
        "--json",
        "--url",
        &server.url(),
        "--scan",
        &format!("*{p}*"),
    ]);
    let scanned: Vec<Value> = serde_json::from_str(&scanned).unwrap();
    let found: BTreeSet<String> = scanned
        .iter()
        .map(|o| o["name"].as_str().unwrap().to_owned())
        .collect();
    // Except the semaphore: without permits it has no key for a scan to find.
    let keyed: BTreeSet<String> = names.iter().filter(|n| **n != n_sem).cloned().collect();
    assert_eq!(found, keyed);

    drop(lock);
    fair_held.unlock().unwrap();
    assert!(fair_waiter.join().unwrap());
    semaphore.add_permits(1).unwrap();
    assert!(sem_waiter.join().unwrap());
    latch.count_down().unwrap();
    latch.count_down().unwrap();
    assert!(latch_waiter.join().unwrap().unwrap());
    read.unlock().unwrap();
    pes.release(leased).unwrap();
    pes.release(unleased).unwrap();
}

/// A Java waiter of each kind, blocked behind a hold that would last 30 s, wakes soon
/// after `unlock --force --yes`: the forced unlock published what its kind listens for.
#[cfg(feature = "interop")]
#[test]
fn a_forced_unlock_wakes_java_waiters_of_every_kind() {
    for version in peer::versions() {
        let server = TestServer::start();
        let url = server.url();
        let peer = peer::Peer::start(&version, &url, 30_000);
        let mut raw = server.conn();
        let client = server.client();
        let p = unique("force");
        let n = |k: &str| format!("{p}:{k}");
        let thread_field = |t: &str| peer.field(&peer.thread_id(t));

        // Each case: Rust takes the object, Java waits, the CLI forces, Java gets it.
        let lock = client.get_lock(n("lock")).lock().unwrap();
        let fair = client.get_fair_lock(n("fair")).lock().unwrap();
        let write = client
            .get_read_write_lock(n("rw"))
            .write_lock()
            .lock()
            .unwrap();
        let latch = client.get_count_down_latch(n("latch"));
        assert!(latch.try_set_count(1).unwrap());
        let pes = client.get_permit_expirable_semaphore(n("pes"));
        assert!(pes.try_set_permits(1).unwrap());
        let _permit = pes.acquire().unwrap();

        let fair_owner = thread_field("wfair");
        let cases = [
            (
                "lock",
                "wlock",
                format!("lock {}", n("lock")),
                lock_channel(&n("lock")),
            ),
            (
                "fair",
                "wfair",
                format!("fair.lock {}", n("fair")),
                format!("{}:{fair_owner}", lock_channel(&n("fair"))),
            ),
            (
                "rw",
                "wrw",
                format!("read.lock {}", n("rw")),
                format!("redisson_rwlock:{{{}}}", n("rw")),
            ),
            (
                "latch",
                "wlatch",
                format!("latch.await {} -1", n("latch")),
                format!("redisson_countdownlatch__channel__{{{}}}", n("latch")),
            ),
            (
                "pes",
                "wpes",
                format!("pes.acquire {}", n("pes")),
                format!("redisson_sc:{{{}}}", n("pes")),
            ),
        ];
        for (key, thread, command, channel) in &cases {
            let pending = peer.send(thread, command);
            let end = Instant::now() + HANG;
            while support::raw::numsub(&mut raw, channel) < 1 {
                assert!(
                    Instant::now() < end,
                    "{version} {key}: Java never subscribed {channel}"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
            let forced = Instant::now();
            let text = ok(&["unlock", "--url", &url, "--force", "--yes", &n(key)]);
            assert!(
                text.starts_with(&format!("unlocked `{}`", n(key))),
                "{text}"
            );
            let reply = pending.wait(HANG);
            let woke = forced.elapsed();
            assert!(reply.is_ok(), "{version} {key}: {reply:?}");
            assert!(
                woke < WAKE_BOUND,
                "{version} {key}: woke after {woke:?}, not by a message"
            );
        }
        // Forced out: the guards have nothing left to release.
        lock.detach();
        fair.detach();
        write.detach();
        peer.quit();
    }
}

#[test]
fn unlock_asks_first_and_a_no_keeps_the_lock() {
    let server = TestServer::start();
    let url = server.url();
    let mut raw = server.conn();
    let client = server.client();
    let name = unique("ask");
    let guard = client.get_lock(name.clone()).lock().unwrap();

    let no = run(&["unlock", "--url", &url, "--force", &name], "n\n");
    assert_eq!(no.status.code(), Some(4), "{}", stderr(&no));
    assert!(stderr(&no).contains("Release `"), "{}", stderr(&no));
    assert!(stderr(&no).contains("not confirmed"), "{}", stderr(&no));
    assert!(exists(&mut raw, &name));
    let eof = run(&["unlock", "--url", &url, "--force", &name], "");
    assert_eq!(eof.status.code(), Some(4));
    assert!(exists(&mut raw, &name));

    // A Rust waiter of another client wakes when the forced unlock publishes.
    let waiter = server.client();
    let waiting_name = name.clone();
    let woken = std::thread::spawn(move || {
        let started = Instant::now();
        let g = waiter.get_lock(waiting_name).lock().unwrap();
        let waited = started.elapsed();
        g.unlock().unwrap();
        waited
    });
    support::raw::await_numsub(&mut raw, &lock_channel(&name), 1);
    let yes = run(&["unlock", "--url", &url, "--force", &name], "y\n");
    assert!(yes.status.success(), "{}", stderr(&yes));
    assert!(woken.join().unwrap() < WAKE_BOUND);
    assert!(guard.unlock().unwrap_err().is_not_held());
}

#[test]
fn unlock_owner_releases_only_that_owners_holds() {
    let server = TestServer::start();
    let url = server.url();
    let mut raw = server.conn();
    let (a, b) = (server.client(), server.client());
    let name = unique("owner-rw");
    let a_read = a
        .get_read_write_lock(name.clone())
        .read_lock()
        .lock()
        .unwrap();
    let a_again = a
        .get_read_write_lock(name.clone())
        .read_lock()
        .lock()
        .unwrap();
    let b_lock = b.get_read_write_lock(name.clone());
    std::thread::spawn(move || b_lock.read_lock().lock().unwrap().detach())
        .join()
        .unwrap();
    let objects = status_json(&url, &[&name]);
    let a_owner = objects[0]["holders"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["client_id"] == a.id())
        .map(|h| h["owner"].as_str().unwrap().to_owned())
        .unwrap();
    let timeout_1 = format!("{{{name}}}:{a_owner}:rwlock_timeout:1");
    assert!(pttl(&mut raw, &timeout_1) > 0);

    let text = ok(&["unlock", "--url", &url, "--owner", &a_owner, "--yes", &name]);
    assert!(text.contains("released 2 hold(s)"), "{text}");
    let left = hgetall(&mut raw, &name);
    assert!(!left.contains_key(&a_owner), "{left:?}");
    assert_eq!(left.get("mode").map(String::as_str), Some("read"));
    assert_eq!(left.len(), 2, "mode and b's reader: {left:?}");
    assert!(!exists(&mut raw, &timeout_1));

    let again = run(
        &["unlock", "--url", &url, "--owner", &a_owner, "--yes", &name],
        "",
    );
    assert_eq!(again.status.code(), Some(4));
    assert!(
        stderr(&again).contains("holds nothing"),
        "{}",
        stderr(&again)
    );
    assert!(a_read.unlock().unwrap_err().is_not_held());
    drop(a_again);

    // A plain lock: its only owner released, the lock is gone and its waiters told.
    let plain = unique("owner-lock");
    let holder = a.get_lock(plain.clone()).lock().unwrap();
    let owner = status_json(&url, &[&plain])[0]["holders"][0]["owner"]
        .as_str()
        .unwrap()
        .to_owned();
    let ((), messages) = support::tap(&server, &lock_channel(&plain), || {
        ok(&["unlock", "--url", &url, "--owner", &owner, "-y", &plain]);
    });
    assert_eq!(messages, vec!["0".to_owned()]);
    assert!(!exists(&mut raw, &plain));
    assert!(holder.unlock().unwrap_err().is_not_held());
}

/// `DUMP key`: the key's whole value, to show a refused unlock left it as it was.
fn dump(raw: &mut redis::Connection, key: &str) -> Option<Vec<u8>> {
    redis::cmd("DUMP").arg(key).query(raw).unwrap()
}

/// Keys that are not locks (an application's string, JSON, hash, list, set, stream) and
/// keys whose shape is only doubtful (owner-like fields with ids that are no UUIDs, a
/// token of no known format, an integer nobody waits on): `unlock` refuses every one with
/// exit code 1, says what it looks like and leaves it exactly as it was; `--kind` then
/// confirms a doubtful one, but never makes a lock of application data.
#[test]
fn unlock_refuses_keys_that_do_not_look_like_locks() {
    let server = TestServer::start();
    let url = server.url();
    let mut raw = server.conn();
    let p = unique("nolock");
    let n = |k: &str| format!("{p}:{k}");
    let set = |raw: &mut redis::Connection, args: &[&str]| {
        let _: redis::Value = redis::cmd(args[0]).arg(&args[1..]).query(raw).unwrap();
    };
    set(&mut raw, &["SET", &n("string"), "hello"]);
    set(
        &mut raw,
        &["SET", &n("json"), "{\"user\": 17}", "PX", "600000"],
    );
    set(&mut raw, &["HSET", &n("hash"), "name", "alice", "age", "3"]);
    set(&mut raw, &["RPUSH", &n("list"), "a", "b"]);
    set(&mut raw, &["SADD", &n("set"), "a"]);
    set(&mut raw, &["XADD", &n("stream"), "*", "field", "value"]);
    set(&mut raw, &["SET", &n("counter"), "5"]);
    set(&mut raw, &["HSET", &n("owners"), "user:1", "5"]);
    set(
        &mut raw,
        &["SET", &n("custom"), "job-17-owner", "PX", "600000"],
    );
    let cases = [
        ("string", "a string of 5 bytes"),
        ("json", "a string of 12 bytes with spaces"),
        ("hash", "a hash of 2 fields that are not lock owners"),
        ("list", "a list key"),
        ("set", "a set key"),
        ("stream", "a stream key"),
        ("counter", "an integer that nobody waits on"),
        ("owners", "whose ids are no UUIDs"),
        ("custom", "nor a lock token of a known shape"),
    ];
    let mut before = Vec::new();
    for (key, _) in &cases {
        before.push((dump(&mut raw, &n(key)), pttl(&mut raw, &n(key))));
    }
    for (key, looks) in &cases {
        for how in [&["--force"][..], &["--owner", "user:1"]] {
            let mut args = vec!["unlock", "--url", &url, "--yes"];
            args.extend_from_slice(how);
            let name = n(key);
            args.push(&name);
            let out = run(&args, "");
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(1), "{key} {how:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.contains(looks), "{key}: {err}");
            assert!(err.contains("nothing was released"), "{key}: {err}");
            // The message says what the key is, never what it holds.
            assert!(!err.contains("hello") && !err.contains("alice"), "{err}");
        }
    }
    for ((key, _), was) in cases.iter().zip(&before) {
        let now = (dump(&mut raw, &n(key)), pttl(&mut raw, &n(key)));
        assert!(now.0.is_some(), "{key} was deleted");
        assert_eq!(now.0, was.0, "{key} changed");
        // The TTL only ran down.
        assert!(
            now.1 <= was.1 && (now.1 == -1) == (was.1 == -1),
            "{key}: {now:?} {was:?}"
        );
    }
    let out = run(
        &["unlock", "--url", &url, "--force", "--yes", &n("owners")],
        "",
    );
    assert!(
        stderr(&out).contains("pass --kind lock"),
        "{}",
        stderr(&out)
    );

    // status shows them for what they are, without their contents.
    let names: Vec<String> = cases.iter().map(|(k, _)| n(k)).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    for (object, (key, looks)) in status_json(&url, &refs).iter().zip(&cases) {
        let want = if *key == "counter" {
            "semaphore-or-latch"
        } else {
            "other"
        };
        assert_eq!(object["kind"], want, "{key}: {object}");
        if want == "other" {
            assert!(
                object["looks_like"].as_str().unwrap().contains(looks),
                "{object}"
            );
        }
        assert_eq!(object["holders"].as_array().unwrap().len(), 0, "{object}");
    }
    let text = ok(&["status", "--url", &url, &n("string"), &n("hash")]);
    assert!(!text.contains("hello") && !text.contains("RLock"), "{text}");

    let kinded = |kind: &str, key: &str| {
        run(
            &[
                "unlock",
                "--url",
                &url,
                "--force",
                "--yes",
                "--kind",
                kind,
                &n(key),
            ],
            "",
        )
    };
    // A kind that does not fit the key is a usage error...
    for (kind, key) in [("lock", "list"), ("read-write-lock", "owners")] {
        let out = kinded(kind, key);
        assert_eq!(out.status.code(), Some(2), "{kind} {key}: {}", stderr(&out));
    }
    // ... one that fits confirms a doubtful shape...
    for (kind, key) in [
        ("lock", "owners"),
        ("token-lock", "custom"),
        ("count-down-latch", "counter"),
    ] {
        let out = kinded(kind, key);
        assert!(out.status.success(), "{kind} {key}: {}", stderr(&out));
        assert!(!exists(&mut raw, &n(key)), "{key}");
    }
    // ... but never makes a lock of what no lock looks like.
    for (kind, key) in [
        ("lock", "hash"),
        ("fair-lock", "hash"),
        ("token-lock", "json"),
    ] {
        let was = dump(&mut raw, &n(key));
        let out = kinded(kind, key);
        assert_eq!(out.status.code(), Some(1), "{kind} {key}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("is not a {kind}")),
            "{}",
            stderr(&out)
        );
        assert_eq!(dump(&mut raw, &n(key)), was, "{key}");
    }
}

/// Every lock kind, held from Rust with a 30 s lease and waited on by another client,
/// is released by `unlock --force --yes` as its own unlock would release it: the
/// waiters of kinds with a message wake far sooner than the lease (so by the message),
/// the polling ones (spin lock, string-token locks) take it soon after. A semaphore,
/// which records no holders, is refused and stays as it was.
#[test]
fn a_forced_unlock_releases_every_lock_kind_and_wakes_its_waiters() {
    use std::thread::{JoinHandle, spawn};

    use redmutex::{TokenFormat, TokenLockOptions};
    use support::raw::{await_numsub, latch_channel, rwlock_channel, semaphore_channel};

    let server = TestServer::start();
    let url = server.url();
    let mut raw = server.conn();
    let (holder, waiter) = (server.client(), server.client());
    let p = unique("forced");
    let n = |k: &str| format!("{p}:{k}");
    /// A waiter's thread: whether it got the object, and when.
    type Waiting = JoinHandle<(bool, Instant)>;
    let wait = |f: Box<dyn FnOnce() -> bool + Send>| -> Waiting {
        spawn(move || {
            let got = f();
            (got, Instant::now())
        })
    };
    let queued = |raw: &mut redis::Connection, name: &str| {
        eventually(HANG, "a queued fair waiter", || {
            support::raw::lrange(raw, &fair_queue_key(name)).len() == 1
        });
    };
    let py = TokenLockOptions::new().token_format(TokenFormat::UuidHex);

    // (key, kind status shows, woken by a message, the waiter)
    let mut cases: Vec<(&str, &str, bool, Waiting)> = Vec::new();
    let lock = holder.get_lock(n("lock")).lock().unwrap();
    let w = waiter.get_lock(n("lock"));
    cases.push((
        "lock",
        "lock",
        true,
        wait(Box::new(move || w.try_lock_for(HANG).unwrap().is_some())),
    ));
    await_numsub(&mut raw, &lock_channel(&n("lock")), 1);

    let fenced = holder.get_fenced_lock(n("fenced")).lock().unwrap();
    let w = waiter.get_fenced_lock(n("fenced"));
    cases.push((
        "fenced",
        "fenced-lock",
        true,
        wait(Box::new(move || w.try_lock_for(HANG).unwrap().is_some())),
    ));
    await_numsub(&mut raw, &lock_channel(&n("fenced")), 1);

    let non_reentrant = holder.get_non_reentrant_lock(n("nr")).lock().unwrap();
    let w = waiter.get_non_reentrant_lock(n("nr"));
    cases.push((
        "nr",
        "lock",
        true,
        wait(Box::new(move || w.try_lock_for(HANG).unwrap().is_some())),
    ));
    await_numsub(&mut raw, &lock_channel(&n("nr")), 1);

    let fair = holder.get_fair_lock(n("fair")).lock().unwrap();
    let w = waiter.get_fair_lock(n("fair"));
    cases.push((
        "fair",
        "fair-lock",
        true,
        wait(Box::new(move || w.try_lock_for(HANG).unwrap().is_some())),
    ));
    queued(&mut raw, &n("fair"));

    let nr_fair = holder
        .get_non_reentrant_fair_lock(n("nrfair"))
        .lock()
        .unwrap();
    let w = waiter.get_non_reentrant_fair_lock(n("nrfair"));
    cases.push((
        "nrfair",
        "fair-lock",
        true,
        wait(Box::new(move || w.try_lock_for(HANG).unwrap().is_some())),
    ));
    queued(&mut raw, &n("nrfair"));

    let write = holder
        .get_read_write_lock(n("rw"))
        .write_lock()
        .lock()
        .unwrap();
    let w = waiter.get_read_write_lock(n("rw"));
    cases.push((
        "rw",
        "read-write-lock",
        true,
        wait(Box::new(move || {
            w.read_lock().try_lock_for(HANG).unwrap().is_some()
        })),
    ));
    await_numsub(&mut raw, &rwlock_channel(&n("rw")), 1);

    let pes = holder.get_permit_expirable_semaphore(n("pes"));
    assert!(pes.try_set_permits(1).unwrap());
    let _permit = pes.acquire().unwrap();
    let w = waiter.get_permit_expirable_semaphore(n("pes"));
    cases.push((
        "pes",
        "permit-expirable-semaphore",
        true,
        wait(Box::new(move || w.try_acquire_for(HANG).unwrap().is_some())),
    ));
    await_numsub(&mut raw, &semaphore_channel(&n("pes")), 1);

    let latch = holder.get_count_down_latch(n("latch"));
    assert!(latch.try_set_count(1).unwrap());
    let w = waiter.get_count_down_latch(n("latch"));
    cases.push((
        "latch",
        "count-down-latch",
        true,
        wait(Box::new(move || w.wait_for(HANG).unwrap())),
    ));
    await_numsub(&mut raw, &latch_channel(&n("latch")), 1);

    let spin = holder.get_spin_lock(n("spin")).lock().unwrap();
    let w = waiter.get_spin_lock(n("spin"));
    cases.push((
        "spin",
        "lock",
        false,
        wait(Box::new(move || w.try_lock_for(HANG).unwrap().is_some())),
    ));

    let token_channel = |name: &str| format!("redmutex_token_lock__channel:{{{name}}}");
    let token = holder.get_token_lock(n("token")).lock().unwrap();
    let w = waiter.get_token_lock(n("token"));
    cases.push((
        "token",
        "token-lock",
        false,
        wait(Box::new(move || w.try_lock_for(HANG).unwrap().is_some())),
    ));
    await_numsub(&mut raw, &token_channel(&n("token")), 1);

    let py_token = holder
        .get_token_lock_with(n("pytoken"), py.clone())
        .unwrap()
        .lock()
        .unwrap();
    let w = waiter.get_token_lock_with(n("pytoken"), py).unwrap();
    cases.push((
        "pytoken",
        "token-lock",
        false,
        wait(Box::new(move || w.try_lock_for(HANG).unwrap().is_some())),
    ));
    await_numsub(&mut raw, &token_channel(&n("pytoken")), 1);

    // A semaphore: nothing to force, and left as it was.
    let semaphore = holder.get_semaphore(n("sem"));
    let w = waiter.get_semaphore(n("sem"));
    let sem_waiter = spawn(move || {
        w.try_acquire_for(HANG)
            .unwrap()
            .map(|p| p.release().unwrap())
            .is_some()
    });
    await_numsub(&mut raw, &semaphore_channel(&n("sem")), 1);
    let refused = run(
        &["unlock", "--url", &url, "--force", "--yes", &n("sem")],
        "",
    );
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("records no holders"),
        "{}",
        stderr(&refused)
    );
    semaphore.add_permits(1).unwrap();
    assert!(sem_waiter.join().unwrap());

    for (key, kind, by_message, waiting) in cases {
        let name = n(key);
        assert_eq!(status_json(&url, &[&name])[0]["kind"], kind, "{key}");
        let forced = Instant::now();
        let text = ok(&["unlock", "--url", &url, "--force", "--yes", &name]);
        assert!(text.starts_with(&format!("unlocked `{name}`")), "{text}");
        let (got, at) = waiting.join().unwrap();
        assert!(got, "{key}: the waiter never got it");
        let woke = at.duration_since(forced);
        if by_message {
            assert!(
                woke < WAKE_BOUND,
                "{key}: woke after {woke:?}, not by a message"
            );
        }
    }
    // Forced out: the guards have nothing left to release.
    lock.detach();
    non_reentrant.detach();
    spin.detach();
    fenced.detach();
    fair.detach();
    nr_fair.detach();
    write.detach();
    drop((token, py_token));
}

/// Lines a child prints, read on a thread.
struct Lines {
    child: Child,
    rx: Receiver<String>,
}

impl Lines {
    fn spawn(args: &[&str]) -> Self {
        let mut child = Command::new(redmutex_bin())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self { child, rx }
    }

    /// The next JSON line whose `event` is `event`; the others seen on the way.
    fn until(&self, event: &str) -> (Value, Vec<Value>) {
        let mut skipped = Vec::new();
        loop {
            let line = self
                .rx
                .recv_timeout(HANG)
                .unwrap_or_else(|_| panic!("no {event} event; saw {skipped:?}"));
            let value: Value = serde_json::from_str(&line).unwrap();
            if value["event"] == event {
                return (value, skipped);
            }
            skipped.push(value);
        }
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The events `watch` prints for one hold's life: acquired, re-entered, one hold
/// released, released with its unlock message, and a leased hold expiring; on the
/// deployment `connect` names, with `client`'s locks.
fn watch_a_lock_life(connect: &[&str], client: &redmutex::Client, name: &str, extra: &[&str]) {
    let mut args = vec!["watch", "--json"];
    args.extend_from_slice(connect);
    args.push(name);
    args.extend_from_slice(extra);
    let watch = Lines::spawn(&args);
    let (ready, _) = watch.until("watching");
    let lock = client.get_lock(name.to_owned());
    let first = lock.lock().unwrap();
    let (acquired, _) = watch.until("acquired");
    assert_eq!(acquired["count"], 1);
    assert_eq!(
        acquired["owner"].as_str().unwrap().split(':').next(),
        Some(client.id())
    );
    let second = lock.lock().unwrap();
    let (reentered, _) = watch.until("reentered");
    assert_eq!(reentered["count"], 2);
    second.unlock().unwrap();
    let (one, _) = watch.until("released-one");
    assert_eq!(one["count"], 1);
    first.unlock().unwrap();
    let (released, mut around) = watch.until("released");
    assert_eq!(released["owner"], acquired["owner"]);
    // The unlock message comes right before or right after the key change.
    if !around.iter().any(|e| e["event"] == "message") {
        around.push(watch.until("message").0);
    }
    let message = around.iter().find(|e| e["event"] == "message").unwrap();
    assert_eq!(message["message"], "0");
    assert_eq!(message["channel"], lock_channel(name).as_str());
    lock.lock_with_lease(Duration::from_millis(300))
        .unwrap()
        .detach();
    let (acquired, _) = watch.until("acquired");
    let (expired, _) = watch.until("expired");
    assert_eq!(expired["owner"], acquired["owner"]);
    assert!(
        expired["time"].as_str().unwrap().ends_with('Z'),
        "{expired}"
    );
    let _ = ready;
}

#[test]
fn watch_follows_a_lock_by_keyspace_notifications() {
    let server = TestServer::start();
    let url = server.url();
    watch_a_lock_life(
        &["--url", &url],
        &server.client(),
        &unique("watched"),
        &["--notify"],
    );
    let flags: (String, String) = redis::cmd("CONFIG")
        .arg("GET")
        .arg("notify-keyspace-events")
        .query(&mut server.conn())
        .unwrap();
    assert!(flags.1.contains('K') && flags.1.contains('x'), "{flags:?}");
}

#[test]
fn watch_follows_a_lock_by_sampling_when_notifications_are_off() {
    let server = TestServer::start();
    let url = server.url();
    watch_a_lock_life(
        &["--url", &url],
        &server.client(),
        &unique("watched"),
        &["--sample-ms", "20"],
    );
    let flags: (String, String) = redis::cmd("CONFIG")
        .arg("GET")
        .arg("notify-keyspace-events")
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(flags.1, "", "watch must not turn notifications on unasked");
}

#[test]
fn watch_hears_sharded_unlock_messages() {
    let server = TestServer::start();
    let name = unique("sharded");
    let url = server.url();
    let watch = Lines::spawn(&["watch", "--json", "--url", &url, &name]);
    let (ready, _) = watch.until("watching");
    if !support::server().has_sharded_pubsub() {
        // Redis 6.2: no sharded channels to hear, and watch says so.
        assert_eq!(ready["sharded"], false, "{ready}");
        return;
    }
    assert_eq!(ready["sharded"], true, "{ready}");
    // What a Redisson cluster client's unlock script sends.
    let _: i64 = redis::cmd("SPUBLISH")
        .arg(lock_channel(&name))
        .arg("0")
        .query(&mut server.conn())
        .unwrap();
    let (message, _) = watch.until("message");
    assert_eq!(message["channel"], lock_channel(&name).as_str());
    assert_eq!(message["message"], "0");
}

fn doctor_json(url: &str) -> (Option<i32>, Value) {
    let out = run(&["doctor", "--json", url], "");
    let json = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
    (out.status.code(), json)
}

fn verdict<'a>(report: &'a Value, check: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == check)
        .unwrap_or_else(|| panic!("no {check} in {report}"))
}

#[test]
fn doctor_passes_a_well_set_server() {
    let server = TestServer::with_args(&["--appendonly", "yes", "--appendfsync", "always"]);
    let (code, report) = doctor_json(&server.url());
    assert_eq!(code, Some(0), "{report}");
    for check in [
        "server",
        "sharded",
        "wait",
        "eviction",
        "persistence",
        "acl",
        "clock",
    ] {
        assert_eq!(
            verdict(&report, check)["verdict"],
            "ok",
            "{check}: {report}"
        );
    }
    let text = ok(&["doctor", &server.url()]);
    let version =
        support::supervised::info_field(&mut server.conn(), "server", "redis_version").unwrap();
    assert!(text.contains(&format!("Redis {version}")), "{text}");
    assert!(text.ends_with("no check failed\n"), "{text}");
}

#[test]
fn doctor_fails_eviction_and_missing_permissions_and_says_what_to_change() {
    let server =
        TestServer::with_args(&["--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"]);
    let (code, report) = doctor_json(&server.url());
    assert_eq!(code, Some(3), "{report}");
    let eviction = verdict(&report, "eviction");
    assert_eq!(eviction["verdict"], "fail", "{report}");
    assert!(eviction["fix"].as_str().unwrap().contains("noeviction"));
    assert_eq!(verdict(&report, "persistence")["verdict"], "warn");

    // A user without PUBLISH (and so without ACL DRYRUN): found by probing.
    server.add_user("app", "pw", &["+@all", "-publish", "-acl"]);
    let (code, report) = doctor_json(&format!("redis://app:pw@127.0.0.1:{}/", server.port()));
    assert_eq!(code, Some(3), "{report}");
    let acl = verdict(&report, "acl");
    assert_eq!(acl["verdict"], "fail", "{report}");
    assert!(
        acl["found"].as_str().unwrap().ends_with(": publish"),
        "{acl}"
    );
    assert_eq!(acl["fix"], "ACL SETUSER app +publish");
    assert!(!report.to_string().contains("pw@"), "{report}");
}

#[test]
fn errors_are_one_line_with_documented_exit_codes() {
    let refused = run(&["status", "--url", "redis://127.0.0.1:1/", "x"], "");
    assert_eq!(refused.status.code(), Some(1));
    let text = stderr(&refused);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains("redis://127.0.0.1:1/"), "{text}");
    assert!(text.contains("check the host and port"), "{text}");

    let malformed = run(
        &["status", "--url", "redis://:s3cret@127.0.0.1:99999/", "x"],
        "",
    );
    assert_eq!(malformed.status.code(), Some(2));
    let text = stderr(&malformed);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.contains("outside 1-65535") && !text.contains("s3cret"),
        "{text}"
    );

    let server = TestServer::start();
    let url = server.url();
    let client = server.client();
    let name = unique("err");
    let guard = client.get_lock(name.clone()).lock().unwrap();
    let wrong_kind = run(&["status", "--url", &url, "--kind", "semaphore", &name], "");
    assert_eq!(wrong_kind.status.code(), Some(2), "{}", stderr(&wrong_kind));
    let free = run(
        &["unlock", "--url", &url, "--force", "--yes", "nobody-here"],
        "",
    );
    assert_eq!(free.status.code(), Some(4));
    let _: () = redis::cmd("SET")
        .arg("plain-semaphore")
        .arg(3)
        .query(&mut server.conn())
        .unwrap();
    let semaphore = run(
        &[
            "unlock",
            "--url",
            &url,
            "--force",
            "--yes",
            "--kind",
            "semaphore",
            "plain-semaphore",
        ],
        "",
    );
    assert_eq!(semaphore.status.code(), Some(2));
    assert!(
        stderr(&semaphore).contains("records no holders"),
        "{}",
        stderr(&semaphore)
    );
    let usage = run(&["status", "--url", &url], "");
    assert_eq!(usage.status.code(), Some(2));
    let bench = run(&["bench", "--source", "/"], "");
    assert_eq!(bench.status.code(), Some(2));
    assert!(
        stderr(&bench).contains("source checkout"),
        "{}",
        stderr(&bench)
    );
    guard.unlock().unwrap();
}

#[test]
fn help_lists_the_operators_commands_and_hides_the_test_helpers() {
    let help = ok(&["--help"]);
    for command in [
        "status", "unlock", "watch", "doctor", "bench", "demo", "verify",
    ] {
        assert!(
            help.contains(&format!("\n  {command} ")),
            "{command}: {help}"
        );
    }
    for helper in ["worker", "hold", "soak-worker"] {
        assert!(
            !help.contains(&format!("\n  {helper} ")),
            "{helper}: {help}"
        );
    }
    assert!(help.contains("Exit codes:"), "{help}");
}

/// `--user`/`--password` and `REDMUTEX_PASSWORD` against a server whose `default` user
/// needs a password and whose ACL user `ops` has its own: the tool reads and releases
/// as that user, and a wrong or missing login fails in one line that names the user
/// and never the password.
#[test]
fn the_login_options_reach_a_protected_server() {
    let server = TestServer::start();
    drop(server.protect("ops", "ops-pw-1", "default-pw-1"));
    let client = server.client_with(|b| b.username("ops").password("ops-pw-1"));
    let name = unique("acl");
    let guard = client.get_lock(name.clone()).lock().unwrap();
    let url = server.url();

    let shown = ok(&[
        "status",
        "--json",
        "--url",
        &url,
        "--user",
        "ops",
        "--password",
        "ops-pw-1",
        &name,
    ]);
    let objects: Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(
        objects[0]["holders"][0]["client_id"],
        client.id(),
        "{objects}"
    );

    // The password from the environment, the requirepass one for `default`.
    let out = Command::new(redmutex_bin())
        .args(["status", "--json", "--url", &url, &name])
        .env_remove("REDMUTEX_URL")
        .env("REDMUTEX_PASSWORD", "default-pw-1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let objects: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        objects[0]["holders"][0]["client_id"],
        client.id(),
        "{objects}"
    );

    for (args, user) in [
        (vec!["--user", "ops", "--password", "not-it-7"], "ops"),
        (vec!["--password", "not-it-7"], "default"),
        (vec![], "default"),
    ] {
        let mut all = vec!["status", "--url", &url];
        all.extend_from_slice(&args);
        all.push(&name);
        let out = run(&all, "");
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {text}");
        assert_eq!(text.lines().count(), 1, "{args:?}: {text}");
        assert!(text.contains(user), "{args:?} should name {user}: {text}");
        assert!(!text.contains("not-it-7"), "{args:?}: {text}");
        assert!(stdout(&out).is_empty(), "{args:?}");
    }

    // A forced unlock as the ACL user releases the hold.
    ok(&[
        "unlock",
        "--url",
        &url,
        "--user",
        "ops",
        "--password",
        "ops-pw-1",
        "--force",
        "--yes",
        &name,
    ]);
    assert!(guard.is_lost() || !client.get_lock(name.clone()).is_locked().unwrap());
    drop(guard);
}
