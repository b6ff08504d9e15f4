//! `MultiLock` against Redisson's `RedissonMultiLock` over the same names: each excludes
//! the other, partial grants are released, and a waiting one is woken by the other's
//! unlock (scenario 18).

use std::thread;
use std::time::Duration;

use serial_test::parallel;

use crate::peer::Peer;
use crate::support::raw::{exists, lock_channel, numsub};
use crate::support::{TestServer, eventually, unique};
use crate::{HANG, WATCHDOG_MS, run_versions, wait_subscribers};

/// MultiLock: a Java MultiLock over a, b, c excludes Rust MultiLocks that share a
/// member, whose partial grants are released; a Rust MultiLock that waits holds its
/// first member and takes the shared one at the Java unlock; then the other way round.
#[test]
#[parallel]
fn scenario_18_multi_locks_across_sides() {
    run_versions(18, multi_locks_across_sides);
}

fn multi_locks_across_sides(v: &str) {
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();
    let [a, b, c, x, y] = ["a", "b", "c", "x", "y"].map(|n| unique(&format!("s18-{n}")));
    let multi = |names: &[&String]| {
        client.get_multi_lock(names.iter().map(|n| client.get_lock((*n).clone()).into()))
    };

    peer.ok("j", &format!("multi.lock {a},{b},{c}"));
    thread::scope(|s| {
        let rust = multi(&[&x, &b]);
        let got = s
            .spawn(move || rust.try_lock().unwrap().is_some())
            .join()
            .unwrap();
        assert!(!got, "rust MultiLock acquired a java-held member");
        assert!(!exists(&mut raw, &x), "the partial grant was released");
        let rust = multi(&[&c]);
        let got = s.spawn(move || {
            rust.try_lock_for(Duration::from_millis(200))
                .unwrap()
                .is_some()
        });
        assert!(!got.join().unwrap());

        // A waiting Rust MultiLock holds x while it waits for a.
        let rust = multi(&[&x, &a]);
        let w = s.spawn(move || rust.try_lock_for(HANG).unwrap().map(|g| g.detach()));
        wait_subscribers(&mut raw, &lock_channel(&a), 1);
        assert!(exists(&mut raw, &x));
        peer.ok("j", &format!("multi.unlock {a},{b},{c}"));
        assert!(w.join().unwrap().is_some(), "woken by the java unlock");
    });
    // The Rust thread that took x and a has ended; its holds stay until forced below.
    assert!(!peer.bool("j", &format!("multi.trylock {y},{x} -1")));
    assert!(!exists(&mut raw, &y), "java released its partial grant");
    // The Rust waiter's subscription to a's channel lingers briefly after it left.
    eventually(HANG, "no subscriber of a", || {
        numsub(&mut raw, &lock_channel(&a)) == 0
    });
    let java = peer.send("w", &format!("multi.lock {b},{a}"));
    wait_subscribers(&mut raw, &lock_channel(&a), 1);
    assert!(exists(&mut raw, &b), "java holds b while it waits for a");
    assert!(client.get_lock(a.clone()).force_unlock().unwrap());
    assert_eq!(java.wait(HANG), Ok(String::new()));
    assert!(client.get_lock(x.clone()).force_unlock().unwrap());

    // And a Rust MultiLock guard's unlock wakes a waiting Java one.
    peer.ok("w", &format!("multi.unlock {b},{a}"));
    let rust = multi(&[&a, &b, &c]);
    let guard = rust.lock().unwrap();
    let java = peer.send("w", &format!("multi.trylock {c},{y} 60000"));
    wait_subscribers(&mut raw, &lock_channel(&c), 1);
    guard.unlock().unwrap();
    assert_eq!(java.wait(HANG), Ok("true".to_owned()));
    peer.ok("w", &format!("multi.unlock {c},{y}"));
    for n in [&a, &b, &c, &x, &y] {
        assert!(!exists(&mut raw, n), "{n} left held");
    }
    peer.quit();
}
