//! `RSemaphore` and `RPermitExpirableSemaphore` against Redisson's: wake-ups and permits
//! crossing the languages (scenario 13), and a multi-permit waiter woken by Java's
//! single-permit messages (scenario 20).

use std::collections::BTreeSet;
use std::thread;
use std::time::{Duration, Instant};

use redmutex::{Client, PermitId};
use serial_test::parallel;

use crate::peer::Peer;
use crate::support::raw::{
    calls, exists, numsub, permit_leases, permit_timeouts_key, semaphore_channel,
};
use crate::support::{TestServer, eventually, unique};
use crate::{HANG, WATCHDOG_MS, assert_woken_by_message, ms, run_versions, wait_subscribers};

/// The members of a permit-expirable semaphore's `{name}:timeout` zset, as permit ids.
fn acquired_ids(conn: &mut redis::Connection, name: &str) -> BTreeSet<PermitId> {
    permit_leases(conn, name)
        .into_iter()
        .map(|(m, _)| PermitId::from_bytes(m.try_into().expect("a permit id is 16 bytes")))
        .collect()
}

/// Semaphore and permit-expirable semaphore: a release on one side wakes the other side's
/// blocked acquire, and permits taken on one side are released on the other.
#[test]
#[parallel]
fn scenario_13_semaphores_across_sides() {
    run_versions(13, semaphores_across_sides);
}

fn semaphores_across_sides(v: &str) {
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();
    semaphore_part(v, &peer, &client, &mut raw);
    permit_semaphore_part(v, &peer, &client, &mut raw);
    peer.quit();
}

fn semaphore_part(v: &str, peer: &Peer, client: &Client, raw: &mut redis::Connection) {
    let name = unique("s13-sem");
    let chan = semaphore_channel(&name);
    let sem = client.get_semaphore(name.clone());
    let available = |raw: &mut redis::Connection, n: i64| {
        assert_eq!(sem.available_permits().unwrap(), n, "rust available");
        assert_eq!(
            peer.num("x", &format!("sem.available {name}")),
            n,
            "java available"
        );
        let stored: Option<i64> = redis::cmd("GET").arg(&name).query(raw).unwrap();
        assert_eq!(stored, Some(n), "stored count");
    };

    assert!(peer.bool("j", &format!("sem.trysetpermits {name} 2")));
    assert!(!sem.try_set_permits(5).unwrap());
    available(raw, 2);

    // Rust takes both; a Java acquire blocks until a Rust release.
    sem.acquire_many(2).unwrap().detach();
    available(raw, 0);
    assert!(!peer.bool("j", &format!("sem.tryacquire {name} 1 -1")));
    let java = peer.send("jw", &format!("sem.acquire {name} 1"));
    wait_subscribers(raw, &chan, 1);
    assert_eq!(
        java.try_wait(Duration::ZERO),
        None,
        "java acquired 0 permits"
    );
    let released = Instant::now();
    sem.release().unwrap();
    let (reply, at) = java.wait_timed(HANG);
    assert_eq!(reply, Ok(String::new()));
    let latency = at.duration_since(released);
    println!(
        "scenario 13 version {v}: semaphore: java acquire returned {:.2} ms after the rust release",
        ms(latency)
    );
    assert_woken_by_message("java waiter", latency);
    available(raw, 0);

    // A Rust acquire blocks until the Java thread releases its permit.
    eventually(HANG, "the java waiter unsubscribed", || {
        numsub(raw, &chan) == 0
    });
    thread::scope(|s| {
        let waiter = s.spawn(|| {
            let permit = sem.try_acquire_for(HANG).unwrap();
            (permit, Instant::now())
        });
        wait_subscribers(raw, &chan, 1);
        assert!(!waiter.is_finished(), "rust acquired 0 permits");
        let released = Instant::now();
        peer.ok("jw", &format!("sem.release {name} 1"));
        let (permit, at) = waiter.join().unwrap();
        let permit = permit.expect("rust acquire timed out");
        let latency = at.duration_since(released);
        println!(
            "scenario 13 version {v}: semaphore: rust acquire returned {:.2} ms after the java \
             release was sent",
            ms(latency)
        );
        assert_woken_by_message("rust waiter", latency);
        permit.detach();
    });
    available(raw, 0);
    // Rust holds two permits; Java gives them back.
    peer.ok("j", &format!("sem.release {name} 2"));
    available(raw, 2);
}

