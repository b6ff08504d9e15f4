//! Self-tests of the topology harness (`support/cluster.rs`, `support/sentinel.rs`,
//! `support/supervised.rs`): every claim is checked against the servers' own state.
//!
//! Tests that change a topology take `#[serial(cluster)]` / `#[serial(sentinel)]` and
//! a `disrupt()` guard; the rest take `#[parallel(...)]`. Each test prints how long its
//! topology change took (run with `--nocapture` to see them).

use redmutex_harness as support;
#[cfg(feature = "interop")]
use redmutex_harness::peer;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use redis::Connection;
use serial_test::{parallel, serial};

use support::cluster::{self, Failover, Role, SLOTS, key_for_slot, key_slot};
use support::raw::exists;
use support::reopening::Reopening;
use support::sentinel;
use support::supervised::{self, alive, info_field, wait_for};

fn role(conn: &mut Connection) -> (String, Option<u16>) {
    let role = info_field(conn, "replication", "role").expect("INFO replication role");
    let port = info_field(conn, "replication", "master_port").map(|p| p.parse().unwrap());
    (role, port)
}

/// The error as the server sent it (`MOVED 1234 127.0.0.1:7000`); panics on success.
fn error_text<T: std::fmt::Debug>(r: redis::RedisResult<T>) -> String {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => match (e.code(), e.detail()) {
            (Some(code), Some(detail)) => format!("{code} {detail}"),
            (Some(code), None) => code.to_owned(),
            _ => e.to_string(),
        },
    }
}

// ---------------------------------------------------------------------- hash slots

#[test]
#[parallel(cluster)]
fn key_slot_matches_cluster_keyslot() {
    assert_eq!(
        cluster::crc16(b"123456789"),
        0x31C3,
        "CRC16/XMODEM check value"
    );
    let c = cluster::shared();
    let mut conn = c.conn(c.ports()[0]);
    let keys: Vec<Vec<u8>> = [
        "foo",
        "{user1000}.following",
        "{user1000}.followers",
        "foo{}{bar}",
        "foo{{bar}}zap",
        "foo{bar}{zap}",
        "{}",
        "}{",
        "a{b}c",
        "redisson_lock__channel:{mylock}",
        "",
        "ключ",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .chain((0..200u32).map(|i| format!("k{i}-{}", i * 7919).into_bytes()))
    .chain([vec![0xff, 0x00, b'{', 0x80, b'}']])
    .collect();
    for k in keys {
        let server: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(&k)
            .query(&mut conn)
            .unwrap();
        assert_eq!(
            key_slot(&k),
            server,
            "slot of {:?}",
            String::from_utf8_lossy(&k)
        );
    }
    for slot in [0, 1, 5460, 5461, 16383] {
        assert_eq!(key_slot(key_for_slot(slot, "x")), slot);
    }
}

// ------------------------------------------------------------------------- cluster

#[test]
#[parallel(cluster)]
fn cluster_covers_every_slot_with_three_replicated_masters() {
    let started = Instant::now();
    let c = cluster::shared();
    println!("cluster::shared() returned after {:?}", started.elapsed());
    let nodes = c.nodes();
    assert_eq!(nodes.len(), 6);
    let masters = c.masters();
    assert_eq!(masters.len(), 3, "{nodes:?}");
    let mut covered = vec![0u8; usize::from(SLOTS)];
    for m in &masters {
        for r in &m.slots {
            for s in r.clone() {
                covered[usize::from(s)] += 1;
            }
        }
        // The server's own word on its role and its replica.
        let (r, _) = role(&mut m.conn());
        assert_eq!(r, "master", "node {}", m.port);
        let replica = c.replica_of(m);
        assert_eq!(
            role(&mut replica.conn()),
            ("slave".to_owned(), Some(m.port))
        );
        let connected = info_field(&mut m.conn(), "replication", "connected_slaves");
        assert_eq!(connected.as_deref(), Some("1"));
    }
    assert!(covered.iter().all(|&n| n == 1), "every slot exactly once");
    for port in c.ports() {
        let mut conn = c.conn(port);
        let ci: String = redis::cmd("CLUSTER").arg("INFO").query(&mut conn).unwrap();
        assert!(ci.contains("cluster_state:ok"), "{port}: {ci}");
        assert!(ci.contains("cluster_slots_ok:16384"), "{port}: {ci}");
    }
}

#[test]
#[parallel(cluster)]
fn master_for_key_is_the_node_that_accepts_the_key() {
    let c = cluster::shared();
    for i in 0..20 {
        let key = support::unique(&format!("owner{i}"));
        let owner = c.master_for_key(&key);
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg("v")
            .query(&mut owner.conn())
            .unwrap();
        for other in c.masters().into_iter().filter(|m| m.id != owner.id) {
            let e = error_text(
                redis::cmd("GET")
                    .arg(&key)
                    .query::<Option<String>>(&mut other.conn()),
            );
            assert!(
                e.contains("MOVED")
                    && e.contains(&format!("{} 127.0.0.1:{}", key_slot(&key), owner.port)),
                "{e}"
            );
        }
    }
}

/// Writes `key` on its master and waits until its replica acknowledged it.
fn replicated_set(c: &cluster::Cluster, key: &str, value: &str) {
    let mut conn = c.master_for_key(key).conn();
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(value)
        .query(&mut conn)
        .unwrap();
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5000)
        .query(&mut conn)
        .unwrap();
    assert_eq!(acked, 1, "replica did not ack {key}");
}

