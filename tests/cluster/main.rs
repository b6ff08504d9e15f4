//! redmutex on a Redis Cluster: the single-server suites run against the shared local
//! 3 + 3 cluster (started once for this binary by `support::cluster`), then what only a
//! cluster has, one module each: `shards` (keys and channels of every kind in one slot,
//! every shard, sharded and plain pub/sub), `setup` (cluster settings, bad addresses,
//! ACL), `lost_reply` (the fault proxy in front of one shard), `renewal` (per-node
//! batches), `disruption` (slot migration, SIGKILL failover, `CLUSTER FAILOVER`), `pool`
//! (the pool's cap per master, and its timeout).
//!
//! Tests that change the topology are `#[serial(cluster)]` and hold a `disrupt()` guard;
//! all others are `#[parallel(cluster)]`. Timing assertions are hang guards far below
//! the lease (a waiter woken well before it was woken by a message); measured windows
//! are printed.

use redmutex_harness as support;

mod disruption;
mod lost_reply;
mod pool;
mod quorum;
mod renewal;
mod replica_sync;
mod setup;
mod shards;

#[path = "../suites/fair_lock.rs"]
mod fair_suite;
#[path = "../suites/latch.rs"]
mod latch_suite;
#[path = "../suites/lease.rs"]
mod lease_suite;
#[path = "../suites/lock.rs"]
mod lock_suite;
#[path = "../suites/pool.rs"]
mod pool_suite;
#[path = "../suites/rwlock.rs"]
mod rwlock_suite;
#[path = "../suites/semaphore.rs"]
mod semaphore_suite;
#[path = "../suites/token_lock.rs"]
mod token_suite;
#[path = "../suites/wait.rs"]
mod wait_suite;

use std::time::Duration;

use redmutex::Client;
use support::cluster::{Cluster, ClusterNode, key_slot};
use support::deploy::Deployment;

/// Far below every lease used here: a waiter that got the lock within this of the
/// release was woken by the unlock message.
pub(crate) const WAKE_BOUND: Duration = Duration::from_secs(5);

/// A fresh name whose slot `master` serves.
pub(crate) fn name_on(master: &ClusterNode, prefix: &str) -> String {
    let base = support::unique(prefix);
    (0u32..)
        .map(|n| format!("{base}:{n}"))
        .find(|k| master.serves(key_slot(k)))
        .unwrap_or(base)
}

/// A client of the shared cluster with `f` applied to its settings.
pub(crate) fn client(f: impl FnOnce(redmutex::ConfigBuilder) -> redmutex::ConfigBuilder) -> Client {
    support::cluster::shared().client_with(f)
}

/// `PUBSUB <kind>NUMSUB channel` on one node: its subscribers of that kind there (no
/// sharded ones where the server has no sharded pub/sub, Redis 6.2).
pub(crate) fn subscribers(raw: &mut redis::Connection, kind: &str, channel: &str) -> i64 {
    if kind == "SHARD" && !support::server().has_sharded_pubsub() {
        return 0;
    }
    let (_, n): (String, i64) = redis::cmd("PUBSUB")
        .arg(format!("{kind}NUMSUB"))
        .arg(channel)
        .query(raw)
        .unwrap();
    n
}

/// Waits until the master of `channel`'s slot counts `n` subscribers of each kind asked.
/// Where the server has no sharded pub/sub (Redis 6.2), AUTO clients subscribe plain only,
/// so the waiters counted as sharded are expected as plain ones.
pub(crate) fn await_subscribed(c: &Cluster, channel: &str, plain: i64, sharded: i64) {
    let (plain, sharded) = if support::server().has_sharded_pubsub() {
        (plain, sharded)
    } else {
        (plain.max(sharded), 0)
    };
    let mut raw = c.raw(channel);
    support::eventually(
        Duration::from_secs(20),
        &format!("{plain} plain and {sharded} sharded subscriber(s) of {channel}"),
        || {
            subscribers(&mut raw, "", channel) == plain
                && subscribers(&mut raw, "SHARD", channel) == sharded
        },
    );
}

// Every shared suite, stamped from its own case list; the cases that count a node's
// commands run alone (`serial`), the rest together (`parallel`).
mod lock {
    crate::lock_suite::lock_cases!(shared(cluster) on crate::support::cluster::shared());
}
mod rwlock {
    crate::rwlock_suite::rwlock_cases!(shared(cluster) on crate::support::cluster::shared());
}
mod wait {
    crate::wait_suite::wait_cases!(shared(cluster) on crate::support::cluster::shared());
}
mod semaphore {
    crate::semaphore_suite::semaphore_cases!(shared(cluster) on crate::support::cluster::shared());
}
mod fair_lock {
    crate::fair_suite::fair_lock_cases!(shared(cluster) on crate::support::cluster::shared());
}
mod latch {
    crate::latch_suite::latch_cases!(shared(cluster) on crate::support::cluster::shared());
}
mod lease {
    crate::lease_suite::lease_cases!(shared(cluster) on crate::support::cluster::shared());
}
mod token_lock {
    crate::token_suite::token_lock_cases!(shared(cluster) on crate::support::cluster::shared());
}
