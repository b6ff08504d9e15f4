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

use super::held::Claim;
use crate::clock::retry_after;
use crate::error::Result;
use crate::protocol::hash::{self, ReleaseArgs, Uncounted};
use crate::protocol::owner;
use crate::protocol::replies::{self, Forced, Released};
use crate::watchdog::Renewal;

use crate::wait::backoff::BackOff;

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

/// The lost-reply check of one acquire, as a kind's script needs it.
#[derive(Debug, Clone, Copy)]
pub struct Adopt<'a> {
    /// The caller's owner field.
    pub(crate) owner: &'a str,
    /// How many holds of the owner its client counts.
    pub(crate) counted: u32,
    /// The watchdog timeout in ms to renew a hold taken under the watchdog with; 0 for
    /// an explicit lease, which is left as its acquire set it.
    pub(crate) renew_ms: u64,
}

/// A waiter leaving a queue after giving up.
#[derive(Debug, Clone, Copy)]
pub struct Leave<'a> {
    /// The waiter's owner field.
    pub(crate) owner: &'a str,
    /// How long it was willing to wait (its queue slot); `None` for no limit.
    pub(crate) wait: Option<Duration>,
    /// The transport's publish command.
    pub(crate) publish: &'a str,
}

/// What an acquire script answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The caller holds the lock now; a fenced lock's grant carries its new token.
    Held {
        /// The fencing token of this grant (fenced locks only).
        token: Option<u64>,
    },
    /// Not granted; the retry hint (normally the holder's PTTL; -1 for none).
    Busy(i64),
}

impl From<Option<i64>> for Answer {
    /// The answer of every script but the fenced one: nil for a grant, else the hint.
    fn from(reply: Option<i64>) -> Self {
        reply.map_or(Self::Held { token: None }, Self::Busy)
    }
}

/// What every kind has: its key, and the channel its waiters listen on (unless the kind
/// answers [`RawLock::wait_channel`] otherwise).
#[derive(Debug)]
pub struct Names {
    pub(crate) name: String,
    pub(crate) channel: String,
}

impl Names {
    /// The key and Redisson's `RLock` channel of lock `name`.
    pub(crate) fn lock(name: String) -> Self {
        Self {
            channel: crate::protocol::names::lock_channel(&name),
            name,
        }
    }

    /// The `RLock` release of one hold, publishing `message` after the last one
    /// ([`replies::NO_MESSAGE`] for none). Every kind on the plain hash uses it.
    pub(crate) fn release_hold(
        &self,
        c: &mut Connection,
        r: &ReleaseArgs<'_>,
        message: &str,
    ) -> RedisResult<Released> {
        // The verification harness's seeded bug (test-only feature, inert unless its
        // environment variable is set): an unlock that publishes nothing, so waiters
        // sleep until the lease they last saw runs out instead of being woken.
        #[cfg(feature = "verify-broken-unlock-no-publish")]
        let message = if crate::verify_broken::active("unlock-no-publish") {
            ""
        } else {
            message
        };
        hash::release(c, [&self.name, &self.channel], message, r)
    }

    /// The `RLock` force release: deletes the hash and publishes the unlock message.
    pub(crate) fn force_delete(&self, c: &mut Connection, publish: &str) -> RedisResult<Forced> {
        hash::delete_and_publish(
            c,
            [&self.name, &self.channel],
            replies::UNLOCK_MESSAGE,
            publish,
        )
    }
}

/// Who owns the holds of a kind, which decides how the safe layer keeps its books.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ownership {
    /// The calling thread's field in the lock's hash: one owner takes many holds, this
    /// client counts them per field (`levels.rs`), and every release carries an unlock
    /// latch, so it may be sent again after a lost reply.
    Thread,
    /// A token drawn for the one hold, the key's whole value: the token itself tells a
    /// grant apart (no count), and a release is a compare-and-delete that must not be
    /// sent twice (a second one would find the key gone and report the hold lost).
    Token,
}

