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