#[test]
#[serial(cluster)]
fn cluster_failover_moves_the_master_and_keeps_the_data() {
    let c = cluster::shared();
    let _d = c.disrupt();
    let key = support::unique("failover");
    replicated_set(c, &key, "before");
    let old = c.master_for_key(&key);
    let replica = c.replica_of(&old);
    let started = Instant::now();
    let new = c.failover(&replica, Failover::Default);
    let agreed = started.elapsed();
    c.wait_healthy();
    println!(
        "CLUSTER FAILOVER: all nodes agree after {agreed:?}, healthy after {:?}",
        started.elapsed()
    );
    assert_eq!(new.id, replica.id);
    assert_eq!(role(&mut new.conn()).0, "master");
    assert_eq!(role(&mut old.conn()), ("slave".to_owned(), Some(new.port)));
    assert_eq!(c.master_for_key(&key).id, new.id);
    let v: String = redis::cmd("GET").arg(&key).query(&mut new.conn()).unwrap();
    assert_eq!(v, "before");
    let e = error_text(
        redis::cmd("SET")
            .arg(&key)
            .arg("x")
            .query::<()>(&mut old.conn()),
    );
    assert!(e.contains("MOVED"), "write on the demoted master: {e}");
}

#[test]
#[serial(cluster)]
fn cluster_kill_master_promotes_its_replica_and_restart_rejoins_as_replica() {
    let c = cluster::shared();
    let _d = c.disrupt();
    let key = support::unique("kill");
    replicated_set(c, &key, "kept");
    let old = c.master_for_key(&key);
    let replica = c.replica_of(&old);
    let pid = c.pid(&old).unwrap();
    let started = Instant::now();
    let new = c.kill_master(&old);
    let promoted = started.elapsed();
    assert!(!alive(pid), "the old master's process is gone");
    assert_eq!(new.id, replica.id);
    assert_eq!(new.slots, old.slots);
    let v: String = redis::cmd("GET").arg(&key).query(&mut new.conn()).unwrap();
    assert_eq!(v, "kept");
    assert!(
        c.nodes().iter().any(|n| n.id == old.id && n.failed),
        "the old master is flagged fail"
    );
    let restarted = Instant::now();
    c.restart(&old);
    c.wait_healthy();
    println!(
        "SIGKILL master: promoted after {promoted:?}; restart to healthy 3+3 took {:?}",
        restarted.elapsed()
    );
    let back = c.node_by_id(&old.id);
    assert_eq!(
        back.role,
        Role::Replica {
            master_id: new.id.clone()
        }
    );
    assert_eq!(role(&mut back.conn()), ("slave".to_owned(), Some(new.port)));
}

