//! Single-server tests that need no process-wide state of their own (no `#[serial]`
//! group, no global recorder, no thread census), gathered in one binary so that the
//! harness and the library are linked once for all of them: one module per former test
//! binary.

use redmutex_harness as support;

mod connect;
mod docs;
mod fairness;
mod family_scripts;
mod first_hour;
mod force_unlock;
mod leader;
mod lost_acquire;
mod manifest;
mod script_cache;
mod task_lock;
mod wire;
