//! The [`All`] policy, Redisson's `RedissonMultiLock`: all of several locks, of any kinds
//! and any clients, held together; and [`AnyLock`], the member handle it takes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::super::raw::HeldLock;
use super::super::safe::{Lock, LockGuard, Patience};
use super::{Composite, CompositeGuard, Grants, Held, Policy, collect_failures};
use crate::error::{Error, Result};
use crate::watchdog::hold::Loss;

/// What a MultiLock needs of a member: every `Lock<K>` is one.
pub(super) trait Member: Send + Sync {
    fn name(&self) -> &str;
    fn kind(&self) -> &'static str;
    /// One member acquisition, for `lease` (`None`: the member's watchdog).
    fn take(&self, lease: Option<Duration>, patience: Patience) -> Result<Option<Box<dyn Grant>>>;
    /// Releases one hold of the current thread (Redisson `unlock()` on the member).
    fn unlock_current(&self) -> Result<()>;
    /// Releases the hold of a timed-out acquire of the current thread, if it ran (see
    /// [`Lock::take_back_uncounted`]).
    fn take_back(&self) -> Result<()>;
    fn is_held_by_current_thread(&self) -> Result<bool>;
}

/// A member's hold of any kind, as a MultiLock's guard keeps it.
pub trait Grant: Sync {
    /// The member lock's name.
    fn name(&self) -> &str;
    /// Releases the hold.
    fn release(self: Box<Self>) -> Result<()>;
    /// Gives up the guard, keeping the member held.
    fn detach(self: Box<Self>);
    /// Whether the hold is known or presumed lost, and how.
    fn loss(&self) -> Option<Loss>;
    /// Replaces the hold's lease by `lease` from now.
    fn relet(&self, lease: Duration) -> Result<bool>;
}

impl<K: HeldLock> Member for Lock<K> {
    fn name(&self) -> &str {
        Lock::name(self)
    }

    fn kind(&self) -> &'static str {
        K::LOCK
    }

    fn take(&self, lease: Option<Duration>, patience: Patience) -> Result<Option<Box<dyn Grant>>> {
        let guard = self.acquire(lease, patience)?;
        Ok(guard.map(|g| Box::new(g) as Box<dyn Grant>))
    }

    fn unlock_current(&self) -> Result<()> {
        self.unlock()
    }

    fn take_back(&self) -> Result<()> {
        self.take_back_uncounted()
    }

    fn is_held_by_current_thread(&self) -> Result<bool> {
        Lock::is_held_by_current_thread(self)
    }
}

impl<K: HeldLock> Grant for LockGuard<K> {
    fn name(&self) -> &str {
        self.lock().name()
    }

    fn release(self: Box<Self>) -> Result<()> {
        (*self).unlock()
    }

    fn detach(self: Box<Self>) {
        (*self).detach();
    }

    fn loss(&self) -> Option<Loss> {
        LockGuard::loss(self)
    }

    fn relet(&self, lease: Duration) -> Result<bool> {
        LockGuard::relet(self, lease)
    }
}

/// A member of a [`MultiLock`] or `RedLock`: any lock of this crate,
/// of any kind, from any [`Client`](crate::Client). Made with `From`, so
/// `[a.into(), b.into()]` builds a member list from locks of different kinds.
///
/// # Examples
///
/// ```no_run
/// use redmutex::AnyLock;
///
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let members: Vec<AnyLock> = vec![
///     client.get_lock("account:1").into(),
///     client.get_fair_lock("account:2").into(),
///     client.get_read_write_lock("ledger").write_lock().into(),
/// ];
/// let all = client.get_multi_lock(members);
/// let guard = all.lock()?; // every member, or none
/// guard.unlock()?;
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Clone)]
pub struct AnyLock(pub(super) Arc<dyn Member>);

impl<K: HeldLock> From<Lock<K>> for AnyLock {
    fn from(lock: Lock<K>) -> Self {
        Self(Arc::new(lock))
    }
}

impl<K: HeldLock> From<&Lock<K>> for AnyLock {
    fn from(lock: &Lock<K>) -> Self {
        Self(Arc::new(lock.clone()))
    }
}

impl AnyLock {
    /// The member lock's name.
    pub fn name(&self) -> &str {
        self.0.name()
    }
}

impl std::fmt::Debug for AnyLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({:?})", self.0.kind(), self.0.name())
    }
}

/// All of several locks, held together: Redisson's `RedissonMultiLock`
/// (`getMultiLock(lock1, lock2, …)`).
///
/// The members may be locks of any kinds ([`AnyLock`]) on any clients, so on different
/// Redis servers; each is held by its own rules, keys and watchdog, and nothing is
/// stored for the MultiLock itself, so a Redisson MultiLock over the same names (and
/// Redisson clients taking the members alone) exclude it and are excluded by it.
///
/// Acquisition is Redisson's loop: the members in list order, each with
/// `try_lock(min(wait, time left))` (a single attempt when there is no wait). When one is
/// not granted, every member taken so far is released and, if time is left, the loop
/// starts again from the first member. While acquiring with an explicit lease the
/// members get a temporary lease of twice the wait, replaced by the caller's lease on
/// success (a `PEXPIRE` of each member's lock key only, all in one parallel round, as
/// Redisson's futures do; Redisson's also puts that TTL on
/// a fenced member's token counter and a fair member's queue, which can reset tokens;
/// no Redisson client can tell the difference otherwise). Without a lease every member
/// is renewed by its own client's watchdog. [`lock`](Composite::lock) repeats passes of
/// 1.5 s per member until one succeeds.
///
/// Two differences from Redisson, both where it would loop blindly: a member whose
/// acquisition fails with an error (a server down, not a timeout) ends the attempt with
/// that error, its partial grants released, where Redisson counts it as a refusal and
/// starts over at once until the wait runs out; a member that times out is released
/// (its grant may have happened) and counted as not granted, as in Redisson.
///
/// Locks in a MultiLock must not be taken by the same thread outside it at the same
/// time: a member's release after a time-out releases one hold of the thread, whoever
/// took it, as in Redisson.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
///
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let other = redmutex::Client::open("redis://127.0.0.1:6380")?;
/// let both = client.get_multi_lock([
///     client.get_lock("account:1").into(),
///     other.get_fair_lock("account:2").into(),
/// ]);
/// if let Some(guard) = both.try_lock_for(Duration::from_secs(2))? {
///     // ... both held ...
///     guard.unlock()?;
/// }
/// # Ok::<(), redmutex::Error>(())
/// ```
pub type MultiLock = Composite<All>;

