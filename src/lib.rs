//! Blocking distributed locks on Redis that speak Redisson's wire protocol.
//!
//! `redmutex` gives thread-based Rust services the locks their Java neighbours take with
//! [Redisson]: the same keys, hash fields, leases, renewals and unlock messages, so a Rust
//! thread and a Java thread contend for one lock and each sees the other's holds. The API
//! is synchronous on purpose: a lock call blocks the calling thread, like
//! `std::sync::Mutex::lock`, and no async runtime is involved.
//!
//! [Redisson]: https://redisson.org
//!
//! # Coming from Redisson
//!
//! The objects, keys and method names are Redisson's, in snake case. Four habits change.
//!
//! **`try/finally` becomes a guard.** `lock.lock(); try { … } finally { lock.unlock(); }`
//! is `let guard = lock.lock()?;` followed by the work: the lock is released when the
//! guard goes out of scope, on every path, `?` and panics included, or earlier by
//! [`guard.unlock()`](LockGuard::unlock), which reports how the release went. The guard
//! *is* the hold: `lock.lock()?;` as a statement, or `let _ = lock.lock()?;`, drops it at
//! once and the work runs unlocked (the compiler warns about the first). Where a closure
//! reads better, [`with_lock`](Lock::with_lock) and
//! [`try_with_lock_for`](Lock::try_with_lock_for) take the lock, run it and release:
//!
//! ```no_run
//! let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
//! let lock = client.get_lock("invoice:2024-17");
//! let guard = lock.lock()?; // Java: lock.lock(); try {
//! // ... the critical section ...
//! drop(guard); //              } finally { lock.unlock(); }
//!
//! let total = lock.with_lock(|_guard| Ok::<_, redmutex::Error>(17 + 25))?;
//! # let _ = total;
//! # Ok::<(), redmutex::Error>(())
//! ```
//!
//! **Threads are owners.** As in Redisson, a hold belongs to the thread that took it (the
//! hash field is `<client-id>:<thread-number>`, as Redisson's is `<uuid>:<thread-id>`), a
//! thread may take a lock it holds again (one more hold, one more guard), and another
//! thread's unlock is [`Error::NotHeld`]. Guards are not `Send`, so the compiler keeps a
//! hold on its thread. A thread pool that locks on one thread and unlocks on another, as
//! Redisson's `lock(leaseTime, unit, threadId)` and `unlock(threadId)` allow, passes an
//! explicit [`Owner`] to [`lock_as`](Lock::lock_as) and [`unlock_as`](Lock::unlock_as).
//!
//! **`detach` is for unlocking elsewhere on the same thread.** Java code that locks in
//! one method and unlocks in another keeps the hold with
//! [`guard.detach()`](LockGuard::detach) (no release on drop, still renewed) and
//! releases it later with [`lock.unlock()`](Lock::unlock), as Redisson's `unlock()`.
//!
//! **`lockInterruptibly()` is a [`Cancel`] handle.** There is no thread interrupt: pass a
//! [`Cancel`] to [`lock_until`](Lock::lock_until) and call [`cancel()`](Cancel::cancel)
//! from another thread; the waiter wakes at once with [`Error::Cancelled`], holding
//! nothing.
//!
//! Otherwise the mapping is direct: `tryLock(wait, lease, unit)` is
//! [`try_lock_with_lease(wait, lease)`](Lock::try_lock_with_lease) and answers
//! `Ok(None)` where Java answers `false`; `IllegalMonitorStateException` is
//! [`Error::NotHeld`]; and a hold that was lost, which Redisson never tells, is reported
//! ([`is_lost`](LockGuard::is_lost), [`Error::LockLost`]). The [`compat`] page maps
//! every method, setting and key.
//!
//! # Quick start
//!
//! ```no_run
//! use std::time::Duration;
//!
//! let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
//! let lock = client.get_lock("invoice:2024-17");
//!
//! // Wait as long as it takes; the watchdog keeps the lease alive while we hold it.
//! let guard = lock.lock()?;
//! // ... the critical section ...
//! guard.unlock()?; // or just drop the guard
//!
//! // Wait at most 2 s, hold for at most 10 s (never renewed).
//! if let Some(guard) = lock.try_lock_with_lease(Duration::from_secs(2), Duration::from_secs(10))? {
//!     // ...
//!     drop(guard);
//! }
//! # Ok::<(), redmutex::Error>(())
//! ```
//!
//! # Lock, try_lock and leases
//!
//! [`RLock::lock`] and [`RLock::lock_with_lease`] wait without limit; [`RLock::try_lock`]
//! makes one attempt; [`RLock::try_lock_for`] and [`RLock::try_lock_with_lease`] wait at
//! most the given time and return `Ok(None)` when it runs out. Someone else holding the
//! lock is never an error; failures to reach Redis are.
//!
//! Without an explicit lease a lock gets the client's
//! [`lock_watchdog_timeout`](Config::lock_watchdog_timeout) (30 s by default) and the
//! watchdog renews it every third of that until the last hold is released. With a lease
//! the lock simply expires after it; a guard whose lease ran out reports
//! [`is_lost`](RLockGuard::is_lost) and its release returns [`Error::LockLost`].
//!
//! # Reentrancy
//!
//! A thread may take a lock it already holds; each acquisition is one more hold with its
//! own guard, and the lock is free again after the last hold is released. Only that last
//! release wakes a waiter.
//!
//! # When a lock is lost
//!
//! A lease-based lock cannot promise mutual exclusion when the holder pauses longer than
//! its lease or Redis loses the key. redmutex says so instead of hiding it: the guard's
//! [`is_lost`](RLockGuard::is_lost) and [`loss_signal`](RLockGuard::loss_signal) report a
//! hold that the watchdog found gone ([`Loss::Lost`]) or could not renew before its lease
//! might end ([`Loss::PossiblyLost`]). Releasing a hold that is gone returns
//! [`Error::LockLost`] rather than success; a hold only presumed lost that the release
//! still finds in Redis is released as usual (`Ok`): its field never left the lock, so no
//! one else could have taken it meanwhile.
//!
//! # Metrics
//!
//! Acquisitions, holds, waits, renewals, losses and pub/sub reconnects are recorded
//! through the [`metrics`](https://docs.rs/metrics) facade, a no-op until the application
//! installs a recorder; see the [metrics module](crate::metrics) for the names and
//! `examples/prometheus.rs` for a Prometheus endpoint.
//!
//! # Thousands of waiting threads
//!
//! Each waiting thread sleeps on a futex, and Linux 6.16 sizes a process's futex hash
//! for its CPUs, not its threads. A program that parks thousands of threads at once
//! should call `futex_hash::grow_for` once at start-up (the `futex-hash` feature, which
//! brings the crate's only `unsafe` code); the library only warns.
//!
//! # Other locks and synchronizers
//!
//! Beside [`RLock`], a [`Client`] hands out Redisson's other lock-family objects, with
//! Redisson's method names in snake case, guards where a hold exists and
//! `Result<Option<…>>` for every `try_*` form:
//!
//! - [`RFairLock`] ([`Client::get_fair_lock`]): a reentrant lock granted in request order.
//! - [`RReadWriteLock`] ([`Client::get_read_write_lock`]): shared [`RReadLock`], exclusive
//!   [`RWriteLock`]; a writer may downgrade, a reader may not upgrade.
//! - [`RSemaphore`] ([`Client::get_semaphore`]): counting permits, returned by an
//!   [`RSemaphorePermits`] guard.
//! - [`RPermitExpirableSemaphore`] ([`Client::get_permit_expirable_semaphore`]): permits
//!   with [`PermitId`]s and optional leases.
//! - [`RCountDownLatch`] ([`Client::get_count_down_latch`]): Redisson's `await` is
//!   [`wait`](RCountDownLatch::wait).
//! - [`RFencedLock`] ([`Client::get_fenced_lock`]): every grant carries a fencing token
//!   ([`RFencedLockGuard::token`]).
//! - [`RSpinLock`] ([`Client::get_spin_lock`]): no messages; waiters retry with a
//!   [`BackOff`].
//! - [`RNonReentrantLock`] and [`RNonReentrantFairLock`] (Redisson 4.4+): the holder's
//!   second acquisition is [`Error::AlreadyHeld`].
//! - [`MultiLock`] ([`Client::get_multi_lock`]): several locks of any kinds and clients,
//!   held together.
//! - [`RedLock`] ([`Client::get_red_lock`], deprecated as in Redisson): RLocks on
//!   independent servers, held by a majority, the members asked in parallel.
//!
//! Every object with keys has Redisson's expiry family through [`RExpirable`].
//!
//! For scheduled jobs shared with Java services on ShedLock, [`Client::get_task_lock`]
//! hands out a [`TaskLock`] in ShedLock's Redis format: a run is skipped, never waited
//! for, while another process runs the job or ran it less than `lock_at_least_for` ago.
//!
//! # Fenced writes
//!
//! A lease lock cannot stop a holder that paused past its lease from writing late.
//! [`LockGuard::fenced`] can, for writes to Redis: it runs them in one script that first
//! checks, atomically, that the hold (and a fenced lock's token) is still current, and
//! refuses with [`Error::FenceRefused`] otherwise, writing nothing.
//!
//! On top of the lock, [`Client::leader`] runs a leader election ([`LeaderLatch`], after
//! Curator's): one candidate leads at a time and learns at once when it no longer does;
//! anyone can ask who leads ([`LeaderLatch::current`]) and follow every change
//! ([`LeaderLatch::changes`]), whether the leader is a redmutex or a Redisson client.
//!
//! Each one sleeps on its Redisson channel until the message Redisson sends, and retries
//! without a message no more often than Redisson's own waiters do.
//!
//! # Redisson compatibility
//!
//! The lock `name` is a Redis hash; the field `<client-id>:<thread-number>` holds the
//! hold count; the key's TTL is the lease. The last release deletes the key and publishes
//! `"0"` on `redisson_lock__channel:{name}` (no braces added when the name already has
//! some). Releases carry Redisson's unlock latch (`redisson_unlock_latch:{name}:<id>`) so
//! a retried release cannot release twice. The [`compat`] page has the full mapping:
//! every Redisson method and setting with its redmutex name, the wire details, and the
//! differences worth knowing (it is `docs/compat.md` of the repository).
//!
//! # Errors
//!
//! Every fallible call returns [`Error`], one enum whose variants a caller can act on:
//! [`Error::NotHeld`], [`Error::LockLost`], [`Error::ResponseTimeout`],
//! [`Error::PoolTimeout`], [`Error::Permission`], [`Error::WrongType`], [`Error::Redis`],
//! [`Error::Connect`], [`Error::Config`], [`Error::AlreadyHeld`], [`Error::FenceRefused`],
//! [`Error::FencedPartial`], [`Error::Members`], [`Error::Shutdown`],
//! [`Error::Cancelled`]. Connect and
//! configuration errors name the address they concern (its password masked) and what to
//! check.
//!
//! ```no_run
//! use std::time::Duration;
//! use redmutex::Error;
//!
//! let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
//! match client.get_lock("orders:17").try_lock_for(Duration::from_secs(2)) {
//!     Ok(Some(guard)) => guard.unlock()?,
//!     Ok(None) => println!("busy: someone else holds it"),
//!     Err(Error::WrongType { .. }) => println!("the key holds something else"),
//!     Err(e) => return Err(e),
//! }
//! # Ok::<(), redmutex::Error>(())
//! ```
//!
//! # Cargo features
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `tls` | on | `rediss://` addresses (rustls with the ring provider; no OpenSSL). Without it a `rediss://` address is an [`Error::Config`]. |
//! | `cli` | off | the `redmutex` command-line tool (`status`, `unlock`, `run`, `watch`, `doctor`, `bench`, `demo`): `cargo install redmutex --features cli`. Library users never build its argument parser, progress bar and JSON writer. |
//! | `admin` | off | not for library users: the hidden, semver-exempt module the tool and the test harness share (the `redis-server` spawner, the fault proxy, key and slot helpers); `cli` turns it on. No dependencies of its own. |
//! | `futex-hash` | off | `futex_hash::{slots, set_slots, grow_for}`: read and size the process's futex hash (Linux 6.16+) for a program that parks thousands of threads. It is the crate's only `unsafe` code (one `prctl` call); without it the library is `#![forbid(unsafe_code)]`. |
//! | `interop` | off | nothing in the library: it turns on the test suites that run real Redisson (Java), go-redsync (Go) and redis-py (Python) peers, so that plain `cargo test` needs only `redis-server` and `redis-cli`. |
//! | `verify-broken-no-owner-check` | off | test only, never in a build you run: compiles a seeded bug (a release without the owner check) that stays inert unless `REDMUTEX_VERIFY_BROKEN=no-owner-check` is set; the verification harness's self-test runs it (`docs/verify.md`). |
//! | `verify-broken-lease-from-reply` | off | test only, like the one above: a guard whose lease end is dated from the acquire's reply instead of its send, inert unless `REDMUTEX_VERIFY_BROKEN=lease-from-reply` is set. |
//! | `verify-broken-unlock-no-publish` | off | test only, like the ones above: an unlock that publishes no unlock message (waiters wake only at the lease they saw), inert unless `REDMUTEX_VERIFY_BROKEN=unlock-no-publish` is set. |
//! | `verify-broken-fair-queue-jump` | off | test only, like the ones above: a fair-lock waiter that jumps to the head of the queue, inert unless `REDMUTEX_VERIFY_BROKEN=fair-queue-jump` is set. |
//! | `verify-broken-semaphore-double-release` | off | test only, like the ones above: a semaphore release that gives back twice its permits, inert unless `REDMUTEX_VERIFY_BROKEN=semaphore-double-release` is set. |
//! | `verify-broken-clear-at-start` | off | test only, in the harness's worker (the hidden `redmutex verify-worker`), not the library: a worker that deletes the lock at start-up, freeing a killed holder's lock early; inert unless `REDMUTEX_VERIFY_BROKEN=clear-at-start` is set. |
//! | `verify-broken-latch-double-count-down` | off | test only, in the worker like the one above: a latch count-down that runs twice and is recorded once; inert unless `REDMUTEX_VERIFY_BROKEN=latch-double-count-down` is set. |
// Forbidden, except with the `futex-hash` feature: then `futex_hash` makes the one
// `prctl` call that sizes the process's futex hash, and allows it there alone.
#![cfg_attr(not(feature = "futex-hash"), forbid(unsafe_code))]
#![cfg_attr(feature = "futex-hash", deny(unsafe_code))]
#![cfg_attr(
    not(test),
    deny(clippy::panic, clippy::unwrap_used, clippy::expect_used)
)]

