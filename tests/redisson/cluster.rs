//! Interoperability with real Redisson clients on a Redis Cluster: Redisson 4.7.0 and
//! 3.23.5 (`REDMUTEX_REDISSON_VERSIONS`), each as a Java peer (`tests/interop`, driven
//! by the harness's `peer` module), and redmutex clients, both configured by one
//! `clusterServersConfig` YAML file naming the local 3 + 3 cluster (`support::cluster`,
//! started once for this binary).
//!
//! The scenarios are the ones every topology runs (`redisson_topology/`): mutual
//! exclusion, wake-ups both ways (and which publish command Redisson uses on a
//! cluster), fair-lock order, read-write lock / semaphore / latch wake-ups, and a
//! SIGKILL failover of a master with both sides holding and waiting, and one renewal
//! that fails (Redisson 3.23.5's silent loss). Only here: the waiters of both sides on a
//! slot moved by a live migration. Scenarios run one at a time, with the sentinel scenarios (`#[serial(redisson)]`): each starts a JVM,
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

    fn freeze_replicas_of(&self, key: &str, frozen: bool) {
        let master = self.master_for_key(key);
        for r in self.replicas() {
            if matches!(&r.role, cluster::Role::Replica { master_id } if *master_id == master.id) {
                if frozen {
                    self.stop(&r);
                } else {
                    self.cont(&r);
                }
            }
        }
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

/// The holder's watchdog in the migration scenario: the lease bounds how long a Java
/// waiter that missed the unlock message sleeps before it tries again.
const MIGRATION_WATCHDOG_MS: u64 = 6_000;

/// A live migration (`MIGRATING`/`IMPORTING`, `MIGRATE`, `SETSLOT … NODE`) moves the slot
/// of two locks, each held by one side and waited for by the other, to another master.
/// Runs its action when dropped, also while a failed assertion unwinds (then a panic of
/// the action itself is caught, so that it cannot abort the test binary).
struct MoveBack<'a>(Box<dyn Fn() + 'a>);

impl Drop for MoveBack<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.0)()));
        } else {
            (self.0)();
        }
    }
}

/// The Rust waiter resubscribes where the slot lives now and the Java unlock wakes it
/// there (asserted: within [`WAKE_BOUND`](crate::redisson_topology::WAKE_BOUND)). Whether
/// the Java waiter resubscribed on the target, and whether the Rust unlock woke it or
/// only its own retry did (it sleeps at most the hold's remaining lease, then tries
/// again), is Redisson's behaviour: observed and printed, not judged. The slot is moved
/// back afterwards.
#[test]
#[::serial_test::serial(redisson)]
fn a_migrated_slot_wakes_the_rust_waiter_by_message_and_shows_what_redisson_does() {
    use crate::redisson_topology::{WAKE_BOUND, await_waiters, java_ok, run_versions, subscribers};
    use crate::support::raw::{lock_channel, pttl};
    use std::time::{Duration, Instant};

    let c = cluster::shared();
    run_versions(c, "slot migration waiters", MIGRATION_WATCHDOG_MS, |peer| {
        let _d = c.disrupt();
        let masters = c.masters();
        let (source, target) = (&masters[1], &masters[2]);
        let slot = source.slots[0].start() + 7;
        let base = crate::support::unique("ri-mig");
        let [rust_name, java_name] =
            [format!("{base}:r"), format!("{base}:j")].map(|n| key_for_slot(slot, &n));
        let (rust_channel, java_channel) = (lock_channel(&rust_name), lock_channel(&java_name));
        let client = c.yaml_client(MIGRATION_WATCHDOG_MS);
        // Moves the slot back however the scenario ends (before the heal, which moves no
        // slot), so that a failure here leaves the shared cluster's map as it was.
        let mut moved_back: Option<MoveBack<'_>> = None;
        let rust_guard = client.get_lock(rust_name.clone()).lock().unwrap();
        peer.ok("h", &format!("lock {java_name}"));
        let java_wait = peer.send("w", &format!("trylock {rust_name} 60000"));

        let (rust_woke, java_woke, lease_left, java_resubscribed, listening) =
            std::thread::scope(|s| {
                let rust_wait = s.spawn(|| {
                    let g = client
                        .get_lock(java_name.clone())
                        .try_lock_for(Duration::from_secs(60))
                        .unwrap()
                        .expect("the Rust waiter got the Java-held lock");
                    let at = Instant::now();
                    g.unlock().unwrap();
                    at
                });
                await_waiters(c, &rust_channel, 1);
                await_waiters(c, &java_channel, 1);

                c.migrate_slot(slot, target);
                moved_back = Some(MoveBack(Box::new(|| c.migrate_slot(slot, source))));
                // Now routed to the target: the Rust waiter subscribed there.
                await_waiters(c, &java_channel, 1);
                // Redisson rescans the slot map every second (`scanInterval`): three scans'
                // time to move its subscription too. Bounded observation, not a condition.
                let mut on_target = c.conn(target.port);
                let mut java_resubscribed = None;
                let looked = Instant::now();
                while looked.elapsed() < Duration::from_secs(3) {
                    if subscribers(&mut on_target, "", &rust_channel)
                        + subscribers(&mut on_target, "SHARD", &rust_channel)
                        >= 1
                    {
                        java_resubscribed = Some(looked.elapsed());
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }

                let released = Instant::now();
                peer.ok("h", &format!("unlock {java_name}"));
                let rust_woke = rust_wait.join().unwrap().duration_since(released);

                let lease_left =
                    Duration::from_millis(pttl(&mut on_target, &rust_name).max(0).unsigned_abs());
                // Where the Java waiter listens when the Rust unlock publishes (on the
                // target, where the slot lives now).
                let count = |port: u16| {
                    let mut conn = c.conn(port);
                    subscribers(&mut conn, "", &rust_channel)
                        + subscribers(&mut conn, "SHARD", &rust_channel)
                };
                let listening = (count(source.port), count(target.port));
                let released = Instant::now();
                rust_guard.unlock().unwrap();
                let (reply, at) = java_ok(java_wait);
                assert_eq!(reply, "true", "the Java waiter did not get the lock");
                (
                    rust_woke,
                    at.duration_since(released),
                    lease_left,
                    java_resubscribed,
                    listening,
                )
            });
        assert!(
            rust_woke < WAKE_BOUND,
            "the Rust waiter woke {rust_woke:?} after the Java unlock on the target"
        );
        peer.ok("w", &format!("unlock {rust_name}"));
        drop(moved_back);
        // With no subscription on the target the message cannot have reached it.
        let how = if listening.1 == 0 {
            "so only its own retry can have let it in"
        } else {
            "subscribed there when the message went out"
        };
        println!(
            "  Redisson {}: slot {slot} moved {} -> {}; Java waiter {}; the Rust waiter \
             woke {rust_woke:?} after the Java unlock; the Java waiter woke {java_woke:?} \
             after the Rust unlock, which published while the channel had {} subscriber(s) \
             on the source and {} on the target ({how}; the hold had {lease_left:?} left)",
            peer.version(),
            source.port,
            target.port,
            match java_resubscribed {
                Some(after) => format!("subscribed on the target {after:?} after the move"),
                None => "NOT subscribed on the target 3 s after the move".to_owned(),
            },
            listening.0,
            listening.1,
        );
    });
}
