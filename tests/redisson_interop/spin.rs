//! `RSpinLock` against Redisson's (3.15+, so both tested versions): no messages either
//! way, each side's poller sees the other's release, and an `RLock` waiter on a
//! spin-locked name (scenario 16).

use std::thread;
use std::time::Duration;

use redmutex::BackOff;
use serial_test::parallel;

use crate::peer::Peer;
use crate::support::raw::{exists, lock_channel, numsub};
use crate::support::{TestServer, eventually, tap, unique};
use crate::{HANG, run_versions, wait_subscribers};

/// The Java peer's watchdog here: a spin lock it holds has a TTL of at most this, which
/// bounds how long an `RLock` waiter sleeps without a message.
const SPIN_WATCHDOG_MS: u64 = 1_500;

/// Spin lock: Java and Rust spin locks exclude each other and take the lock after the
/// other side's release by polling, with nothing published on the lock's channel; a
/// redmutex `RLock` waiter on a name a Java spin lock holds is not told of the release
/// and takes the lock when the holder's lease would have ended, as a Redisson `RLock`
/// waiter does.
#[test]
#[parallel]
fn scenario_16_spin_lock_across_sides() {
    run_versions(16, spin_lock_across_sides);
}

fn spin_lock_across_sides(v: &str) {
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), SPIN_WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();
    let name = unique("s16-spin");
    let spin = client
        .get_spin_lock(name.clone())
        .with_backoff(BackOff::Constant(Duration::from_millis(5)));
    let plain = client.get_lock(name.clone());

    let ((), messages) = tap(&server, &lock_channel(&name), || {
        // Java holds; a Rust spin waiter polls until the Java release.
        peer.ok("j", &format!("spin.lock {name}"));
        thread::scope(|s| {
            assert!(
                s.spawn(|| spin.try_lock().unwrap().is_none())
                    .join()
                    .unwrap()
            );
            let w = s.spawn(|| {
                spin.try_lock_for(HANG)
                    .unwrap()
                    .map(|g| g.unlock().unwrap())
            });
            assert_eq!(
                numsub(&mut raw, &lock_channel(&name)),
                1,
                "only the tap listens"
            );
            peer.ok("j", &format!("spin.unlock {name}"));
            assert!(w.join().unwrap().is_some(), "rust spin waiter took over");
        });

        // Rust holds; a Java spin waiter polls until the Rust release.
        let guard = spin.lock().unwrap();
        assert!(!peer.bool("j", &format!("spin.trylock {name} 0")));
        let java = peer.send("w", &format!("spin.lock {name}"));
        guard.unlock().unwrap();
        assert_eq!(
            java.wait(HANG),
            Ok(String::new()),
            "java spin waiter took over"
        );
        peer.ok("w", &format!("spin.unlock {name}"));
        assert!(!exists(&mut raw, &name));
    });
    assert!(
        messages.is_empty(),
        "spin locks publish nothing: {messages:?}"
    );

    // Java's spin lock holds; a redmutex RLock waiter sleeps on the channel and, told
    // nothing, takes the lock at its TTL bound after the spin release.
    peer.ok("j", &format!("spin.lock {name}"));
    let ((), messages) = tap(&server, &lock_channel(&name), || {
        thread::scope(|s| {
            let w = s.spawn(|| plain.try_lock_for(HANG).unwrap().map(|g| g.detach()));
            wait_subscribers(&mut raw, &lock_channel(&name), 2);
            peer.ok("j", &format!("spin.unlock {name}"));
            assert!(
                w.join().unwrap().is_some(),
                "the RLock waiter took the lock"
            );
        });
    });
    assert!(
        messages.is_empty(),
        "nothing woke the RLock waiter: {messages:?}"
    );
    assert!(plain.force_unlock().unwrap());
    eventually(HANG, "no subscribers left", || {
        numsub(&mut raw, &lock_channel(&name)) == 0
    });
    peer.quit();
}