#[test]
#[serial(cluster)]
fn migrate_slot_moves_the_slot_and_its_keys() {
    let c = cluster::shared();
    let _d = c.disrupt();
    let key = support::unique("migrate");
    let tagged = format!("{{{key}}}:other");
    let slot = key_slot(&key);
    assert_eq!(key_slot(&tagged), slot);
    let from = c.master_for_slot(slot);
    let to = c.masters().into_iter().find(|m| m.id != from.id).unwrap();
    for k in [&key, &tagged] {
        let _: () = redis::cmd("SET")
            .arg(k)
            .arg("v")
            .query(&mut from.conn())
            .unwrap();
    }
    let started = Instant::now();
    c.migrate_slot(slot, &to);
    println!(
        "slot migration with 2 keys: all nodes agree after {:?}",
        started.elapsed()
    );
    assert_eq!(c.master_for_slot(slot).id, to.id);
    let n: i64 = redis::cmd("CLUSTER")
        .arg("COUNTKEYSINSLOT")
        .arg(slot)
        .query(&mut to.conn())
        .unwrap();
    assert_eq!(n, 2);
    let v: String = redis::cmd("GET").arg(&key).query(&mut to.conn()).unwrap();
    assert_eq!(v, "v");
    let e = error_text(
        redis::cmd("GET")
            .arg(&key)
            .query::<Option<String>>(&mut from.conn()),
    );
    assert!(
        e.contains(&format!("MOVED {slot} 127.0.0.1:{}", to.port)),
        "{e}"
    );
    // The replicas follow too.
    for r in c.replicas() {
        let seen = c.nodes_seen_by(&r);
        let owner = seen
            .iter()
            .find(|n| n.is_master() && n.serves(slot))
            .unwrap();
        assert_eq!(
            owner.id, to.id,
            "replica {} still routes slot {slot} elsewhere",
            r.port
        );
    }
}

#[test]
#[serial(cluster)]
fn half_done_migration_answers_ask_and_heal_finishes_it() {
    let c = cluster::shared();
    let _d = c.disrupt();
    let moved = support::unique("ask");
    let stays = format!("{{{moved}}}:stays");
    let slot = key_slot(&moved);
    let from = c.master_for_slot(slot);
    let to = c.masters().into_iter().find(|m| m.id != from.id).unwrap();
    for k in [&moved, &stays] {
        let _: () = redis::cmd("SET")
            .arg(k)
            .arg("v")
            .query(&mut from.conn())
            .unwrap();
    }
    let m = c.begin_migration(slot, &to);
    m.move_key_list(std::slice::from_ref(&moved));
    let e = error_text(
        redis::cmd("GET")
            .arg(&moved)
            .query::<Option<String>>(&mut from.conn()),
    );
    assert!(
        e.contains(&format!("ASK {slot} 127.0.0.1:{}", to.port)),
        "{e}"
    );
    let v: String = redis::cmd("GET")
        .arg(&stays)
        .query(&mut from.conn())
        .unwrap();
    assert_eq!(v, "v", "a key not yet moved is still served by the source");
    drop(m); // abandoned half-way, as a panicking test would
    c.heal();
    assert_eq!(c.master_for_slot(slot).id, to.id);
    let n: i64 = redis::cmd("CLUSTER")
        .arg("COUNTKEYSINSLOT")
        .arg(slot)
        .query(&mut to.conn())
        .unwrap();
    assert_eq!(n, 2, "heal moved the remaining key");
}

