//! What the `redmutex` tool and the test harness share with the library, and nothing a
//! library user should call: not covered by semver, hidden from the docs, and compiled only
//! with the `admin` feature (which `cli` turns on, and the test harness too).
//!
//! It holds the `redis-server` spawner (and [`servers`], which server it starts), the worker command line and the fault proxy, which
//! the tool, the tests, the benchmark and the examples all use, and it re-exports the parts
//! of the library the tool reads keys and addresses with, so that the tool names keys and
//! slots exactly as the locks do instead of keeping copies.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_debug_implementations,
    reason = "developer tooling: the proxy's and spawner's failures end the test or tool that runs them"
)]

pub mod launch;
pub mod proxy;
pub mod rng;
pub mod server;
pub mod servers;

/// Redis addresses explained for a person (the library's own wording).
pub mod address {
    pub use crate::address::{connect_failure, is_login_refusal, redact};
}

/// Redisson's key and channel names of each kind.
pub mod names {
    pub use crate::protocol::names::{
        fair_queue, fair_timeouts, latch_channel, lock_channel, permit_timeouts, prefixed,
        read_key_prefix, read_timeout_prefix, rwlock_channel, semaphore_channel,
    };
}

/// Redis Cluster hash slots and the slot map.
pub mod slots {
    pub use crate::transport::slots::{SlotMap, join_host_port, key_slot};
}

/// ISO 8601 UTC timestamps, as ShedLock writes them.
pub mod utc {
    pub use crate::utc::timestamp;
}
