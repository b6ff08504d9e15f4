//! `RedLock` against Redisson's `RedissonRedLock` over the same five servers: a majority
//! held on one side excludes the other, each side's members are plain RLock hashes the
//! other reads, partial grants are released, and a waiting Rust RedLock is woken by the
//! Java unlock (scenario 21).

use std::thread;
use std::time::Duration;

use serial_test::parallel;

use crate::peer::Peer;
use crate::support::raw::{exists, hgetall, lock_channel};
use crate::support::{TestServer, unique};
use crate::{HANG, WATCHDOG_MS, run_versions, wait_subscribers};

const NODES: usize = 5;

/// RedLock: a Java RedLock on all five servers excludes a Rust RedLock; a Java RedLock
/// on three (two held by a Rust client) excludes it too, and the Rust side's partial
/// grants are released; the other way round; and a waiting Rust RedLock takes the lock
/// when the Java one unlocks.
#[test]
#[parallel]
fn scenario_21_red_locks_across_sides() {
    run_versions(21, red_locks_across_sides);
}

fn red_locks_across_sides(v: &str) {
    let servers: Vec<TestServer> = (0..NODES).map(|_| TestServer::start()).collect();
    let mut raws: Vec<redis::Connection> = servers.iter().map(TestServer::conn).collect();
    let clients: Vec<redmutex::Client> = servers.iter().map(TestServer::client).collect();
    let peer = Peer::start(v, &servers[0].url(), WATCHDOG_MS);
    let mut java_ids = vec![peer.client_id().to_owned()];
    for (i, s) in servers.iter().enumerate().skip(1) {
        let id = peer.ok("j", &format!("client r{i} {}", s.url()));
        java_ids.push(id);
    }
    let name = unique("s19");
    // The Java member list: the name on the main client (server 0), then r1..r4.
    let members = (0..NODES)
        .map(|i| {
            if i == 0 {
                name.clone()
            } else {
                format!("{name}@r{i}")
            }
        })
        .collect::<Vec<_>>()
        .join(",");
    let red = clients[0].get_red_lock(clients.iter().map(|c| c.get_lock(name.clone())));
    let field_of = |raw: &mut redis::Connection, prefix: &str| {
        hgetall(raw, &name)
            .keys()
            .any(|f| f.starts_with(&format!("{prefix}:")))
    };

    // Java holds all five: Rust gets nothing, and leaves nothing behind.
    peer.ok("j", &format!("redlock.lock {members}"));
    for (i, raw) in raws.iter_mut().enumerate() {
        assert!(field_of(raw, &java_ids[i]), "java's field on node {i}");
    }
    thread::scope(|s| {
        let got = s.spawn(|| {
            red.try_lock_for(Duration::from_millis(300))
                .unwrap()
                .is_some()
        });
        assert!(
            !got.join().unwrap(),
            "rust RedLock acquired a java-held lock"
        );
    });
    // A waiting Rust RedLock is woken by Java's unlock.
    thread::scope(|s| {
        let w = s.spawn(|| red.try_lock_for(HANG).unwrap().map(|g| g.detach()));
        for raw in raws.iter_mut().take(3) {
            wait_subscribers(raw, &lock_channel(&name), 1);
        }
        peer.ok("j", &format!("redlock.unlock {members}"));
        assert!(w.join().unwrap().is_some(), "woken by the java unlock");
    });
    // The Rust thread that took it (on a majority: the round after the first wake-up
    // may find some members not yet released) has ended; its holds stay, so Java is
    // refused and releases whatever it got.
    let rust_nodes = (0..NODES)
        .filter(|&i| field_of(&mut raws[i], clients[i].id()))
        .count();
    assert!(rust_nodes >= 3, "rust holds {rust_nodes} nodes");
    assert!(!peer.bool("j", &format!("redlock.trylock {members} 300")));
    for (i, raw) in raws.iter_mut().enumerate() {
        assert!(!field_of(raw, &java_ids[i]), "no java field on node {i}");
    }
    for c in &clients {
        c.get_lock(name.clone()).force_unlock().unwrap();
    }

    // Nodes 3 and 4 held by Rust RLocks on this thread: Java's RedLock still gets a
    // majority (nodes 0 to 2). A Rust RedLock on another thread (another owner) is then
    // refused everywhere.
    let blockers: Vec<_> = (3..NODES)
        .map(|i| clients[i].get_lock(name.clone()).lock().unwrap())
        .collect();
    assert!(peer.bool("j", &format!("redlock.trylock {members} 1000")));
    for (i, raw) in raws.iter_mut().enumerate().take(3) {
        assert!(field_of(raw, &java_ids[i]), "java holds node {i}");
    }
    thread::scope(|s| {
        let got = s.spawn(|| red.try_lock().unwrap().is_some());
        assert!(!got.join().unwrap());
    });
    peer.ok("j", &format!("redlock.unlock {members}"));
    drop(blockers);
    for (i, raw) in raws.iter_mut().enumerate() {
        assert!(!exists(raw, &name), "node {i} empty");
    }

    // Rust holds three (two held by Java), Java's RedLock is refused and releases
    // what it got; then a Rust guard's unlock lets Java in.
    // (A plain lock command takes no alias: a MultiLock holds nodes 0 and 1 on Java.)
    let first_two = format!("{name},{name}@r1");
    peer.ok("h", &format!("multi.lock {first_two}"));
    let guard = red.try_lock().unwrap().expect("three of five free");
    assert_eq!(guard.granted(), 3);
    assert!(!peer.bool("j", &format!("redlock.trylock {members} 300")));
    peer.ok("h", &format!("multi.unlock {first_two}"));
    for (i, raw) in raws.iter_mut().enumerate() {
        assert!(!field_of(raw, &java_ids[i]), "java released node {i}");
    }
    let java = peer.send("j", &format!("redlock.trylock {members} 60000"));
    guard.unlock().unwrap();
    assert_eq!(java.wait(HANG), Ok("true".to_owned()));
    peer.ok("j", &format!("redlock.unlock {members}"));
}