/// The owner of one acquisition: its owner field (the thread's, or a fresh token), and
/// the claim that keeps the thread from taking a non-counting lock twice.
#[derive(Debug)]
pub struct Owned {
    pub(crate) field: String,
    pub(crate) claim: Option<Claim>,
}

/// Shortest and longest pause between retries while a fair lock is free but another
/// waiter is first in line (see [`Backoff`]).
const MIN_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// The retry bound for a fair waiter's script answer.
///
/// A positive answer is the lock's remaining lease (or the head's remaining slot): a
/// retry by then finds the lock expired or the head purged. -1 means only a message can
/// help. 0 means the lock is free while another waiter is first in line; normally that
/// waiter takes the lock within milliseconds, after which the answer is its lease again.
/// Only if it has died does the state last (until its slot ends), so a short, growing
/// pause is the cheapest way to follow it. Redisson's waiter retries at once here,
/// spinning.
///
/// Every waiter carries one; only the fair lock's [`RawLock::retry_by`] uses it.
#[derive(Debug)]
pub struct Backoff(Duration);

impl Default for Backoff {
    fn default() -> Self {
        Self(MIN_BACKOFF)
    }
}

impl Backoff {
    pub(crate) fn retry_by(&mut self, hint: i64) -> Option<Instant> {
        if hint != 0 {
            self.0 = MIN_BACKOFF;
            return retry_after(hint);
        }
        let pause = self.0;
        self.0 = (self.0 * 2).min(MAX_BACKOFF);
        Instant::now().checked_add(pause)
    }
}