fn permit_semaphore_part(v: &str, peer: &Peer, client: &Client, raw: &mut redis::Connection) {
    let name = unique("s13-pes");
    let chan = semaphore_channel(&name);
    let pes = client.get_permit_expirable_semaphore(name.clone());
    let available = |raw: &mut redis::Connection, n: i64, acquired: &[PermitId]| {
        assert_eq!(pes.available_permits().unwrap(), n, "rust available");
        assert_eq!(
            peer.num("x", &format!("pes.available {name}")),
            n,
            "java available"
        );
        assert_eq!(pes.acquired_permits().unwrap(), acquired.len() as i64);
        assert_eq!(
            acquired_ids(raw, &name),
            acquired.iter().copied().collect::<BTreeSet<_>>(),
            "acquired permit ids in the zset"
        );
    };
    let java_id = |reply: String| -> PermitId {
        assert!(
            reply.len() == 32
                && reply
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "java permit id {reply:?}"
        );
        let id: PermitId = reply.parse().unwrap();
        assert_eq!(id.to_string(), reply);
        id
    };

    assert!(peer.bool("j", &format!("pes.trysetpermits {name} 2")));
    assert!(!pes.try_set_permits(9).unwrap());
    available(raw, 2, &[]);
    let rust_id = pes.acquire().unwrap();
    available(raw, 1, &[rust_id]);
    let java_id1 = java_id(peer.ok("j", &format!("pes.acquire {name}")));
    available(raw, 0, &[rust_id, java_id1]);
    assert_eq!(
        peer.ok("j", &format!("pes.tryacquire {name} -1")),
        "null",
        "java acquired from an empty semaphore"
    );

    // A Java acquire blocks; Rust releases the Java-created permit.
    let java = peer.send("pw", &format!("pes.acquire {name}"));
    wait_subscribers(raw, &chan, 1);
    assert_eq!(java.try_wait(Duration::ZERO), None);
    let released = Instant::now();
    pes.release(java_id1).unwrap();
    let (reply, at) = java.wait_timed(HANG);
    let java_id2 = java_id(reply.expect("java pes.acquire"));
    let latency = at.duration_since(released);
    println!(
        "scenario 13 version {v}: permit semaphore: java acquire returned {:.2} ms after rust \
         released java's permit",
        ms(latency)
    );
    assert_woken_by_message("java waiter", latency);
    available(raw, 0, &[rust_id, java_id2]);
    assert!(!pes.try_release(java_id1).unwrap(), "released twice");
    assert!(!peer.bool("j", &format!("pes.tryrelease {name} {java_id1}")));
    available(raw, 0, &[rust_id, java_id2]);

    // A Rust acquire blocks; Java releases the Rust-created permit.
    eventually(HANG, "the java waiter unsubscribed", || {
        numsub(raw, &chan) == 0
    });
    let rust_id2 = thread::scope(|s| {
        let waiter = s.spawn(|| {
            let id = pes.try_acquire_for(HANG).unwrap();
            (id, Instant::now())
        });
        wait_subscribers(raw, &chan, 1);
        assert!(
            !waiter.is_finished(),
            "rust acquired from an empty semaphore"
        );
        let released = Instant::now();
        peer.ok("j", &format!("pes.release {name} {rust_id}"));
        let (id, at) = waiter.join().unwrap();
        let latency = at.duration_since(released);
        println!(
            "scenario 13 version {v}: permit semaphore: rust acquire returned {:.2} ms after \
             java's release of rust's permit was sent",
            ms(latency)
        );
        assert_woken_by_message("rust waiter", latency);
        id.expect("rust acquire timed out")
    });
    available(raw, 0, &[java_id2, rust_id2]);
    assert!(!peer.bool("j", &format!("pes.tryrelease {name} {rust_id}")));
    let again = pes.release(rust_id);
    assert!(
        matches!(&again, Err(e) if e.is_not_held()),
        "rust release of a permit java released: {again:?}"
    );
    available(raw, 0, &[java_id2, rust_id2]);

    // Each side releases the other's permit: the counts follow on both sides.
    peer.ok("j", &format!("pes.release {name} {rust_id2}"));
    available(raw, 1, &[java_id2]);
    pes.release(java_id2).unwrap();
    available(raw, 2, &[]);
    assert!(!exists(raw, &permit_timeouts_key(&name)));
}

/// Issue 14, bug 1, against Java: a permit-expirable semaphore without permits and a
/// Rust waiter for three. Java adds one permit three times (each published as "1", the
/// number added), then, with its three permits back out, releases them one id at a
/// time through `release(List)` (each published as "1", the number released). Both
/// times the Rust waiter retries on every message and gets its permits on the third;
/// its bounded wait never runs out (that would be `None`).
#[test]
#[parallel]
fn scenario_20_a_multi_permit_waiter_wakes_on_java_single_permit_messages() {
    run_versions(20, multi_permit_waiter_wakes_on_java_messages);
}

fn multi_permit_waiter_wakes_on_java_messages(v: &str) {
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();
    let name = unique("s20-pes");
    let chan = semaphore_channel(&name);
    let pes = client.get_permit_expirable_semaphore(name.clone());
    assert!(peer.bool("j", &format!("pes.trysetpermits {name} 0")));
    // Load the acquire script, so that the call counts below count no NOSCRIPT round.
    assert!(pes.try_acquire().unwrap().is_none());
    let mut wait_for_three = |java: &dyn Fn()| {
        thread::scope(|s| {
            let before = calls(&mut raw, "evalsha");
            let waiter = s.spawn(|| pes.try_acquire_many_for(3, HANG).unwrap());
            // Its first attempt and its retry after subscribing: it sleeps now.
            eventually(HANG, "the waiter's retry", || {
                calls(&mut raw, "evalsha") >= before + 2
            });
            wait_subscribers(&mut raw, &chan, 1);
            java();
            waiter.join().unwrap().expect("woken by the third message")
        })
    };

    let ids = wait_for_three(&|| {
        for _ in 0..3 {
            peer.ok("j", &format!("pes.addpermits {name} 1"));
        }
    });
    pes.release_many(&ids).unwrap();
    let java_ids = peer.ok("j", &format!("pes.acquiremany {name} 3"));
    let ids = wait_for_three(&|| {
        for id in java_ids.split(',') {
            peer.ok("j", &format!("pes.releasemany {name} {id}"));
        }
    });
    assert_eq!(ids.len(), 3);
    assert_eq!(pes.available_permits().unwrap(), 0);
    println!("scenario 20 version {v}: the rust waiter for 3 woke on single-permit messages");
    peer.quit();
}
