//! redmutex and real Redisson (4.7.0 and 3.23.5, or `REDMUTEX_REDISSON_VERSIONS`) on the
//! same local sentinel set, both sides configured by one Redisson YAML file: the file
//! the harness writes for the set, loaded by the Java peer and by
//! `Config::from_redisson_yaml`. Mixed mutual exclusion, and unlock wake-ups both ways
//! on the master's plain pub/sub.

#[path = "support/peer.rs"]
mod peer;
#[path = "support/mod.rs"]
mod support;

use std::thread;
use std::time::{Duration, Instant};

use redmutex::{Client, Config};
use serial_test::serial;

use peer::Peer;
use support::raw::{get, lock_channel, numsub};
use support::sentinel::shared;
use support::unique;

/// Far below the 30 s lease: a wake-up within it came from the unlock message.
const WAKE_BOUND: Duration = Duration::from_secs(5);
const WATCHDOG_MS: u64 = 30_000;

fn rust_client() -> Client {
    let path = shared().redisson_yaml();
    Client::new(Config::from_redisson_yaml(path.to_str().unwrap()).unwrap()).unwrap()
}

fn await_subscribers(channel: &str, n: i64) {
    let mut raw = shared().master().conn();
    support::eventually(
        WAKE_BOUND,
        &format!("{n} subscriber(s) of {channel}"),
        || numsub(&mut raw, channel) == n,
    );
}

/// 2 Java threads and 2 Rust threads each run non-atomic GET/SET increments under one
/// lock: the counter must be exact.
#[test]
#[serial(sentinel)]
fn mixed_mutual_exclusion_and_wake_ups_both_ways() {
    const PER_THREAD: u64 = 300;
    for v in peer::versions() {
        let set = shared();
        let peer = Peer::start_yaml(&v, &set.redisson_yaml(), WATCHDOG_MS);
        let client = rust_client();
        let name = unique("rs-lock");
        let counter = unique("rs-counter");
        let java: Vec<_> = (0..2)
            .map(|i| {
                peer.send(
                    &format!("incr{i}"),
                    &format!("incr {name} {counter} {PER_THREAD}"),
                )
            })
            .collect();
        thread::scope(|s| {
            for _ in 0..2 {
                let lock = client.get_lock(name.clone());
                let counter = &counter;
                s.spawn(move || {
                    let mut raw = shared().master().conn();
                    for _ in 0..PER_THREAD {
                        let guard = lock.lock().unwrap();
                        let n = get(&mut raw, counter).unwrap_or(0);
                        let _: () = redis::cmd("SET")
                            .arg(counter)
                            .arg(n + 1)
                            .query(&mut raw)
                            .unwrap();
                        guard.unlock().unwrap();
                    }
                });
            }
        });
        for j in java {
            j.wait(Duration::from_secs(120)).unwrap();
        }
        let total = get(&mut set.master().conn(), &counter);
        assert_eq!(total, Some(4 * PER_THREAD as i64), "version {v}");

        // Rust holds, a Java waiter is woken by the Rust unlock.
        let name = unique("rs-wake");
        let guard = client.get_lock(&name).lock().unwrap();
        let waiter = peer.send("w", &format!("lock {name}"));
        await_subscribers(&lock_channel(&name), 1);
        let released = Instant::now();
        guard.unlock().unwrap();
        let (_, woke) = waiter.wait_timed(WAKE_BOUND * 2);
        let java_latency = woke - released;
        assert!(java_latency < WAKE_BOUND, "version {v}: {java_latency:?}");

        // Java holds (the waiter above), a Rust waiter is woken by the Java unlock.
        let lock = client.get_lock(&name);
        let rust_latency = thread::scope(|s| {
            let rust = s.spawn(|| {
                let guard = lock.lock().unwrap();
                let at = Instant::now();
                guard.unlock().unwrap();
                at
            });
            await_subscribers(&lock_channel(&name), 1);
            let sent = Instant::now();
            peer.ok("w", &format!("unlock {name}"));
            rust.join().unwrap() - sent
        });
        assert!(rust_latency < WAKE_BOUND, "version {v}: {rust_latency:?}");
        println!(
            "redisson {v} on sentinel, one YAML: counter exact ({} increments); java woken \
             {java_latency:?} after the rust unlock, rust woken {rust_latency:?} after the \
             java unlock was sent",
            4 * PER_THREAD
        );
        peer.quit();
    }
}
