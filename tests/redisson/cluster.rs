//! Interoperability with real Redisson clients on a Redis Cluster: Redisson 4.7.0 and
//! 3.23.5 (`REDMUTEX_REDISSON_VERSIONS`), each as a Java peer (`tests/interop`, driven
//! by the harness's `peer` module), and redmutex clients, both configured by one
//! `clusterServersConfig` YAML file naming the local 3 + 3 cluster (`support::cluster`,
//! started once for this binary).
//!
//! The scenarios are the ones every topology runs (`redisson_topology/`): mutual
//! exclusion, wake-ups both ways (and which publish command Redisson uses on a
//! cluster), fair-lock order, read-write lock / semaphore / latch wake-ups, and a
//! SIGKILL failover of a master with both sides holding and waiting. Scenarios run one
//! at a time, with the sentinel scenarios (`#[serial(redisson)]`): each starts a JVM,
//! and two cores are shared with six redis-servers.
//!
//! Needs `redis-server`, `redis-cli`, a JDK and Maven on PATH (the peer is built on
//! first use).

use std::path::Path;

use crate::redisson_topology::Topology;
use crate::support::cluster::{self, Cluster, key_for_slot, key_slot};

impl Topology for Cluster {
    type Disruption<'a> = cluster::Disruption<'a>;

    fn label(&self) -> &'static str {
        "cluster"
    }

    fn root(&self) -> &Path {
        Cluster::root(self)
    }

    fn redisson_yaml_text(&self) -> String {
        Cluster::redisson_yaml_text(self)
    }

    /// Both in one slot of the first master.
    fn colocated(&self, base: &str) -> [String; 2] {
        let master = self.masters().remove(0);
        let slot = master.slots[0].start() + 1;
        let names = [format!("{base}:r"), format!("{base}:j")].map(|n| key_for_slot(slot, &n));
        assert_eq!(key_slot(&names[0]), key_slot(&names[1]));
        names
    }

    fn disrupt(&self) -> Self::Disruption<'_> {
        Cluster::disrupt(self)
    }

    fn kill_master_of(&self, key: &str) -> (u16, u16) {
        let master = self.master_for_key(key);
        let promoted = self.kill_master(&master);
        (master.port, promoted.port)
    }
}

crate::redisson_scenarios!(redisson on crate::support::cluster::shared());

/// The publish commands that Lua scripts sent on `channel` on the node at `port` while
/// `f` ran (and until it was quiet for 300 ms), lower-cased, from `MONITOR`: what an
/// unlock script of either side published with.
fn script_publishes<R>(port: u16, channel: &str, f: impl FnOnce() -> R) -> (R, Vec<String>) {
    let mut conn = crate::support::supervised::connect(port).unwrap();
    conn.send_packed_command(&redis::cmd("MONITOR").get_packed_command())
        .unwrap();
    let ok = conn.recv_response().unwrap();
    assert!(matches!(ok, redis::Value::Okay), "MONITOR answered {ok:?}");
    let result = f();
    conn.set_read_timeout(Some(std::time::Duration::from_millis(300)))
        .unwrap();
    let quoted = format!("\"{channel}\"");
    let mut commands = Vec::new();
    loop {
        match conn.recv_response() {
            Ok(redis::Value::SimpleString(line)) => {
                // `<time> [<db> lua] "<command>" "<channel>" ...`
                if let Some((_, rest)) = line.split_once(" lua] ")
                    && rest.contains(&quoted)
                    && let Some(command) = rest.split('"').nth(1)
                {
                    let command = command.to_ascii_lowercase();
                    if command.ends_with("publish") {
                        commands.push(command);
                    }
                }
            }
            Ok(other) => panic!("MONITOR sent {other:?}"),
            Err(e) if e.is_timeout() => break,
            Err(e) => panic!("{e}"),
        }
    }
    (result, commands)
}

/// On every shard, in AUTO mode (both sides load one YAML without
/// `shardedSubscriptionMode`): a Rust unlock wakes a Java waiter and a Java unlock wakes
/// a Rust waiter, and the unlock scripts of both sides publish with the same command, as
/// `MONITOR` on the shard's master shows: `SPUBLISH` where the cluster has sharded
/// pub/sub, `PUBLISH` on Redis 6.2, where Redisson's probe fails and it falls back.
#[test]
#[::serial_test::serial(redisson)]
fn wake_ups_both_ways_on_every_shard_publish_as_redisson_does() {
    use crate::redisson_topology::{WAKE_BOUND, WATCHDOG_MS, await_waiters, java_ok, run_versions};
    use crate::support::raw::lock_channel;
    use std::time::{Duration, Instant};

    let c = cluster::shared();
    let expected = if crate::support::server().has_sharded_pubsub() {
        "spublish"
    } else {
        "publish"
    };
    run_versions(
        c,
        "wake-ups both ways on every shard",
        WATCHDOG_MS,
        |peer| {
            let client = c.yaml_client(WATCHDOG_MS);
            for master in c.masters() {
                let name = key_for_slot(
                    master.slots[0].start() + 1,
                    &crate::support::unique("ri-shard"),
                );
                let channel = lock_channel(&name);
                let lock = client.get_lock(name.clone());

                // Rust holds, Java waits; the Rust unlock wakes it.
                let guard = lock.lock().unwrap();
                let java = peer.send("w", &format!("trylock {name} 20000"));
                await_waiters(c, &channel, 1);
                let released = Instant::now();
                let ((), ours) =
                    script_publishes(master.port, &channel, || guard.unlock().unwrap());
                let (reply, at) = java_ok(java);
                assert_eq!(reply, "true", "shard {}", master.port);
                let java_woke = at.duration_since(released);
                assert!(java_woke < WAKE_BOUND, "Java woke after {java_woke:?}");

                // Java holds, Rust waits; the Java unlock wakes it. The Rust waiter keeps
                // the lock until MONITOR is closed, so only the Java unlock is seen there.
                let (rust_woke, theirs) = std::thread::scope(|s| {
                    let (done, seen) = std::sync::mpsc::channel::<()>();
                    let w = s.spawn(move || {
                        let g = lock
                            .try_lock_for(Duration::from_secs(20))
                            .unwrap()
                            .expect("the Rust waiter got the lock");
                        let at = Instant::now();
                        let _ = seen.recv();
                        g.unlock().unwrap();
                        at
                    });
                    await_waiters(c, &channel, 1);
                    let released = Instant::now();
                    let ((), theirs) = script_publishes(master.port, &channel, || {
                        peer.ok("w", &format!("unlock {name}"));
                    });
                    let _ = done.send(());
                    (w.join().unwrap().duration_since(released), theirs)
                });
                assert!(rust_woke < WAKE_BOUND, "Rust woke after {rust_woke:?}");
                assert_eq!(theirs, [expected], "Redisson {}'s unlock", peer.version());
                assert_eq!(
                    ours, theirs,
                    "redmutex's unlock publishes as Redisson's does"
                );
                println!(
                    "  shard {}: both unlocks {expected}; Java woke {java_woke:?}, Rust {rust_woke:?}",
                    master.port
                );
            }
        },
    );
}