#[test]
#[parallel(cluster)]
fn broken_cluster_serves_nothing_in_the_uncovered_range() {
    let c = cluster::broken();
    let hole = *cluster::BROKEN_UNCOVERED.start();
    let lost = key_for_slot(hole, "hole");
    let fine = key_for_slot(*cluster::BROKEN_UNCOVERED.end() + 1, "fine");
    for port in c.ports() {
        let mut conn = c.conn(port);
        let ci: String = redis::cmd("CLUSTER").arg("INFO").query(&mut conn).unwrap();
        assert!(ci.contains("cluster_slots_assigned:16284"), "{ci}");
        let e = error_text(redis::cmd("SET").arg(&lost).arg("v").query::<()>(&mut conn));
        assert!(e.contains("CLUSTERDOWN") && e.contains("not served"), "{e}");
    }
    let _: () = redis::cmd("SET")
        .arg(&fine)
        .arg("v")
        .query(&mut c.master_for_key(&fine).conn())
        .unwrap();
    assert!(c.nodes().iter().all(|n| !n.serves(hole)));
}

#[test]
#[parallel(cluster)]
fn strict_broken_cluster_is_down_everywhere() {
    let c = cluster::broken_strict();
    let fine = key_for_slot(*cluster::BROKEN_UNCOVERED.end() + 1, "fine");
    let owner = c.master_for_key(&fine);
    for port in c.ports() {
        let ci: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query(&mut c.conn(port))
            .unwrap();
        assert!(ci.contains("cluster_state:fail"), "{port}: {ci}");
    }
    let e = error_text(
        redis::cmd("GET")
            .arg(&fine)
            .query::<Option<String>>(&mut owner.conn()),
    );
    assert!(
        e.starts_with("CLUSTERDOWN"),
        "a covered slot on its owner: {e}"
    );
}

// ------------------------------------------------------------------------ sentinel

#[test]
#[parallel(sentinel)]
fn sentinel_set_has_one_master_two_replicas_three_sentinels() {
    let started = Instant::now();
    let s = sentinel::shared();
    println!("sentinel::shared() returned after {:?}", started.elapsed());
    let master = s.master();
    for i in 0..3 {
        assert_eq!(
            s.master_seen_by(i).unwrap(),
            ("127.0.0.1".to_owned(), master.port)
        );
    }
    assert_eq!(master.role, Some(sentinel::Role::Master));
    let replicas = s.replicas();
    assert_eq!(replicas.len(), 2);
    for r in &replicas {
        assert_eq!(role(&mut r.conn()), ("slave".to_owned(), Some(master.port)));
    }
    let mut m = master.conn();
    assert_eq!(
        info_field(&mut m, "replication", "connected_slaves").as_deref(),
        Some("2")
    );
}