// Items that `admin` re-exports are `pub`; without that feature nothing reaches them.
#[cfg_attr(not(feature = "admin"), allow(unreachable_pub))]
mod address;
#[cfg(feature = "admin")]
#[doc(hidden)]
pub mod admin;
mod client;
mod clock;
mod config;
mod core;
mod error;
pub mod futex_hash;
mod leader;
mod lock;
pub mod metrics;
#[cfg_attr(not(feature = "admin"), allow(unreachable_pub))]
mod protocol;
mod pubsub;
mod quorum;
mod random;
mod sync;
mod task_lock;
mod token_lock;
mod transport;
#[cfg_attr(not(feature = "admin"), allow(unreachable_pub))]
mod utc;
#[cfg(any(
    feature = "verify-broken-no-owner-check",
    feature = "verify-broken-lease-from-reply",
    feature = "verify-broken-unlock-no-publish",
    feature = "verify-broken-fair-queue-jump",
    feature = "verify-broken-semaphore-double-release"
))]
mod verify_broken;
mod wait;
mod watchdog;

pub use client::Client;
pub use config::fairness::Fairness;
pub use config::{Config, ConfigBuilder, ShardedSubscriptionMode};
pub use error::{Error, NoQuorum, Refusal, Result};
pub use leader::observer::{ChangeCause, Leader, LeaderChange, LeaderChanges, LeaderClient};
pub use leader::{LeaderLatch, Leadership};
pub use lock::{All, Composite, CompositeGuard, Majority};
pub use lock::{
    AnyLock, Counted, Fair, Fenced, FencedWrite, HeldLock, Lock, LockGuard, LockKind, MultiLock,
    MultiLockGuard, NonReentrant, NonReentrantFair, RFairLock, RFairLockGuard, RFencedLock,
    RFencedLockGuard, RLock, RLockGuard, RNonReentrantFairLock, RNonReentrantFairLockGuard,
    RNonReentrantLock, RNonReentrantLockGuard, RReadLock, RReadLockGuard, RReadWriteLock,
    RSpinLock, RSpinLockGuard, RWriteLock, RWriteLockGuard, Read, RedLock, RedLockGuard, Reentrant,
    Refused, Spin, Write,
};
pub use protocol::owner::Owner;
pub use sync::expiry::RExpirable;
pub use sync::latch::RCountDownLatch;
pub use sync::permit_semaphore::{PermitId, RPermitExpirableSemaphore};
pub use sync::semaphore::{RSemaphore, RSemaphorePermits};
pub use task_lock::TaskLock;
pub use token_lock::{
    ExtendMode, QuorumTokenLock, QuorumTokenLockGuard, Token, TokenFormat, TokenLock,
    TokenLockGuard, TokenLockOptions,
};
pub use wait::backoff::BackOff;
pub use wait::cancel::Cancel;
pub use watchdog::hold::Loss;

