//! Real Redisson clients beside redmutex on the multi-node topologies: the scenarios every
//! topology runs (`redisson_topology/`), stamped once for the local 3 + 3 cluster
//! (`cluster`) and once for the local sentinel set (`sentinel`), plus what only each has.
//! Every test here is `#[serial(redisson)]`: each starts JVMs, and two cores are shared
//! with the cluster's six servers and the sentinel set, so one runs at a time, as when
//! they were two binaries. (`tests/redisson_interop`, one server per version, stays a
//! binary of its own: its lighter scenarios run in parallel with each other.)
//!
//! Needs the `interop` feature, `redis-server`, `redis-cli`, a JDK and Maven on PATH.

use redmutex_harness as support;
use redmutex_harness::peer;

mod cluster;
mod redisson_topology;
mod sentinel;
