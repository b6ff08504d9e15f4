//! Locks made of other locks: one [`Composite<P>`] with the acquisition family and one
//! [`CompositeGuard<P>`], and a policy per variant, as Redisson's `RedissonRedLock` is a
//! few overrides of `RedissonMultiLock`.
//!
//! - [`All`] (`multi.rs`): every member, of any kinds and clients, taken in list order
//!   (Redisson's `RedissonMultiLock`); [`MultiLock`] and [`MultiLockGuard`] name it.
//! - [`Majority`] (`red.rs`): an `RLock` on each of several independent servers, held
//!   when a majority granted, every member asked at once through the quorum engine
//!   (Redisson's `RedissonRedLock`); [`RedLock`] and [`RedLockGuard`] name it.
//!
//! What the two share is written here: the five acquisition forms with their lease
//! checks and metrics, Redisson's pass timing for `lock()`, the members' temporary lease
//! while acquiring and its replacement by the caller's (one parallel round), and the
//! guard with its loss rule (lost when fewer members than the policy needs are intact).
//! What differs is the policy's: how one attempt gathers grants, how holds are released,
//! how many intact members the hold needs.
//!
//! The quorum token lock (`token_lock/quorum.rs`) is not a policy here: it has no
//! member locks (one token written to every server, trusted for a validity computed
//! from the round), no watchdog forms, and redsync's bounded tries; it shares the quorum
//! engine with [`Majority`] instead.

mod multi;
mod red;

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::raw::HeldLock;
use super::safe::LockGuard;
use crate::clock;
use crate::error::{Error, Result};
use crate::metrics::{self, Outcome};
use crate::wait::backoff::random_below;
use crate::watchdog::hold::Loss;

pub use multi::{All, AnyLock, MultiLock, MultiLockGuard};
pub use red::{Majority, RedLock, RedLockGuard};

/// The holds a composite keeps: each member's hold with the member's index, in member
/// order.
type Grants<H> = Vec<(usize, H)>;

/// How a [`Composite`] acquires, releases and judges its members: [`All`] or
/// [`Majority`]. Sealed: only this crate implements it.
pub trait Policy: Send + Sync + Sized + 'static {
    /// A member lock.
    type Member: std::fmt::Debug;
    /// A member's hold, as a guard keeps it.
    type Held: Held;
    /// The public name of `Composite<Self>`, for metrics, errors and `Debug`.
    const KIND: &'static str;
    /// The public name of its guard, for `Debug`.
    const GUARD: &'static str;

    /// The members, in the order given.
    fn members(&self) -> &[Self::Member];

    /// How many intact member holds a hold needs.
    fn needed(&self) -> usize;

    /// One acquisition before the caller's lease is applied: Redisson's
    /// `tryLock(wait, lease)` (`wait: None` is its `wait ≤ 0`), asking each member for
    /// `member_lease` (`None`: the member's watchdog). The grants, with each member's
    /// index, when the policy is satisfied; `Ok(None)` when the wait ran out.
    fn gather(
        &self,
        wait: Option<Duration>,
        member_lease: Option<Duration>,
    ) -> Result<Option<Grants<Self::Held>>>;

    /// Releases the holds of a guard and reports how it went.
    fn release(&self, held: Grants<Self::Held>) -> Result<()>;

    /// Releases one hold of the current thread on every member, for detached guards.
    fn unlock_detached(&self) -> Result<()>;
}

/// What a composite guard needs of a member's hold.
pub trait Held: Sync {
    /// The member lock's name.
    fn name(&self) -> &str;
    /// Whether the hold is known or presumed lost, and how.
    fn loss(&self) -> Option<Loss>;
    /// Replaces the hold's lease by `lease` from now.
    fn relet(&self, lease: Duration) -> Result<bool>;
    /// Keeps the member held but gives up the hold's guard.
    fn detach(self);
}

impl<K: HeldLock> Held for LockGuard<K> {
    fn name(&self) -> &str {
        self.lock().name()
    }

    fn loss(&self) -> Option<Loss> {
        LockGuard::loss(self)
    }