/// A kind of lock: its keys, owner field and scripts.
pub trait RawLock: Send + Sync + 'static {
    /// The public name of `Lock<Self>`, for `Debug` and log lines (`"RLock"`).
    const LOCK: &'static str;
    /// How the watchdog renews a hold taken without a lease.
    const RENEWAL: Renewal;
    /// Whether a waiter that gives up must leave a queue ([`leave`](Self::leave)).
    const QUEUES: bool = false;
    /// Whether a release answering "still held" means the releasing owner still has
    /// holds (false for the read-write halves, whose answer counts every owner's).
    const OWN_PARTLY: bool = true;

    /// The lock's key and channel.
    fn names(&self) -> &Names;

    /// Who owns a hold; see [`Ownership`].
    const OWNERSHIP: Ownership = Ownership::Thread;

    /// The lock's name as its user gave it. Defaults to its Redis key.
    fn name(&self) -> &str {
        &self.names().name
    }

    /// The lock's Redis key (its main one, for kinds with several).
    fn key(&self) -> &str {
        &self.names().name
    }

    /// The owner of a new acquisition by the current thread of client `client_id`.
    /// Defaults to the thread's owner field, with no claim.
    ///
    /// # Errors
    ///
    /// What a kind refuses before any I/O (the token lock: a second hold of one thread).
    fn new_owner(&self, client_id: &str) -> Result<Owned> {
        Ok(Owned {
            field: Self::owner(client_id, owner::thread_number()),
            claim: None,
        })
    }

    /// Whether `owner` holds the lock now: how a failed release finds out what became of
    /// it. Defaults to `HEXISTS` of the owner field.
    fn holds(&self, c: &mut Connection, owner: &str) -> RedisResult<bool> {
        redis::cmd("HEXISTS").arg(self.key()).arg(owner).query(c)
    }

    /// The owner field of thread `thread` of client `client_id`. Defaults to
    /// `<client-id>:<thread>`.
    fn owner(client_id: &str, thread: u64) -> String {
        owner::field(client_id, thread)
    }

    /// The channel a waiter with owner field `owner` sleeps on. Defaults to the lock's.
    fn wait_channel(&self, _owner: &str) -> Cow<'_, str> {
        Cow::Borrowed(&self.names().channel)
    }

    /// Every key of the lock, the main one first: what the expiry family covers and
    /// what a fenced write may not name. Defaults to the lock's key.
    fn keys(&self) -> Vec<&str> {
        vec![self.key()]
    }

    /// The key of the token counter a fenced write checks; for kinds without tokens, a
    /// key in the lock's slot that is never read.
    fn token_key(&self) -> &str {
        self.key()
    }

    /// After an acquire whose connection closed before its reply: `Some` when the owner
    /// has more holds than its client counts (an acquire of its own ran unanswered),
    /// with how long the hold lives at least, read in the same script as the count, and
    /// the grant's token for kinds with tokens. Renews the hold when `a.renew_ms` says
    /// so. Defaults to the check of the kinds kept in a plain hash (`lua/lock/adopt.lua`).
    fn adopt(&self, c: &mut Connection, a: &Adopt<'_>) -> RedisResult<Option<Uncounted>> {
        hash::adopt(c, self.key(), None, a.owner, a.counted, a.renew_ms)
    }

    /// The back-off between attempts of a kind whose waiters poll instead of listening
    /// (the spin lock); `None` for every kind with an unlock message.
    fn polls(&self) -> Option<&BackOff> {
        None
    }

    /// The acquire script of a waiting acquisition.
    fn acquire(&self, c: &mut Connection, a: &Acquire<'_>) -> RedisResult<Answer>;

    /// The acquire script of a single attempt (`try_lock()`); the waiting one unless the
    /// kind has a separate one.
    fn try_acquire(&self, c: &mut Connection, a: &Acquire<'_>) -> RedisResult<Answer> {
        self.acquire(c, a)
    }

    /// The release script for one hold of `r.owner`.
    fn release(&self, c: &mut Connection, r: &ReleaseArgs<'_>) -> RedisResult<Released>;

    /// The force-release script: deletes the lock whoever holds it (or, for a half of a
    /// read-write lock, only when it is in that half's mode) and wakes waiters.
    fn force_release(&self, c: &mut Connection, now: u64, publish: &str) -> RedisResult<Forced>;

    /// Whether anyone holds the lock. Defaults to `EXISTS`.
    fn is_locked(&self, c: &mut Connection) -> RedisResult<bool> {
        redis::cmd("EXISTS").arg(self.key()).query(c)
    }

    /// When to retry at the latest after an attempt answered `hint`; `None` when only a
    /// message can help. Defaults to the hint as a PTTL.
    fn retry_by(&self, hint: i64, _backoff: &mut Backoff) -> Option<Instant> {
        retry_after(hint)
    }

    /// Leaves the queue after giving up (only called when [`QUEUES`](Self::QUEUES)).
    fn leave(&self, _c: &mut Connection, _leave: &Leave<'_>) -> RedisResult<()> {
        Ok(())
    }
}

/// Any kind of lock: every [`HeldLock`] and the string-token lock's
/// [`Token`](crate::Token). Sealed: only this crate implements it. Each kind's
/// documentation says what its [`Lock`](crate::Lock) does differently.
pub trait LockKind: RawLock {}

impl<K: RawLock> LockKind for K {}

/// A kind whose holds belong to a thread's owner field in a hash, counted per hold:
/// [`Reentrant`](crate::Reentrant), [`Fair`](crate::Fair), [`Read`](crate::Read),
/// [`Write`](crate::Write), [`Fenced`](crate::Fenced), [`Spin`](crate::Spin) and the
/// non-reentrant kinds. The capability behind the methods that name a thread or an
/// [`Owner`](crate::Owner) instead of a guard (`unlock`, `hold_count`, `lock_as`, …), a
/// guard's `detach` and `fenced`, and membership in a [`MultiLock`](crate::MultiLock).
/// Sealed: only this crate implements it.
pub trait HeldLock: LockKind {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_only_while_the_answer_is_zero() {
        let mut b = Backoff::default();
        let now = Instant::now();
        assert!(b.retry_by(-1).is_none());
        let first = b.retry_by(0).unwrap();
        assert!(first <= Instant::now() + MIN_BACKOFF);
        for _ in 0..20 {
            b.retry_by(0);
        }
        assert_eq!(b.0, MAX_BACKOFF);
        assert!(b.retry_by(500).unwrap() >= now + Duration::from_millis(500));
        assert_eq!(b.0, MIN_BACKOFF);
    }
}