/// The `redis` crate this crate is built on; its error type appears in [`Error`].
pub use redis;

#[doc = include_str!("../docs/compat.md")]
pub mod compat {}

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// Every handle is shared between threads; guards of locks are `Sync` but not `Send`
/// (checked by the `compile_fail` example on `LockGuard`).
#[allow(dead_code)]
fn _ensure_send_sync() {
    fn send_sync<T: Send + Sync>() {}
    fn sync<T: Sync>() {}
    send_sync::<Client>();
    send_sync::<Config>();
    send_sync::<Error>();
    send_sync::<RLock>();
    send_sync::<RFairLock>();
    send_sync::<RReadWriteLock>();
    send_sync::<RReadLock>();
    send_sync::<RWriteLock>();
    send_sync::<RSemaphore>();
    send_sync::<RSemaphorePermits>();
    send_sync::<RPermitExpirableSemaphore>();
    send_sync::<PermitId>();
    send_sync::<RCountDownLatch>();
    send_sync::<TokenLock>();
    send_sync::<TaskLock>();
    send_sync::<QuorumTokenLock>();
    send_sync::<TokenLockOptions>();
    send_sync::<RFencedLock>();
    send_sync::<RSpinLock>();
    send_sync::<RNonReentrantLock>();
    send_sync::<RNonReentrantFairLock>();
    sync::<RFencedLockGuard>();
    send_sync::<LeaderLatch>();
    send_sync::<LeaderChanges>();
    send_sync::<Leader>();
    sync::<Leadership>();
    sync::<RLockGuard>();
    sync::<RFairLockGuard>();
    sync::<RReadLockGuard>();
    sync::<RWriteLockGuard>();
    sync::<TokenLockGuard>();
    sync::<QuorumTokenLockGuard>();
}

