//! Interoperability with real Redisson clients on the local sentinel set (1 master,
//! 2 replicas, 3 sentinels; `support::sentinel`, started once for this binary):
//! Redisson 4.7.0 and 3.23.5 (`REDMUTEX_REDISSON_VERSIONS`) as Java peers, and redmutex
//! clients, both configured by one `sentinelServersConfig` YAML file, the Java side with
//! `Config.fromYAML`, ours with `Config::from_redisson_yaml_file`.
//!
//! The scenarios are the ones every topology runs (`redisson_topology/`): mutual
//! exclusion, wake-ups both ways on the master's plain pub/sub, fair-lock order,
//! read-write lock / semaphore / latch wake-ups, a SIGKILL of the master with both
//! sides holding and waiting, and one renewal that fails (Redisson 3.23.5's silent
//! loss). One at a time (`#[serial(redisson)]`): each starts JVMs,
//! and the failover moves the master.
//!
//! What only this binary has: a second, password-protected set (an ACL user on the data
//! nodes, a separate password on the sentinels) that both sides reach through one YAML
//! file with `username`, `password` and `sentinelPassword`.

use std::path::Path;
use std::thread;
use std::time::Instant;

use redmutex::{Client, Config, Error};
use serial_test::serial;

use crate::peer::Pending;
use crate::redisson_topology::{
    Topology, WAKE_BOUND, WATCHDOG_MS, await_waiters, java_ok, run_versions,
};
use crate::support::raw::lock_channel;
use crate::support::sentinel::{self, MASTER_NAME, SentinelAuth, SentinelSet, SentinelSpec};
use crate::support::unique;

impl Topology for SentinelSet {
    type Disruption<'a> = sentinel::Disruption<'a>;

    fn label(&self) -> &'static str {
        "sentinel"
    }

    fn root(&self) -> &Path {
        SentinelSet::root(self)
    }

    fn redisson_yaml_text(&self) -> String {
        SentinelSet::redisson_yaml_text(self)
    }

    /// Every key is on the one master.
    fn colocated(&self, base: &str) -> [String; 2] {
        [format!("{base}:r"), format!("{base}:j")]
    }

    fn disrupt(&self) -> Self::Disruption<'_> {
        SentinelSet::disrupt(self)
    }

    fn kill_master_of(&self, _key: &str) -> (u16, u16) {
        let old = self.master();
        let new = self.kill_master();
        (old.port, new.port)
    }

    fn freeze_replicas_of(&self, _key: &str, frozen: bool) {
        let master = self.master();
        // By port, not by role: a stopped node reports no role.
        for n in self
            .data_nodes()
            .into_iter()
            .filter(|n| n.port != master.port)
        {
            if frozen {
                self.stop(&n);
            } else {
                self.cont(&n);
            }
        }
    }
}

crate::redisson_scenarios!(redisson on crate::support::sentinel::shared());

/// A set whose data nodes let only the ACL user write and run scripts, and whose
/// sentinels want their own password. A client given only the sentinel password finds
/// the master but is refused the lock script (the ACL is real); with the YAML file's
/// `username`, `password` and `sentinelPassword` a Java and a Rust thread each run 100
/// non-atomic increments under one lock (the counter must be exact), and a Rust unlock
/// wakes a Java waiter.
#[test]
#[serial(redisson)]
fn an_acl_user_on_the_data_nodes_and_a_sentinel_password_serve_both_sides() {
    const PER_THREAD: u64 = 100;
    let auth = SentinelAuth {
        user: "locker".into(),
        password: "data-secret".into(),
        sentinel_password: "sentinel-secret".into(),
    };
    let started = Instant::now();
    let set = SentinelSet::start(SentinelSpec {
        replicas: 1,
        auth: Some(auth.clone()),
        ..SentinelSpec::default()
    });
    let set_up = started.elapsed();

    let anonymous = Client::new(
        Config::builder()
            .master_name(MASTER_NAME)
            .sentinel_addresses(set.sentinel_urls())
            .sentinel_password(&auth.sentinel_password)
            .build(),
    )
    .expect("the sentinel password alone is enough to find the master");
    match anonymous.get_lock(unique("acl-anon")).try_lock() {
        Err(Error::Permission(_)) => {}
        other => panic!("the default user took a lock: {other:?}"),
    }

    run_versions(
        &set,
        "ACL user and sentinel password",
        WATCHDOG_MS,
        |peer| {
            let client = set.yaml_client(WATCHDOG_MS);
            let name = unique("acl-lock");
            let counter = unique("acl-counter");
            let java: Pending = peer.send("incr", &format!("incr {name} {counter} {PER_THREAD}"));
            thread::scope(|s| {
                let lock = client.get_lock(name.clone());
                let mut conn = set.master().conn();
                redis::cmd("AUTH")
                    .arg(&auth.user)
                    .arg(&auth.password)
                    .exec(&mut conn)
                    .unwrap();
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
            });
            assert_eq!(java_ok(java).0, PER_THREAD.to_string());
            let total: u64 = redis::cmd("GET")
                .arg(&counter)
                .query(&mut set.master().conn())
                .unwrap();
            assert_eq!(
                total,
                2 * PER_THREAD,
                "lost updates: mutual exclusion broken"
            );

            let guard = client.get_lock(name.clone()).lock().unwrap();
            let waiter = peer.send("w", &format!("trylock {name} 20000"));
            await_waiters(&set, &lock_channel(&name), 1);
            let released = Instant::now();
            guard.unlock().unwrap();
            let (reply, at) = java_ok(waiter);
            assert_eq!(reply, "true");
            let java_woke = at.duration_since(released);
            assert!(java_woke < WAKE_BOUND, "Java woke after {java_woke:?}");
            peer.ok("w", &format!("unlock {name}"));
            println!(
                "  Redisson {}: counter {total}; Java woke {java_woke:?} after the Rust unlock \
             (set of 1 + 1 + 3 with passwords up in {set_up:?})",
                peer.version()
            );
        },
    );
}
