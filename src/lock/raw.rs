//! What differs between lock kinds: the raw layer under the one safe `Lock`, in
//! lock_api's shape (a raw trait per kind of lock, one generic safe type over it).
//!
//! A kind knows its keys, its owner field, its scripts and how to read their answers;
//! it knows nothing about waiting, guards, renewal or retries, which `Lock` does once
//! for every kind. The trait is public only to bound the public generic types; its
//! module is private, so nobody outside the crate can name, call or implement it.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use redis::{Connection, RedisResult};

use crate::clock::retry_after;
use crate::scripts::{Forced, ReleaseArgs, Released};
use crate::watchdog::Renewal;

/// One acquisition attempt as a kind's script needs it.
#[derive(Debug, Clone, Copy)]
pub struct Acquire<'a> {
    /// The caller's owner field.
    pub(crate) owner: &'a str,
    /// The lease the lock gets: the explicit one or the watchdog timeout.
    pub(crate) lease_ms: u64,
    /// How long the caller waits at most; `None` for no limit.
    pub(crate) wait: Option<Duration>,
    /// The wall clock, for scripts that compare stored epoch times.
    pub(crate) now_ms: u64,
}

/// A kind of lock: its keys, owner field and scripts.
pub trait RawLock: Send + Sync + 'static {
    /// The public name of `Lock<Self>`, for `Debug` and log lines (`"RLock"`).
    const LOCK: &'static str;
    /// How the watchdog renews a hold taken without a lease.
    const RENEWAL: Renewal;
    /// Whether a waiter that gives up must leave a queue ([`leave`](Self::leave)).
    const QUEUES: bool = false;

    /// What a waiter remembers between attempts to pace its retries.
    type Retry: Default;

    /// The lock's name, which is its Redis key.
    fn name(&self) -> &str;

    /// The owner field of thread `thread` of client `client_id`.
    fn owner(client_id: &str, thread: u64) -> String;

    /// The channel a waiter with owner field `owner` sleeps on.
    fn wait_channel(&self, owner: &str) -> Cow<'_, str>;

    /// The acquire script of a waiting acquisition: `None` when the caller holds the lock
    /// afterwards, else the retry hint (normally the holder's PTTL; -1 for none).
    fn acquire(&self, c: &mut Connection, a: &Acquire<'_>) -> RedisResult<Option<i64>>;

    /// The acquire script of a single attempt (`try_lock()`); the waiting one unless the
    /// kind has a separate one.
    fn try_acquire(&self, c: &mut Connection, a: &Acquire<'_>) -> RedisResult<Option<i64>> {
        self.acquire(c, a)
    }

    /// The release script for one hold of `r.owner`.
    fn release(&self, c: &mut Connection, r: &ReleaseArgs<'_>) -> RedisResult<Released>;

    /// The force-release script: deletes the lock whoever holds it (or, for a half of a
    /// read-write lock, only when it is in that half's mode) and wakes waiters.
    fn force_release(&self, c: &mut Connection, now_ms: u64, publish: &str) -> RedisResult<Forced>;

    /// Whether anyone holds the lock. Defaults to `EXISTS`.
    fn is_locked(&self, c: &mut Connection) -> RedisResult<bool> {
        redis::cmd("EXISTS").arg(self.name()).query(c)
    }

    /// When to retry at the latest after an attempt answered `hint`; `None` when only a
    /// message can help. Defaults to the hint as a PTTL.
    fn retry_by(&self, hint: i64, _retry: &mut Self::Retry) -> Option<Instant> {
        retry_after(hint)
    }

    /// Leaves the queue after giving up (only called when [`QUEUES`](Self::QUEUES)).
    fn leave(
        &self,
        _c: &mut Connection,
        _owner: &str,
        _wait: Option<Duration>,
        _publish: &str,
    ) -> RedisResult<()> {
        Ok(())
    }
}

/// A kind of lock: [`Reentrant`](crate::Reentrant), [`Fair`](crate::Fair),
/// [`Read`](crate::Read) or [`Write`](crate::Write). Sealed: only this crate implements
/// it. Each kind's documentation says what its [`Lock`](crate::Lock) does differently.
pub trait HeldLock: RawLock {}

impl<K: RawLock> HeldLock for K {}
