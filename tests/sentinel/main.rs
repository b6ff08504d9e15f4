//! redmutex in sentinel mode: the single-server suites run against the shared local
//! sentinel set (1 master, 2 replicas, 3 sentinels, started once for this binary by
//! `support::sentinel`), then what only sentinel mode has, one module each: `setup`
//! (discovery, bad input, credentials), `failover` (`SENTINEL FAILOVER` and SIGKILL of
//! the master with holders and waiters), `yaml` (Redisson's config files),
//! `replica_sync` (`WAIT` after acquires), `demotion` (no grant on a master that a
//! `SENTINEL FAILOVER` is demoting, on a private set with the server's resync delay),
//! `pool` (the pool's cap on the master).
//!
//! Tests that change the topology are `#[serial(sentinel)]` and hold a `disrupt()`
//! guard; all others are `#[parallel(sentinel)]`. Timing assertions are hang guards far
//! below the leases; measured windows are printed.

use redmutex_harness as support;

mod demotion;
mod failover;
mod pool;
mod quorum;
mod replica_sync;
mod setup;
mod yaml;

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

// Every shared suite, stamped from its own case list; the cases that count a node's
// commands run alone (`serial`), the rest together (`parallel`).
mod lock {
    crate::lock_suite::lock_cases!(shared(sentinel) on crate::support::sentinel::shared());
}
mod rwlock {
    crate::rwlock_suite::rwlock_cases!(shared(sentinel) on crate::support::sentinel::shared());
}
mod wait {
    crate::wait_suite::wait_cases!(shared(sentinel) on crate::support::sentinel::shared());
}
mod semaphore {
    crate::semaphore_suite::semaphore_cases!(shared(sentinel) on crate::support::sentinel::shared());
}
mod fair_lock {
    crate::fair_suite::fair_lock_cases!(shared(sentinel) on crate::support::sentinel::shared());
}
mod latch {
    crate::latch_suite::latch_cases!(shared(sentinel) on crate::support::sentinel::shared());
}
mod lease {
    crate::lease_suite::lease_cases!(shared(sentinel) on crate::support::sentinel::shared());
}
mod token_lock {
    crate::token_suite::token_lock_cases!(shared(sentinel) on crate::support::sentinel::shared());
}