/// The contract of the Lua scripts, whichever module declares them.
#[cfg(test)]
mod lua_contract {
    /// Every script the library sends, from each module that declares some.
    fn all_scripts() -> Vec<(
        &'static str,
        &'static [&'static str],
        &'static redis::Script,
    )> {
        [
            crate::protocol::hash::all_scripts(),
            crate::watchdog::renew::all_scripts(),
            crate::lock::fair::all_scripts(),
            crate::lock::read_write::all_scripts(),
            crate::lock::fenced::all_scripts(),
            crate::lock::fenced_write::all_scripts(),
            crate::sync::semaphore::all_scripts(),
            crate::sync::permit_semaphore::all_scripts(),
            crate::sync::latch::all_scripts(),
            crate::sync::expiry::all_scripts(),
            crate::token_lock::token::all_scripts(),
        ]
        .concat()
    }

    #[test]
    fn every_script_documents_its_contract_and_hashes_stably() {
        let scripts = all_scripts();
        // Every file of lua/'s kind folders is one script here; lib/ holds the shared
        // rules, cli/ the tool's own scripts and verify/ the seeded bugs' variants.
        let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/lua"));
        let mut files = 0;
        for folder in std::fs::read_dir(root).unwrap() {
            let folder = folder.unwrap().path();
            let name = folder.file_name().unwrap().to_str().unwrap().to_owned();
            assert!(folder.is_dir(), "lua/ holds only folders: {folder:?}");
            if ["lib", "cli", "verify"].contains(&name.as_str()) {
                continue;
            }
            for file in std::fs::read_dir(&folder).unwrap() {
                let path = file.unwrap().path();
                assert_eq!(path.extension().unwrap(), "lua", "{path:?}");
                files += 1;
            }
        }
        assert_eq!(scripts.len(), files);
        for (src, _, script) in scripts {
            assert!(
                src.contains("KEYS[") && src.contains("ARGV[") && src.contains("Returns"),
                "{src}"
            );
            assert_eq!(script.get_hash().len(), 40);
        }
    }

    #[test]
    fn a_script_is_prefixed_with_exactly_the_shared_rules_it_calls() {
        let rules = [
            ("latch.lua", include_str!("../lua/lib/latch.lua")),
            ("fair_queue.lua", include_str!("../lua/lib/fair_queue.lua")),
            ("permits.lua", include_str!("../lua/lib/permits.lua")),
            ("rwlock.lua", include_str!("../lua/lib/rwlock.lua")),
            ("uncounted.lua", include_str!("../lua/lib/uncounted.lua")),
        ];
        for (src, libs, _) in all_scripts() {
            for (lib, text) in rules {
                let functions: Vec<&str> = text
                    .lines()
                    .filter_map(|l| l.strip_prefix("local function "))
                    .filter_map(|l| l.split('(').next())
                    .collect();
                assert!(!functions.is_empty(), "{lib}");
                let calls = functions.iter().any(|f| src.contains(&format!("{f}(")));
                assert_eq!(calls, libs.contains(&lib), "{lib} for:\n{src}");
            }
        }
    }
}