    fn relet(&self, lease: Duration) -> Result<bool> {
        LockGuard::relet(self, lease)
    }

    fn detach(self) {
        LockGuard::detach(self);
    }
}

/// A lock made of member locks, held together by the policy `P`: [`MultiLock`]
/// (`Composite<All>`) or [`RedLock`] (`Composite<Majority>`); see those for what each
/// does. Cheap to clone: clones share the members.
pub struct Composite<P> {
    policy: Arc<P>,
}

impl<P> Clone for Composite<P> {
    fn clone(&self) -> Self {
        Self {
            policy: Arc::clone(&self.policy),
        }
    }
}

impl<P: Policy> std::fmt::Debug for Composite<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(P::KIND)
            .field("members", &self.policy.members())
            .finish()
    }
}

impl<P: Policy> Composite<P> {
    fn with(policy: P) -> Self {
        Self {
            policy: Arc::new(policy),
        }
    }

    /// The member locks, in acquisition order.
    pub fn members(&self) -> &[P::Member] {
        self.policy.members()
    }

    /// Waits as long as it takes, then holds the members, each under its client's
    /// watchdog (Redisson `lock()`: passes of 1.5 s per member until one succeeds).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for an empty member list; the policy's acquisition errors (see
    /// [`MultiLock`] and [`RedLock`]).
    pub fn lock(&self) -> Result<CompositeGuard<P>> {
        let pass = pass_wait(self.members().len());
        metrics::composite(P::KIND, Outcome::of_guard, || {
            self.lock_in_passes(pass, None)
        })
    }

    /// Waits as long as it takes, then holds the members for `lease` (Redisson
    /// `lock(leaseTime, unit)`). Each pass waits a random time below the lease, as
    /// Redisson's does.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock); [`Error::InvalidArgument`] for a zero or absurd lease.
    pub fn lock_with_lease(&self, lease: Duration) -> Result<CompositeGuard<P>> {
        clock::lease_ms(lease)?;
        let pass = lease_pass(self.members().len(), lease);
        metrics::composite(P::KIND, Outcome::of_guard, || {
            self.lock_in_passes(pass, Some(lease))
        })
    }

    /// One pass, no waiting: a single attempt at each member, held under the members'
    /// watchdogs on success (Redisson `tryLock()`). `Ok(None)` when the policy is not
    /// satisfied; the grants made are released.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn try_lock(&self) -> Result<Option<CompositeGuard<P>>> {
        metrics::composite(P::KIND, Outcome::of, || self.attempt(None, None))
    }

    /// Waits at most `wait` in all, holding the members under their watchdogs on
    /// success (Redisson `tryLock(waitTime, unit)`).
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<CompositeGuard<P>>> {
        metrics::composite(P::KIND, Outcome::of, || self.attempt(Some(wait), None))
    }

    /// Waits at most `wait` in all, then holds the members for `lease` (Redisson
    /// `tryLock(waitTime, leaseTime, unit)`).
    ///
    /// # Errors
    ///
    /// As [`lock_with_lease`](Self::lock_with_lease).
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<CompositeGuard<P>>> {
        clock::lease_ms(lease)?;
        metrics::composite(P::KIND, Outcome::of, || {
            self.attempt(Some(wait), Some(lease))
        })
    }

    /// Releases one hold of the current thread on every member, for holds whose guard
    /// was [detached](CompositeGuard::detach) (Redisson `unlock()`).
    ///
    /// # Errors
    ///
    /// For a [`MultiLock`], [`Error::Members`] with every member that failed (not held
    /// included); the others were released. For a [`RedLock`], whose members the thread
    /// may not all hold (those that had not granted are skipped), [`Error::NoQuorum`]
    /// (operation `"release"`) when fewer than a majority were released, else
    /// [`Error::Members`] with each member that failed otherwise than by not being held.
    pub fn unlock(&self) -> Result<()> {
        self.policy.unlock_detached()
    }

    /// Redisson's `lock()`: passes of `pass` each until one succeeds.
    fn lock_in_passes(&self, pass: Duration, lease: Option<Duration>) -> Result<CompositeGuard<P>> {
        loop {
            if let Some(guard) = self.attempt(Some(pass), lease)? {
                return Ok(guard);
            }
        }
    }

    /// Redisson's `tryLock(wait, lease)`: the policy's gathering under a temporary
    /// lease, then the caller's lease on every grant.
    fn attempt(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Result<Option<CompositeGuard<P>>> {
        if self.members().is_empty() {
            return Err(Error::Config(format!(
                "a {} needs at least one lock",
                P::KIND
            )));
        }
        // The members' lease while acquiring: long enough to outlast the whole wait,
        // replaced by the caller's once the policy is satisfied.
        let member_lease = match (lease, wait) {
            (Some(_), Some(w)) if !w.is_zero() => Some(w.saturating_mul(2)),
            (lease, _) => lease,
        };
        let Some(held) = self.policy.gather(wait, member_lease)? else {
            return Ok(None);
        };
        if let Some(lease) = lease.filter(|l| Some(*l) != member_lease)
            && let Err(e) = relet_all(&held, lease)
        {
            // Released here, not by a guard's drop: it never was a hold, so the held
            // gauge and the hold duration must not see it end.
            if let Err(release) = self.policy.release(held) {
                log::warn!(
                    "redmutex: releasing {} members after a failed relet: {release}",
                    P::KIND
                );
            }
            return Err(e);
        }
        Ok(Some(CompositeGuard {
            lock: self.clone(),
            held,
            granted: Instant::now(),
            _not_send: PhantomData,
        }))
    }
}