#[test]
#[serial(sentinel)]
fn sentinel_failover_moves_the_master() {
    let s = sentinel::shared();
    let _d = s.disrupt();
    let old = s.master();
    let key = support::unique("sfo");
    let mut conn = old.conn();
    let _: () = redis::cmd("SET")
        .arg(&key)
        .arg("v")
        .query(&mut conn)
        .unwrap();
    let acked: i64 = redis::cmd("WAIT")
        .arg(2)
        .arg(5000)
        .query(&mut conn)
        .unwrap();
    assert_eq!(acked, 2);
    let started = Instant::now();
    let new = s.failover();
    let agreed = started.elapsed();
    assert_ne!(new.port, old.port);
    assert_eq!(role(&mut new.conn()).0, "master");
    // The sentinels demote the old master (still up) on their own, ~10 s later.
    wait_for(
        Duration::from_secs(30),
        "the old master to follow the new one",
        || match role(&mut old.conn()) {
            (r, Some(p)) if r == "slave" && p == new.port => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
    println!(
        "SENTINEL FAILOVER: sentinels agree after {agreed:?}, old master demoted after {:?}",
        started.elapsed()
    );
    let v: String = redis::cmd("GET").arg(&key).query(&mut new.conn()).unwrap();
    assert_eq!(v, "v");
}

#[test]
#[serial(sentinel)]
fn sentinel_kill_master_promotes_and_restart_rejoins_as_replica() {
    let s = sentinel::shared();
    let _d = s.disrupt();
    let old = s.master();
    let pid = s.pid(&old).unwrap();
    let started = Instant::now();
    let new = s.kill_master();
    let promoted = started.elapsed();
    assert!(!alive(pid));
    assert_ne!(new.port, old.port);
    assert_eq!(role(&mut new.conn()).0, "master");
    let restarted = Instant::now();
    s.restart(&old);
    s.wait_healthy();
    println!(
        "SIGKILL master (sentinel): promoted after {promoted:?}; restart to healthy took {:?}",
        restarted.elapsed()
    );
    let now = s.master();
    assert_eq!(
        now.port,
        new.port,
        "the master moved again after the promotion\n{}",
        s.log_tails()
    );
    assert_eq!(role(&mut old.conn()), ("slave".to_owned(), Some(new.port)));
}

#[test]
#[serial(sentinel)]
fn stopped_replicas_do_not_ack_wait() {
    let s = sentinel::shared();
    let _d = s.disrupt();
    let master = s.master();
    let replicas = s.replicas();
    let mut conn = master.conn();
    let wait = |conn: &mut Connection, n: i64, ms: u64| -> i64 {
        let key = support::unique("wait");
        let _: () = redis::cmd("SET").arg(&key).arg("v").query(conn).unwrap();
        redis::cmd("WAIT").arg(n).arg(ms).query(conn).unwrap()
    };
    assert_eq!(wait(&mut conn, 2, 5000), 2);
    s.stop(&replicas[0]);
    assert_eq!(wait(&mut conn, 2, 300), 1, "one replica stopped");
    s.stop(&replicas[1]);
    assert_eq!(wait(&mut conn, 1, 300), 0, "both replicas stopped");
    s.cont(&replicas[0]);
    s.cont(&replicas[1]);
    assert_eq!(wait(&mut conn, 2, 5000), 2, "both back");
}

// ------------------------------------------------------------------------ reopening

/// `CLIENT KILL TYPE normal` (what the sentinels send to a node they reconfigure) closes
/// a plain connection, and a `Reopening` one reads on through a new connection.
#[test]
#[parallel]
fn a_reopening_connection_reads_on_after_client_kill() {
    let server = support::TestServer::start();
    let key = support::unique("reopen");
    let mut writer = server.conn();
    let _: () = redis::cmd("SET")
        .arg(&key)
        .arg(1)
        .query(&mut writer)
        .unwrap();
    let mut plain = server.conn();
    let mut reopening = Reopening::new(|| server.conn());
    let id = |c: &mut dyn redis::ConnectionLike| -> i64 {
        redis::cmd("CLIENT").arg("ID").query(c).unwrap()
    };
    let before = id(&mut reopening);
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .query(&mut writer)
        .unwrap();
    assert_eq!(killed, 2, "the plain and the reopening connection");
    let err = redis::cmd("EXISTS")
        .arg(&key)
        .query::<bool>(&mut plain)
        .unwrap_err();
    assert!(err.is_connection_dropped(), "{err:?}");
    assert!(exists(&mut reopening, &key));
    assert_ne!(id(&mut reopening), before, "read on the killed connection");
}

// ------------------------------------------------------------------------ teardown

const CHILD_ENV: &str = "REDMUTEX_HARNESS_CHILD";

/// The child side of the teardown tests: starts the shared topologies named in
/// `$REDMUTEX_HARNESS_CHILD` (`<cluster|sentinel|both>:<exit|panic|abort|hang>`), prints
/// their processes and directories, then ends as told.
#[test]
#[ignore = "run in a child process by the teardown tests"]
fn teardown_child() {
    let Ok(mode) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (what, end) = mode.split_once(':').expect("<topology>:<end>");
    let mut lines = Vec::new();
    if matches!(what, "cluster" | "both") {
        let c = cluster::shared();
        assert!(c.redisson_yaml().exists());
        lines.push((c.pids(), c.root().to_owned()));
    }
    if matches!(what, "sentinel" | "both") {
        let s = sentinel::shared();
        assert!(s.redisson_yaml().exists());
        lines.push((s.pids(), s.root().to_owned()));
    }
    for (pids, root) in lines {
        let pids: Vec<String> = pids
            .iter()
            .flat_map(|(a, b)| [a.to_string(), b.to_string()])
            .collect();
        println!("harness-root {}", root.display());
        println!("harness-pids {}", pids.join(" "));
    }
    println!("harness-ready");
    match end {
        "exit" => {}
        "panic" => panic!("the test panics with the topology running"),
        "abort" => std::process::abort(),
        "hang" => loop {
            std::thread::park();
        },
        other => panic!("unknown end {other:?}"),
    }
}

/// Runs [`teardown_child`] in a child test process with `mode`, SIGKILLs it if `mode`
/// ends in `hang`, and checks that none of its servers or supervisors survive it and
/// their directories are gone.
fn assert_teardown(mode: &str) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "teardown_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, mode)
        .env(supervised::PORTS_ENV, {
            let (low, high) = supervised::child_port_window();
            format!("{low}-{high}")
        })
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut roots = Vec::new();
    let mut pids: Vec<u32> = Vec::new();
    let mut ready = false;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(r) = line.strip_prefix("harness-root ") {
            roots.push(std::path::PathBuf::from(r));
        } else if let Some(p) = line.strip_prefix("harness-pids ") {
            pids.extend(p.split_whitespace().map(|p| p.parse::<u32>().unwrap()));
        } else if line == "harness-ready" {
            ready = true;
            if mode.ends_with(":hang") {
                child.kill().unwrap();
            }
        }
        // Otherwise read on to EOF: a closed pipe would make the child's own output fail.
    }
    let started = Instant::now();
    let status = child.wait().unwrap();
    assert!(
        ready,
        "{mode}: the child never got its topology up ({status})"
    );
    let expected = match mode.split(':').next().unwrap() {
        "cluster" => 12,
        "sentinel" => 12,
        _ => 24,
    };
    assert_eq!(pids.len(), expected, "{mode}: server + supervisor pids");
    let ours = |pid: u32| -> bool {
        // Only count a live process that still names one of the child's directories
        // (a recycled pid would not).
        alive(pid)
            && std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                let c = String::from_utf8_lossy(&c).into_owned();
                roots.iter().any(|r| c.contains(&*r.to_string_lossy()))
            })
    };
    wait_for(
        Duration::from_secs(10),
        "the child's servers to die",
        || {
            let left: Vec<u32> = pids.iter().copied().filter(|&p| ours(p)).collect();
            let dirs: Vec<_> = roots.iter().filter(|r| r.exists()).collect();
            if left.is_empty() && dirs.is_empty() {
                Ok(())
            } else {
                Err(format!("alive {left:?}, dirs {dirs:?}"))
            }
        },
    );
    println!(
        "teardown {mode}: child ended ({status}), everything gone {:?} later",
        started.elapsed()
    );
    let want_exit = match mode.split(':').nth(1).unwrap() {
        "exit" => Some(0),
        "panic" => Some(101),
        _ => None,
    };
    if let Some(code) = want_exit {
        assert_eq!(status.code(), Some(code), "{mode}: the child's exit status");
    } else {
        assert!(
            status.code().is_none(),
            "{mode}: the child must die by a signal, got {status}"
        );
    }
}

