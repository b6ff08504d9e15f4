//! The tool on the other deployments: the shared local Redis Cluster (`--cluster`) and
//! sentinel set (`--sentinel` / `--master`), and both through Redisson YAML files
//! (`--redisson-yaml`), with locks held from Rust; the errors of wrong options.

use std::time::Instant;

use redmutex::{Client, ShardedSubscriptionMode};
use serde_json::Value;

use crate::support::cluster::{self, Cluster, key_for_slot};
use crate::support::deploy::Deployment;
use crate::support::sentinel::{self, MASTER_NAME, SentinelSet, SentinelSpec};
use crate::support::{eventually, supervised, unique};
use crate::{HANG, WAKE_BOUND, fails, ok, run, stderr, stdout};

/// One seed only, as `host:port`: the tool must learn the other masters itself.
fn one_seed(cluster: &Cluster) -> String {
    cluster.masters()[0].addr()
}

/// `status --json` with `connect` options, one JSON object per name.
fn status_with(connect: &[&str], names: &[&str]) -> Vec<Value> {
    let mut args = vec!["status", "--json"];
    args.extend_from_slice(connect);
    args.extend_from_slice(names);
    match serde_json::from_str(&ok(&args)).unwrap() {
        Value::Array(objects) => objects,
        other => panic!("not an array: {other}"),
    }
}

/// Asserts that `object` is the lock `name` held `count` times by one thread of `client`,
/// whose connection the tool found.
fn assert_held_by(object: &Value, name: &str, client: &Client, count: u64) {
    assert_eq!(object["name"], name, "{object}");
    assert_eq!(object["kind"], "lock", "{object}");
    let ttl = object["ttl_ms"].as_i64().unwrap();
    assert!((1..=30_000).contains(&ttl), "{object}");
    let holders = object["holders"].as_array().unwrap();
    assert_eq!(holders.len(), 1, "{object}");
    assert_eq!(holders[0]["client_id"], client.id(), "{object}");
    assert_eq!(holders[0]["count"], count, "{object}");
    assert_eq!(holders[0]["connected"], true, "{object}");
}

/// For each master, a fresh name whose slot it serves.
fn a_name_per_master(cluster: &Cluster, prefix: &str) -> Vec<String> {
    cluster
        .masters()
        .iter()
        .map(|master| {
            let slot = (0..cluster::SLOTS)
                .step_by(97)
                .find(|&s| master.serves(s))
                .unwrap();
            key_for_slot(slot, &format!("{prefix}:"))
        })
        .collect()
}

