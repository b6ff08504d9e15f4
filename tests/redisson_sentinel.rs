//! Interoperability with real Redisson clients on the local sentinel set (1 master,
//! 2 replicas, 3 sentinels; `support::sentinel`, started once for this binary):
//! Redisson 4.7.0 and 3.23.5 (`REDMUTEX_REDISSON_VERSIONS`) as Java peers, and redmutex
//! clients, both configured by one `sentinelServersConfig` YAML file, the Java side with
//! `Config.fromYAML`, ours with `Config::from_redisson_yaml`.
//!
//! The scenarios are the ones every topology runs (`redisson_topology/`): mutual
//! exclusion, wake-ups both ways on the master's plain pub/sub, fair-lock order,
//! read-write lock / semaphore / latch wake-ups, and a SIGKILL of the master with both
//! sides holding and waiting. One at a time (`#[serial(sentinel)]`): each starts JVMs,
//! and the failover moves the master.

#[path = "support/peer.rs"]
mod peer;
mod redisson_topology;
#[path = "support/mod.rs"]
mod support;

use std::path::Path;

use redisson_topology::Topology;
use support::sentinel::{self, SentinelSet};

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
}

crate::redisson_scenarios!(sentinel on crate::support::sentinel::shared());