#[test]
#[parallel]
fn teardown_after_normal_exit() {
    assert_teardown("both:exit");
}

#[test]
#[parallel]
fn teardown_after_panic() {
    assert_teardown("cluster:panic");
}

#[test]
#[parallel]
fn teardown_after_abort() {
    assert_teardown("sentinel:abort");
}

#[test]
#[parallel]
fn teardown_after_sigkill() {
    assert_teardown("both:hang");
}

// --------------------------------------------------------------------- Java peers
// (with the `interop` feature: they start the Redisson peer)

#[cfg(feature = "interop")]
/// Subscribers of `channel` on one node: (plain `NUMSUB`, sharded `SHARDNUMSUB`).
fn subscribers(conn: &mut Connection, channel: &str) -> (i64, i64) {
    let plain: (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query(conn)
        .unwrap();
    // Redis 6.2 has no sharded pub/sub: nobody subscribes that way there.
    if !support::server().has_sharded_pubsub() {
        return (plain.1, 0);
    }
    let sharded: (String, i64) = redis::cmd("PUBSUB")
        .arg("SHARDNUMSUB")
        .arg(channel)
        .query(conn)
        .unwrap();
    (plain.1, sharded.1)
}

#[cfg(feature = "interop")]
/// A Redisson peer started from `yaml` locks `name` (the hash lands on the node
/// `master` names), a second Java thread waits, and the unlock message wakes it.
fn peer_hand_off(v: &str, yaml: &std::path::Path, name: &str, master: impl Fn() -> Connection) {
    let peer = peer::Peer::start_yaml(v, yaml, 30_000);
    peer.ok("a", &format!("lock {name}"));
    let field = peer.field(&peer.thread_id("a"));
    let hash: std::collections::BTreeMap<String, String> = redis::cmd("HGETALL")
        .arg(name)
        .query(&mut master())
        .unwrap();
    assert_eq!(
        hash,
        [(field, "1".to_owned())].into(),
        "{v}: the lock hash on the master"
    );
    let waiter = peer.send("b", &format!("trylock {name} 20000"));
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let subs = wait_for(
        Duration::from_secs(20),
        "the Java waiter to subscribe",
        || match subscribers(&mut master(), &channel) {
            (0, 0) => Err("no subscriber yet".to_owned()),
            s => Ok(s),
        },
    );
    peer.ok("a", &format!("unlock {name}"));
    let woke = Instant::now();
    // Far below the 30 s lease: only the unlock message can have woken it.
    assert_eq!(
        waiter.wait(Duration::from_secs(10)),
        Ok("true".to_owned()),
        "{v}"
    );
    peer.ok("b", &format!("unlock {name}"));
    let exists: bool = redis::cmd("EXISTS").arg(name).query(&mut master()).unwrap();
    assert!(!exists, "{v}: unlocked");
    println!(
        "peer {v} --yaml {}: hand-off in {:?}, waiter subscribed with {}",
        yaml.file_name().unwrap().to_string_lossy(),
        woke.elapsed(),
        if subs.1 > 0 {
            "SSUBSCRIBE"
        } else {
            "SUBSCRIBE"
        }
    );
    peer.quit();
}

#[cfg(feature = "interop")]
#[test]
#[parallel(cluster)]
fn redisson_peer_from_yaml_locks_on_the_cluster() {
    let c = cluster::shared();
    for v in peer::versions() {
        let name = support::unique(&format!("peer-cluster-{v}"));
        peer_hand_off(&v, &c.redisson_yaml(), &name, || {
            c.master_for_key(&name).conn()
        });
    }
}

#[cfg(feature = "interop")]
#[test]
#[parallel(sentinel)]
fn redisson_peer_from_yaml_locks_on_the_sentinel_master() {
    let s = sentinel::shared();
    for v in peer::versions() {
        let name = support::unique(&format!("peer-sentinel-{v}"));
        peer_hand_off(&v, &s.redisson_yaml(), &name, || s.master().conn());
    }
}