/// Subscribers of `channel` on `conn`, plain and sharded.
fn subscribers(conn: &mut redis::Connection, channel: &str) -> i64 {
    let (_, plain): (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query(conn)
        .unwrap();
    if !crate::support::server().has_sharded_pubsub() {
        return plain;
    }
    let (_, sharded): (String, i64) = redis::cmd("PUBSUB")
        .arg("SHARDNUMSUB")
        .arg(channel)
        .query(conn)
        .unwrap();
    plain + sharded
}

#[test]
fn status_reads_locks_on_every_cluster_shard_from_one_seed() {
    let cluster = cluster::shared();
    let client = cluster.client();
    let prefix = unique("cl-status");
    let names = a_name_per_master(cluster, &prefix);
    let locks: Vec<_> = names.iter().map(|n| client.get_lock(n.clone())).collect();
    let guards: Vec<_> = locks.iter().map(|l| l.lock().unwrap()).collect();
    let again = locks[1].lock().unwrap();
    let seed = one_seed(cluster);
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();

    let objects = status_with(&["--cluster", &seed], &name_refs);
    assert_eq!(objects.len(), names.len());
    for (i, (object, name)) in objects.iter().zip(&names).enumerate() {
        assert_held_by(object, name, &client, if i == 1 { 2 } else { 1 });
    }

    // Human output names the holder as `client-id : thread` and its connection.
    let text = ok(&["status", "--cluster", &seed, &names[2]]);
    assert!(text.contains("lock (Redisson RLock): held"), "{text}");
    assert!(
        text.contains(&format!("holder {} : ", client.id())),
        "{text}"
    );
    assert!(
        text.contains(&format!("connected (redmutex:{})", client.id())),
        "{text}"
    );

    // A scan covers every master, not only the seed.
    let pattern = format!("{prefix}:*");
    let scanned = status_with(&["--cluster", &seed, "--scan", &pattern], &[]);
    let found: Vec<&str> = scanned
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    let mut want = name_refs.clone();
    want.sort_unstable();
    assert_eq!(found, want);

    // doctor reports each master on its own.
    let out = run(&["doctor", "--json", "--cluster", &seed], "");
    let report: Value = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
    let nodes = report["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), cluster.masters().len(), "{report}");
    for node in nodes {
        let server = node["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["check"] == "server")
            .unwrap();
        assert!(
            server["found"]
                .as_str()
                .unwrap()
                .contains("in cluster mode, role master"),
            "{node}"
        );
    }

    drop(again);
    for guard in guards {
        guard.unlock().unwrap();
    }
    let free = status_with(&["--cluster", &seed], &name_refs);
    assert!(free.iter().all(|o| o["kind"] == "none"), "{free:?}");
}

#[test]
fn a_forced_unlock_on_the_cluster_wakes_sharded_and_plain_waiters() {
    let cluster = cluster::shared();
    let holder = cluster.client();
    let seed = one_seed(cluster);
    // `On` hears only SPUBLISH, `Off` only PUBLISH: each must be woken by the tool.
    // Redis 6.2 has no sharded pub/sub (`On` is refused at connect there): `Off` only.
    let modes: &[ShardedSubscriptionMode] = if crate::support::server().has_sharded_pubsub() {
        &[ShardedSubscriptionMode::On, ShardedSubscriptionMode::Off]
    } else {
        &[ShardedSubscriptionMode::Off]
    };
    for &mode in modes {
        let name = unique("cl-force");
        let guard = holder.get_lock(name.clone()).lock().unwrap();
        let waiter_client = cluster.client_with(|b| b.sharded_subscription_mode(mode));
        let lock = waiter_client.get_lock(name.clone());
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let got = lock.lock().map(|g| {
                g.unlock().unwrap();
            });
            tx.send(got.is_ok()).unwrap();
        });
        let mut raw = cluster.raw(&name);
        let channel = format!("redisson_lock__channel:{{{name}}}");
        eventually(HANG, "the waiter subscribes", || {
            subscribers(&mut raw, &channel) >= 1
        });
        let forced = Instant::now();
        let text = ok(&["unlock", "--cluster", &seed, "--force", "--yes", &name]);
        assert!(text.starts_with(&format!("unlocked `{name}`")), "{text}");
        assert_eq!(rx.recv_timeout(HANG), Ok(true), "{mode:?}");
        let woke = forced.elapsed();
        assert!(
            woke < WAKE_BOUND,
            "{mode:?}: woke after {woke:?}, not by a message"
        );
        waiter.join().unwrap();
        guard.detach();
    }
}

#[test]
fn status_finds_the_master_through_the_sentinels() {
    let set = sentinel::shared();
    let client = set.client();
    let name = unique("sn-status");
    let guard = client.get_lock(name.clone()).lock().unwrap();
    let sentinels = set
        .sentinel_ports()
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(",");
    let objects = status_with(
        &["--sentinel", &sentinels, "--master", MASTER_NAME],
        &[&name],
    );
    assert_held_by(&objects[0], &name, &client, 1);
    guard.unlock().unwrap();
}

#[test]
fn the_sentinels_own_acl_user_logs_in_from_the_sentinel_addresses() {
    let set = sentinel::shared();
    let user = unique("sentry").replace(':', "-");
    for i in 0..set.sentinel_ports().len() {
        let _: () = redis::cmd("ACL")
            .arg(&[
                "SETUSER",
                &user,
                "on",
                ">sentry-pw-2",
                "allchannels",
                "+@all",
            ])
            .query(&mut set.sentinel_conn(i))
            .unwrap();
    }
    let client = set.client();
    let name = unique("sn-acl");
    let guard = client.get_lock(name.clone()).lock().unwrap();
    let with = |password: &str| {
        set.sentinel_ports()
            .iter()
            .map(|p| format!("redis://{user}:{password}@127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let objects = status_with(
        &["--sentinel", &with("sentry-pw-2"), "--master", MASTER_NAME],
        &[&name],
    );
    assert_held_by(&objects[0], &name, &client, 1);
    let (code, text) = fails(&[
        "status",
        "--sentinel",
        &with("not-it-3"),
        "--master",
        MASTER_NAME,
        &name,
    ]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains(&format!("user `{user}`")) && !text.contains("not-it-3"),
        "{text}"
    );
    guard.unlock().unwrap();
}

#[test]
fn status_reads_a_redisson_yaml_for_a_cluster_and_a_sentinel_set() {
    let cluster = cluster::shared();
    let set = sentinel::shared();
    for (client, yaml) in [
        (cluster.client(), cluster.redisson_yaml()),
        (set.client(), set.redisson_yaml()),
    ] {
        let name = unique("yaml-status");
        let guard = client.get_lock(name.clone()).lock().unwrap();
        let yaml = yaml.to_str().unwrap().to_owned();
        let objects = status_with(&["--redisson-yaml", &yaml], &[&name]);
        assert_held_by(&objects[0], &name, &client, 1);
        guard.unlock().unwrap();
    }
}

#[test]
fn watch_follows_a_lock_on_every_cluster_shard() {
    let cluster = cluster::shared();
    let client = cluster.client();
    let seed = one_seed(cluster);
    let set_flags = |flags: &str| {
        for master in cluster.masters() {
            let _: () = redis::cmd("CONFIG")
                .arg("SET")
                .arg("notify-keyspace-events")
                .arg(flags)
                .query(&mut master.conn())
                .unwrap();
        }
    };
    // Notifications on the first master only: watch must turn them on where each name
    // lives, not trust the first node's setting.
    set_flags("");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg("KA")
        .query(&mut cluster.masters()[0].conn())
        .unwrap();
    for name in a_name_per_master(cluster, &unique("cl-watch")) {
        crate::watch_a_lock_life(&["--cluster", &seed], &client, &name, &["--notify"]);
    }
    for master in cluster.masters() {
        let (_, flags): (String, String) = redis::cmd("CONFIG")
            .arg("GET")
            .arg("notify-keyspace-events")
            .query(&mut master.conn())
            .unwrap();
        assert!(
            flags.contains('K') && (flags.contains('A') || flags.contains('x')),
            "{}: {flags:?}",
            master.addr()
        );
    }
    // With notifications off everywhere, by sampling every shard.
    set_flags("");
    for name in a_name_per_master(cluster, &unique("cl-watch-sampled")) {
        crate::watch_a_lock_life(
            &["--cluster", &seed],
            &client,
            &name,
            &["--sample-ms", "20"],
        );
    }
}

/// The sentinels of `set` as the tool's `--sentinel` value.
fn sentinel_list(set: &SentinelSet) -> String {
    set.sentinel_ports()
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether every sentinel still names `port` as the master.
fn all_name(set: &SentinelSet, port: u16) -> bool {
    (0..set.sentinel_ports().len()).all(|i| set.master_seen_by(i).map(|(_, p)| p) == Ok(port))
}

#[test]
fn status_waits_through_a_failover_for_the_master_the_sentinels_promote() {
    // A set of its own: its master dies. A long down-after keeps the sentinels naming
    // the dead master for seconds, so the runs below meet the failover under way.
    let set = SentinelSet::start(SentinelSpec {
        replicas: 1,
        down_after_ms: 5000,
        ..SentinelSpec::default()
    });
    let client = set.client();
    let name = unique("sn-failover");
    // Sentinel mode checks replica sync by default: the hold is on the replica too.
    let guard = client.get_lock(name.clone()).lock().unwrap();
    let sentinels = sentinel_list(&set);
    let old = set.master();
    set.kill(&old);

    // Asked not to wait, the tool says what it met. Judged only if the sentinels still
    // named the dead master after the run (a starved machine may have let them move on).
    let out = run(
        &[
            "status",
            "--sentinel",
            &sentinels,
            "--master",
            MASTER_NAME,
            "--failover-wait-ms",
            "0",
            &name,
        ],
        "",
    );
    if all_name(&set, old.port) {
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let text = stderr(&out);
        assert!(
            text.contains("named no reachable master") && text.contains(&old.addr()),
            "{text}"
        );
    }

    // With the default wait, it keeps asking until a replica is promoted, and reads the
    // lock there (the watchdog renews it on the new master). The holder's connection is
    // not judged: the client may not have reached the new master yet.
    let during = all_name(&set, old.port);
    let started = Instant::now();
    let out = run(
        &[
            "status",
            "--json",
            "--sentinel",
            &sentinels,
            "--master",
            MASTER_NAME,
            &name,
        ],
        "",
    );
    assert!(
        out.status.success(),
        "status during the failover failed after {:?}: {}",
        started.elapsed(),
        stderr(&out)
    );
    let objects: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let holders = objects[0]["holders"].as_array().unwrap();
    assert_eq!(holders.len(), 1, "{objects}");
    assert_eq!(holders[0]["client_id"], client.id(), "{objects}");
    assert_eq!(holders[0]["count"], 1, "{objects}");
    assert_ne!(set.master().port, old.port);
    if during {
        // It started while every sentinel named the dead master: it must have waited.
        assert!(stderr(&out).contains("waiting up to"), "{}", stderr(&out));
    }
    guard.unlock().unwrap();
}

#[test]
fn wrong_master_names_and_unreachable_seeds_fail_in_one_line() {
    let set = sentinel::shared();
    let sentinels = set.sentinel_urls().join(",");
    let (code, text) = fails(&[
        "status",
        "--sentinel",
        &sentinels,
        "--master",
        "nosuch",
        "x",
    ]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("no sentinel monitors a master named \"nosuch\"")
            && text.contains("--master"),
        "{text}"
    );

    // Nothing listens on a port just handed out and closed again.
    let dead = format!("127.0.0.1:{}", supervised::free_port());
    let (code, text) = fails(&["status", "--sentinel", &dead, "--master", MASTER_NAME, "x"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("cannot reach any sentinel") && text.contains(&dead),
        "{text}"
    );

    let secret = format!("redis://ops:s3cret@{dead}");
    let (code, text) = fails(&["status", "--cluster", &secret, "x"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("cannot reach any cluster seed") && text.contains(&dead),
        "{text}"
    );
    assert!(!text.contains("s3cret"), "{text}");

    // A plain server is neither a cluster node nor a sentinel.
    let plain = crate::support::TestServer::start();
    let addr = plain.url();
    let (code, text) = fails(&["status", "--cluster", &addr, "x"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("is not a cluster node"), "{text}");
    let (code, text) = fails(&["status", "--sentinel", &addr, "--master", MASTER_NAME, "x"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("is not a sentinel"), "{text}");

    // Options of two modes, or a sentinel without its master name, are usage errors.
    let out = run(&["status", "--url", &addr, "--cluster", &dead, "x"], "");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = run(&["status", "--sentinel", &sentinels, "x"], "");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let (code, text) = fails(&[
        "status",
        "--redisson-yaml",
        "/nonexistent/redisson.yaml",
        "x",
    ]);
    assert_eq!(code, Some(2), "{text}");
}
