//! redmutex on one redis-server: every shared suite (`tests/suites`), each test on a fresh
//! server of its own, and beside each suite what only a single server shows (a module per
//! kind). `tests/cluster` and `tests/sentinel` stamp the same case lists.

use redmutex_harness as support;

// The shared suites, each under the name its case list expects.
#[path = "../suites/fair_lock.rs"]
mod fair_suite;
#[path = "../suites/latch.rs"]
mod latch_suite;
#[path = "../suites/lease.rs"]
mod lease_suite;
#[path = "../suites/lock.rs"]
mod lock_suite;
#[path = "../suites/rwlock.rs"]
mod rwlock_suite;
#[path = "../suites/semaphore.rs"]
mod semaphore_suite;
#[path = "../suites/token_lock.rs"]
mod token_suite;
#[path = "../suites/wait.rs"]
mod wait_suite;

// One module per suite: its cases stamped on a fresh server, then the single-server cases.
mod fair_lock;
mod latch;
mod lease;
mod lock;
mod rwlock;
mod semaphore;
mod server;
mod string_lock;
mod wait;
