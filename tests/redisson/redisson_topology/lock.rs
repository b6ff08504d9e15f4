//! `RLock`: mixed mutual exclusion, and unlock wake-ups both ways.

use std::thread;
use std::time::{Duration, Instant};

use crate::peer::Pending;
use crate::support::raw::lock_channel;
use crate::support::unique;

use super::{Topology, WAKE_BOUND, WATCHDOG_MS, await_waiters, java_ok, run_versions, subscribers};

/// Two Java and two Rust threads each run 300 non-atomic GET/SET increments under one
/// lock: the counter must be exactly 1,200.
pub(crate) fn mixed_mutual_exclusion_keeps_an_exact_counter<T: Topology>(t: &T) {
    run_versions(t, "mutual exclusion", WATCHDOG_MS, |peer| {
        const PER_THREAD: u64 = 300;
        let client = t.yaml_client(WATCHDOG_MS);
        let name = unique("ri-excl");
        let counter = unique("ri-counter");
        let started = Instant::now();
        let java: Vec<Pending> = (0..2)
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
                let mut conn = t.raw(&counter);
                let counter = &counter;
                s.spawn(move || {
                    for _ in 0..PER_THREAD {
                        let guard = lock.lock().unwrap();
                        // Deliberately non-atomic: only the lock protects it.
                        let value: Option<u64> =
                            redis::cmd("GET").arg(counter).query(&mut conn).unwrap();
                        redis::cmd("SET")
                            .arg(counter)
                            .arg(value.unwrap_or(0) + 1)
                            .exec(&mut conn)
                            .unwrap();
                        guard.unlock().unwrap();
                    }
                });
            }
        });
        for p in java {
            assert_eq!(java_ok(p).0, PER_THREAD.to_string());
        }
        let total: u64 = redis::cmd("GET")
            .arg(&counter)
            .query(&mut t.raw(&counter))
            .unwrap();
        assert_eq!(
            total,
            4 * PER_THREAD,
            "lost updates: mutual exclusion broken"
        );
        assert!(!client.get_lock(name.clone()).is_locked().unwrap());
        println!(
            "  Redisson {}: counter {total} in {:.1}s",
            peer.version(),
            started.elapsed().as_secs_f64()
        );
    });
}

/// Messages on `channel` while `f` runs (and until quiet for 300 ms), as a plain
/// `SUBSCRIBE` and as an `SSUBSCRIBE` on the channel's master hear them: which publish
/// command the other side used.
fn tap_both<T: Topology, R>(
    t: &T,
    channel: &str,
    f: impl FnOnce() -> R,
) -> (R, Vec<String>, Vec<String>) {
    // Redis 6.2 has no SSUBSCRIBE: its sharded tap hears nothing.
    let taps: &[&str] = if crate::support::server().has_sharded_pubsub() {
        &["SUBSCRIBE", "SSUBSCRIBE"]
    } else {
        &["SUBSCRIBE"]
    };
    let mut conns: Vec<redis::Connection> = taps
        .iter()
        .map(|command| {
            let mut conn = t.raw(channel);
            conn.send_packed_command(&redis::cmd(command).arg(channel).get_packed_command())
                .unwrap();
            let confirmation = conn.recv_response().unwrap();
            assert!(
                matches!(confirmation, redis::Value::Array(_)),
                "{confirmation:?}"
            );
            conn
        })
        .collect();
    let result = f();
    let mut heard = conns.iter_mut().map(|conn| {
        conn.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut got = Vec::new();
        loop {
            match conn.recv_response() {
                Ok(redis::Value::Array(parts)) => {
                    if let [
                        redis::Value::BulkString(kind),
                        _,
                        redis::Value::BulkString(payload),
                    ] = parts.as_slice()
                        && (kind == b"message" || kind == b"smessage")
                    {
                        got.push(String::from_utf8_lossy(payload).into_owned());
                    }
                }
                Ok(other) => panic!("unexpected {other:?}"),
                Err(e) if e.is_timeout() => break got,
                Err(e) => panic!("{e}"),
            }
        }
    });
    let plain = heard.next().unwrap_or_default();
    let sharded = heard.next().unwrap_or_default();
    (result, plain, sharded)
}

/// Rust holds, Java waits in `tryLock`, and the Rust unlock wakes it; then Java holds,
/// Rust waits, and the Java unlock wakes the Rust waiter. The Java unlock is tapped both
/// ways: that says which publish command this Redisson version uses here, and the Rust
/// waiter must wake for it either way.
pub(crate) fn wake_ups_both_ways_and_the_java_publish_command<T: Topology>(t: &T) {
    run_versions(t, "wake-ups both ways", WATCHDOG_MS, |peer| {
        let client = t.yaml_client(WATCHDOG_MS);
        let name = unique("ri-wake");
        let channel = lock_channel(&name);
        let lock = client.get_lock(name.clone());

        // Rust holds, Java waits.
        let guard = lock.lock().unwrap();
        let java = peer.send("w", &format!("trylock {name} 20000"));
        await_waiters(t, &channel, 1);
        let mut raw = t.raw(&channel);
        let java_sharded = subscribers(&mut raw, "SHARD", &channel);
        let java_plain = subscribers(&mut raw, "", &channel);
        let released = Instant::now();
        guard.unlock().unwrap();
        let (reply, at) = java_ok(java);
        assert_eq!(reply, "true");
        let java_woke = at.duration_since(released);
        assert!(java_woke < WAKE_BOUND, "Java woke after {java_woke:?}");

        // Java holds (it got the lock above), Rust waits.
        let (woke, plain, sharded) = thread::scope(|s| {
            let w = s.spawn(|| {
                let g = lock
                    .try_lock_for(Duration::from_secs(20))
                    .unwrap()
                    .expect("the Rust waiter got the lock");
                let at = Instant::now();
                g.unlock().unwrap();
                at
            });
            await_waiters(t, &channel, 1);
            let mut released = Instant::now();
            let ((), plain, sharded) = tap_both(t, &channel, || {
                released = Instant::now();
                peer.ok("w", &format!("unlock {name}"));
            });
            (w.join().unwrap().duration_since(released), plain, sharded)
        });
        assert!(woke < WAKE_BOUND, "Rust woke after {woke:?}");
        let command = match (plain.is_empty(), sharded.is_empty()) {
            (true, false) => "SPUBLISH",
            (false, true) => "PUBLISH",
            (false, false) => "PUBLISH and SPUBLISH",
            (true, true) => panic!("the Java unlock published nothing"),
        };
        println!(
            "  Redisson {}: waits with {java_sharded} SSUBSCRIBE + {java_plain} SUBSCRIBE; \
             unlocks with {command} (plain tap {plain:?}, sharded tap {sharded:?}); Java woke \
             {java_woke:?}, Rust woke {woke:?} after the other's unlock",
            peer.version()
        );
    });
}