/// Replaces every grant's temporary lease by `lease`, in one parallel round: each
/// member's `PEXPIRE` goes out on its own thread (the first on this one), so the round
/// costs the slowest member, not the sum of them, and every member's lease ends within
/// one round of the others'. The first failure in member order is returned.
fn relet_all<H: Held>(held: &[(usize, H)], lease: Duration) -> Result<()> {
    let Some(((_, first), rest)) = held.split_first() else {
        return Ok(());
    };
    let (first, rest) = std::thread::scope(|s| {
        let rest: Vec<_> = rest
            .iter()
            .map(|(_, h)| s.spawn(move || h.relet(lease)))
            .collect();
        let first = first.relet(lease);
        let rest: Vec<Result<bool>> = rest
            .into_iter()
            .map(|t| {
                t.join().unwrap_or_else(|_| {
                    Err(Error::Io(std::io::Error::other("a relet thread panicked")))
                })
            })
            .collect();
        (first, rest)
    });
    std::iter::once(first)
        .chain(rest)
        .try_for_each(|r| r.map(drop))
}

/// How long Redisson's `lock()` lets each pass of a composite lock wait per member.
const PASS_WAIT_PER_MEMBER: Duration = Duration::from_millis(1500);

/// The wait of each pass of Redisson's `lock()` over `members` members: 1.5 s per member.
fn pass_wait(members: usize) -> Duration {
    PASS_WAIT_PER_MEMBER.saturating_mul(u32::try_from(members).unwrap_or(u32::MAX))
}

/// The wait of each pass of Redisson's `lock(lease)` over `members` members: a random
/// time below the lease, from half the lease, or from [`pass_wait`] when the lease is
/// longer than that.
fn lease_pass(members: usize, lease: Duration) -> Duration {
    let base = pass_wait(members);
    let (low, high) = if lease <= base {
        (lease / 2, lease)
    } else {
        (base, lease)
    };
    let span = u64::try_from((high - low).as_millis()).unwrap_or(u64::MAX);
    let pass = low + Duration::from_millis(random_below(span));
    pass.max(Duration::from_millis(1))
}

/// `Ok` when every result is; else [`Error::Members`] with each failure.
fn collect_failures(results: impl Iterator<Item = (String, Result<()>)>) -> Result<()> {
    let failures: Vec<(String, Error)> = results
        .filter_map(|(name, r)| r.err().map(|e| (name, e)))
        .collect();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(Error::Members(failures))
    }
}