/// Every member of a [`MultiLock`], held; released when dropped (see
/// [`CompositeGuard`]).
pub type MultiLockGuard = CompositeGuard<All>;

/// The policy of a [`MultiLock`]: every member, taken in list order, one after another.
#[derive(Debug)]
pub struct All {
    members: Box<[AnyLock]>,
}

impl Composite<All> {
    pub(crate) fn new(members: impl IntoIterator<Item = AnyLock>) -> Self {
        Self::with(All {
            members: members.into_iter().collect(),
        })
    }

    /// Whether the current thread holds every member (Redisson 3.27.2+
    /// `isHeldByCurrentThread`).
    ///
    /// # Errors
    ///
    /// The first member's error.
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        for m in self.members() {
            if !m.0.is_held_by_current_thread()? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

impl Policy for All {
    type Member = AnyLock;
    type Held = Box<dyn Grant>;
    const KIND: &'static str = "MultiLock";
    const GUARD: &'static str = "MultiLockGuard";

    fn members(&self) -> &[AnyLock] {
        &self.members
    }

    fn needed(&self) -> usize {
        self.members.len()
    }

    /// Redisson's loop (see [`MultiLock`]): the members in order, starting again from
    /// the first after a refusal while time is left.
    fn gather(
        &self,
        wait: Option<Duration>,
        member_lease: Option<Duration>,
    ) -> Result<Option<Grants<Box<dyn Grant>>>> {
        let deadline = wait.and_then(|w| Instant::now().checked_add(w));
        let mut held: Grants<Box<dyn Grant>> = Vec::with_capacity(self.members.len());
        let mut next = 0;
        while let Some(member) = self.members.get(next) {
            let patience = match deadline {
                None => Patience::Once,
                Some(d) => Patience::For(d.saturating_duration_since(Instant::now())),
            };
            match member.0.take(member_lease, patience) {
                Ok(Some(guard)) => {
                    held.push((next, guard));
                    next += 1;
                }
                Ok(None) => {
                    release_quietly(held.drain(..));
                    if wait.is_none() {
                        return Ok(None);
                    }
                    next = 0;
                }
                Err(e @ Error::ResponseTimeout(_)) => {
                    // The grant may have happened without its reply: take it back, but
                    // only if it did (the thread may hold the member besides).
                    log::debug!(
                        "redmutex: MultiLock member {:?} timed out: {e}",
                        member.name()
                    );
                    if let Err(e) = member.0.take_back() {
                        log::warn!(
                            "redmutex: could not take back a timed-out acquire of MultiLock \
                             member {:?}; if it ran, its hold goes with the thread's last \
                             release of that lock, or expires: {e}",
                            member.name()
                        );
                    }
                    release_quietly(held.drain(..));
                    if wait.is_none() {
                        return Ok(None);
                    }
                    next = 0;
                }
                Err(e) => {
                    release_quietly(held.drain(..));
                    return Err(e);
                }
            }
            if deadline.is_some_and(|d| Instant::now() >= d) && next < self.members.len() {
                release_quietly(held.drain(..));
                return Ok(None);
            }
        }
        Ok(Some(held))
    }

    /// Every hold released, every failure reported.
    fn release(&self, held: Grants<Box<dyn Grant>>) -> Result<()> {
        collect_failures(
            held.into_iter()
                .map(|(_, h)| (h.name().to_owned(), h.release())),
        )
    }

    /// One hold of the current thread on every member; every failure (not held
    /// included) reported.
    fn unlock_detached(&self) -> Result<()> {
        collect_failures(
            self.members
                .iter()
                .map(|m| (m.name().to_owned(), m.0.unlock_current())),
        )
    }
}

impl Held for Box<dyn Grant> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn loss(&self) -> Option<Loss> {
        (**self).loss()
    }

    fn relet(&self, lease: Duration) -> Result<bool> {
        (**self).relet(lease)
    }

    fn detach(self) {
        Grant::detach(self);
    }
}

/// Releases partial grants, logging failures: the caller reports what made it give up,
/// and a grant that could not be released expires with its lease.
fn release_quietly(held: impl Iterator<Item = (usize, Box<dyn Grant>)>) {
    for (_, guard) in held {
        let name = guard.name().to_owned();
        if let Err(e) = guard.release() {
            log::warn!("redmutex: releasing partial grant {name:?} failed: {e}");
        }
    }
}
