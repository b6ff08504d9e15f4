//! Tests that look at state the whole process shares: the threads it runs (no
//! `redmutex-` thread outlives a client), the global `metrics` recorder, the futex hash, child processes
//! under injected faults, the soak and the verification runs. Every test here but the
//! verification runs is `#[serial]` (one key for the binary), so none sees another's
//! threads, counters or load. The verification runs share nothing but the host, and are
//! `#[parallel]`: together, never beside a `#[serial]` one (see `verify.rs`).

use redmutex_harness as support;

mod bad_input;
#[cfg(feature = "cli")] // they start `redmutex` child processes
mod faults;
mod futex_hash;
mod metrics;
mod shutdown;
#[cfg(feature = "cli")]
mod soak;
#[cfg(feature = "cli")]
mod verify;
