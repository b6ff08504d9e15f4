//! The safe layer over every kind: [`Lock<K>`] with the lock methods, the acquire loop
//! and the release sequence, written once, and its guard [`LockGuard<K>`]. lock_api keeps
//! a mutex and its guard in one file because each part there is a thin forward to the raw
//! lock; here each phase is a protocol of its own, so each has its file: the public
//! methods (`lock.rs`), the acquisition (`acquire.rs`), the release (`release.rs`) and
//! the guard (`guard.rs`). This file holds the type they all extend.

mod acquire;
mod guard;
mod lock;
mod release;

pub use guard::LockGuard;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::raw::LockKind;
pub(super) use crate::clock::Patience;
use crate::core::Core;

/// A distributed lock of kind `K`, wire-compatible with the Redisson lock of that kind.
///
/// Every Redisson kind is a Redis hash `name` whose field `<client-id>:<thread-number>`
/// (plus `:write` for a write hold) counts the holds of one thread of one client, with the
/// key's TTL as the lease; the [`TokenLock`](crate::TokenLock) is a string holding one
/// token per hold instead (see there for what it does differently). Taking the lock without a lease gives it the client's
/// [watchdog timeout](crate::Config::lock_watchdog_timeout) and the watchdog renews it
/// until the last hold is released; taking it with a lease lets it expire after the lease,
/// unrenewed. A waiting thread sleeps until an unlock message or until the holder's lease
/// would end, whichever comes first.
///
/// Holds belong to the thread that took them: guards are not `Send`, and each thread of
/// a client is a distinct owner, as each Java thread is for Redisson. A thread may take a
/// lock it already holds; each acquisition is one more hold with its own guard.
///
/// Cloning is cheap (an `Arc`); clones are the same lock and share Redisson's
/// per-instance lease: the lease a partial release re-applies is the last explicit lease
/// taken through this instance, else the watchdog timeout.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
///
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client.get_lock("invoice:2024-17"); // an RLock = Lock<Reentrant>; no I/O yet
/// {
///     let _guard = lock.lock()?; // held until the end of the block
///     // ... the critical section ...
/// }
/// // Wait at most 2 s; hold at most 10 s, never renewed.
/// if let Some(guard) = lock.try_lock_with_lease(Duration::from_secs(2), Duration::from_secs(10))? {
///     guard.unlock()?; // see the release's result, where a drop only logs it
/// }
/// # Ok::<(), redmutex::Error>(())
/// ```
pub struct Lock<K: LockKind> {
    shared: Arc<Shared<K>>,
}

struct Shared<K> {
    core: Arc<Core>,
    kind: K,
    /// Redisson's `internalLockLeaseTime`: what a partial release sets the TTL to.
    lease_ms: AtomicU64,
}

impl<K: LockKind> Clone for Lock<K> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<K: LockKind> std::fmt::Debug for Lock<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(K::LOCK)
            .field("name", &self.name())
            .field("client", &self.shared.core.id())
            .finish()
    }
}

impl<K: LockKind> Lock<K> {
    pub(crate) fn new(core: Arc<Core>, kind: K) -> Self {
        let lease_ms = core.watchdog_ms();
        Self {
            shared: Arc::new(Shared {
                core,
                kind,
                lease_ms: AtomicU64::new(lease_ms),
            }),
        }
    }

    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.shared.core
    }

    pub(crate) fn kind(&self) -> &K {
        &self.shared.kind
    }
}