/// The members of a [`Composite`] that granted, held; released when dropped.
///
/// Dropping the guard releases every member it holds and logs failures; call
/// [`unlock`](Self::unlock) to see them. Like every guard it stays on the thread that
/// took it.
///
/// # Examples
///
/// ```no_run
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let both = client.get_multi_lock([
///     client.get_lock("account:1").into(),
///     client.get_lock("account:2").into(),
/// ]);
/// let guard = both.lock()?;
/// // ... move money between the two accounts ...
/// for (name, loss) in guard.losses() {
///     eprintln!("{name} was lost ({loss:?}) during the transfer");
/// }
/// guard.unlock()?;
/// # Ok::<(), redmutex::Error>(())
/// ```
#[must_use = "dropping the guard unlocks every member at once: bind it (`let guard = lock.lock()?;`) for the critical section"]
#[clippy::has_significant_drop]
pub struct CompositeGuard<P: Policy> {
    lock: Composite<P>,
    /// The members that granted, with their indices, in member order.
    held: Grants<P::Held>,
    /// When the policy was satisfied, for the hold-duration metric.
    granted: Instant,
    _not_send: PhantomData<std::sync::MutexGuard<'static, ()>>,
}

impl<P: Policy> CompositeGuard<P> {
    /// How many members granted the lock: every member for a [`MultiLock`], at least
    /// [`RedLock::quorum`] for a [`RedLock`].
    pub fn granted(&self) -> usize {
        self.held.len()
    }

    /// Releases every member this guard holds, all of them even when some fail (a
    /// [`RedLock`]'s in parallel: one round trip plus the slowest member).
    ///
    /// # Errors
    ///
    /// [`Error::Members`] with each member that failed (its hold lost:
    /// [`Error::LockLost`]; Redis errors); the others were released. For a [`RedLock`],
    /// [`Error::NoQuorum`] (operation `"release"`) when fewer than a majority of the
    /// members were released, each failure with its member's index. Members not
    /// released expire with their lease. Redisson 4.x's MultiLock stops at the first
    /// failure and leaves the members after it held; its RedLock ignores every failure.
    pub fn unlock(mut self) -> Result<()> {
        metrics::guard_ended(P::KIND, None, Some(self.granted.elapsed()));
        let held = std::mem::take(&mut self.held);
        self.lock.policy.release(held)
    }

    /// Keeps every member held but gives up the guard; release them later on the same
    /// thread with [`Composite::unlock`].
    pub fn detach(mut self) {
        metrics::guard_ended(P::KIND, None, None);
        for (_, held) in std::mem::take(&mut self.held) {
            held.detach();
        }
    }

    /// Whether the hold is known or presumed lost, without asking Redis: any member's
    /// for a [`MultiLock`], fewer than a majority intact for a [`RedLock`] (see
    /// [`LockGuard::is_lost`](crate::LockGuard::is_lost)).
    pub fn is_lost(&self) -> bool {
        let intact = self.held.iter().filter(|(_, h)| h.loss().is_none()).count();
        intact < self.lock.policy.needed()
    }

    /// The names of the members whose holds are known or presumed lost, with why.
    pub fn losses(&self) -> Vec<(&str, Loss)> {
        self.held
            .iter()
            .filter_map(|(_, h)| h.loss().map(|l| (h.name(), l)))
            .collect()
    }
}

impl<P: Policy> std::fmt::Debug for CompositeGuard<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.held.iter().map(|(_, h)| h.name()).collect();
        f.debug_struct(P::GUARD)
            .field("held", &names)
            .field("lost", &self.is_lost())
            .finish()
    }
}

impl<P: Policy> Drop for CompositeGuard<P> {
    fn drop(&mut self) {
        if self.held.is_empty() {
            return;
        }
        metrics::guard_ended(P::KIND, None, Some(self.granted.elapsed()));
        if let Err(e) = self.lock.policy.release(std::mem::take(&mut self.held)) {
            log::warn!("redmutex: releasing {} on drop: {e}", P::GUARD);
        }
    }
}
