//! The [`Majority`] policy, Redisson's `RedissonRedLock`: an [`RLock`] on each of several
//! independent servers, held when a majority of them granted it, with the members asked
//! in parallel through the quorum engine.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::Value;

use super::super::raw::RawLock;
use super::super::reentrant::{RLock, RLockGuard};
use super::{Composite, CompositeGuard, Grants, Policy};
use crate::clock::{self, earliest};
use crate::core::Core;
use crate::error::{Error, Result};
use crate::protocol::hash::{self, Reentry};
use crate::protocol::replies::{Released, UNLOCK_MESSAGE};
use crate::pubsub::{self, Interest, Subscription, WakeRule, Woken};
use crate::quorum::{self, Question, Request, Vote};
use crate::random;
use crate::watchdog::Renewal;
use crate::watchdog::hold::Hold;

/// Redisson's `RedissonRedLock` (`getRedLock(lock1, lock2, …)`): one [`RLock`] on each of
/// several independent Redis servers, held when a majority of them (`n / 2 + 1`) granted
/// it.
///
/// # Deprecated, as in Redisson
///
/// Redisson deprecated its RedLock (3.12.5; the annotation came after 3.23.5) and so does
/// this crate; it is here so that Rust services can take part where Java services still
/// use it. Its safety rests on assumptions that real systems break:
///
/// - **Pauses and clocks.** A holder frozen by a GC pause, SIGSTOP or a swap storm past
///   its lease keeps believing it holds the lock while a majority's keys expire and
///   someone else takes it; a server whose clock jumps ahead expires its key early. No
///   check inside the lock can see this; only a fencing token checked by the guarded
///   resource can ([`RFencedLock`](crate::RFencedLock)).
/// - **Servers restarted empty.** A server without persistence (or with `appendfsync`
///   other than `always`) that restarts right after granting has forgotten the grant, and
///   can grant it again: with 5 servers, a holder on A, B, C and a restart of C let a
///   second client take C, D, E. The rule that prevents it: keep a restarted server out
///   of service (do not start it, or keep it unreachable) for longer than the longest
///   lease any client takes, so that every grant it forgot has expired elsewhere too.
///   This crate cannot enforce that rule; the operator must.
///
/// Redisson recommends an [`RLock`] on one primary with replica acknowledgement, or an
/// [`RFencedLock`](crate::RFencedLock) where the resource can check a token.
///
/// # The wire and the algorithm
///
/// Each member is a plain Redisson lock hash on its own server, with the owner field of
/// that member's client (`<that client's id>:<thread>`), so a Java `RedissonRedLock`
/// over the same servers and names excludes this one and is excluded by it, and a
/// Redisson `RLock` on one member sees an ordinary hold. Nothing is stored for the
/// RedLock itself.
///
/// Unlike Redisson, which asks the members one after another, every acquire goes out
/// **at once**: the acquire script is written to every member's connection, then every
/// reply is read, so a round costs about one round trip plus the slowest member, not
/// the sum of them. Other clients cannot tell the difference: they see the same scripts,
/// the same leases and the same releases.
///
/// Redisson's timing is kept, made parallel: each member may wait `max(wait / n, 1 ms)`
/// (computed once, from the whole wait) for its holder to let go. A pass asks every
/// member; the members that were busy are waited for together, each woken by its own
/// server's unlock message or its holder's lease end, and asked again, while the grants
/// already made are kept. A pass that has no majority when the per-member wait is over
/// releases its partial grants and, if the caller's wait allows, starts again after a
/// short random pause (so that contenders that split the members do not meet again in
/// step). A round waits for replies at most a twentieth of the members' lease (go-redsync's
/// timeout factor; at least 10 ms, at most the response timeout), so a dead member costs
/// a round that much. A member that does not answer in time may have granted all the
/// same; its possible grant is released too, as Redisson does.
///
/// When the members that failed (down, refusing, timing out) leave no majority possible,
/// the attempt ends at once with [`Error::NoQuorum`] rather than waiting out its time;
/// a lock merely held elsewhere is `Ok(None)`.
///
/// Leases are Redisson's: without one, every member's hold is renewed by its own
/// client's watchdog; with one and a wait, the members get twice the wait while
/// acquiring and the caller's lease (a `PEXPIRE` of each member's key, all in one
/// parallel round) once a majority is held.
///
/// Re-entry works member by member, as in Redisson: a thread that holds the RedLock may
/// take it again, each member counting one more hold.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use redmutex::Client;
///
/// let clients: Vec<Client> = (6379..6384)
///     .map(|port| Client::open(&format!("redis://127.0.0.1:{port}")))
///     .collect::<Result<_, _>>()?;
/// let red = clients[0].get_red_lock(clients.iter().map(|c| c.get_lock("payments")));
/// if let Some(guard) = red.try_lock_for(Duration::from_secs(1))? {
///     // ... held on a majority ...
///     guard.unlock()?;
/// }
/// # Ok::<(), redmutex::Error>(())
/// ```
pub type RedLock = Composite<Majority>;

/// A majority of a [`RedLock`]'s members, held; released when dropped, in parallel (see
/// [`CompositeGuard`]).
pub type RedLockGuard = CompositeGuard<Majority>;

/// The policy of a [`RedLock`]: a majority of its RLocks, every member asked at once.
#[derive(Debug)]
pub struct Majority {
    members: Vec<RLock>,
    /// Each member's client, in member order, for the quorum engine.
    cores: Vec<Arc<Core>>,
}

/// What one pass over the members ended with.
enum Pass {
    /// A majority is held: the members that granted, with their indices.
    Held(Grants<RLockGuard>),
    /// No majority within the per-member wait; every grant of the pass was released.
    Short,
}

/// What the renewal registry knows of the members a release lists besides a guard's.
#[derive(Clone, Copy)]
enum Others {
    /// The thread's holds, detached from their guards: the registry has them.
    Registered,
    /// Possible grants whose reply was lost: the registry never heard of them.
    Unregistered,
}

/// How one member's release is settled.
#[derive(Clone, Copy)]
enum Settle<'a> {
    /// As a single lock's release, with the hold its guard or the registry knows.
    Hold(Option<&'a Hold>),
    /// Without touching the registry.
    Blind,
}

/// Why a pass's loop stopped, before its leftovers are released.
enum End {
    Held,
    Short,
    Failed(Error),
}

impl Composite<Majority> {
    pub(crate) fn new(members: impl IntoIterator<Item = RLock>) -> Self {
        let members: Vec<RLock> = members.into_iter().collect();
        let cores = members.iter().map(|m| Arc::clone(m.core())).collect();
        Self::with(Majority { members, cores })
    }

    /// How many members must grant the lock: `members / 2 + 1`.
    pub fn quorum(&self) -> usize {
        quorum::needed(self.members().len())
    }
}

impl Policy for Majority {
    type Member = RLock;
    type Held = RLockGuard;
    const KIND: &'static str = "RedLock";
    const GUARD: &'static str = "RedLockGuard";

    fn members(&self) -> &[RLock] {
        &self.members
    }

    fn needed(&self) -> usize {
        quorum::needed(self.members.len())
    }

    /// Redisson's `tryLock(wait, lease)`, made parallel (see [`RedLock`]); `wait: None`
    /// is its `wait ≤ 0`: one round, no pass after it.
    fn gather(
        &self,
        wait: Option<Duration>,
        member_lease: Option<Duration>,
    ) -> Result<Option<Grants<RLockGuard>>> {
        let n = self.members.len();
        let wait = wait.filter(|w| !w.is_zero());
        let deadline = wait.and_then(|w| Instant::now().checked_add(w));
        // Redisson's `calcLockWaitTime`: max(wait / n, 1 ms), once, from the whole wait.
        let member_wait =
            wait.map(|w| (w / u32::try_from(n).unwrap_or(u32::MAX)).max(Duration::from_millis(1)));
        loop {
            let pass_end = member_wait.map(|w| earliest(Instant::now().checked_add(w), deadline));
            match self.pass(member_lease, pass_end.flatten())? {
                Pass::Held(held) => return Ok(Some(held)),
                Pass::Short => {}
            }
            let Some(deadline) = deadline else {
                return Ok(None);
            };
            // Contenders that split the members between them all give up at the same
            // moment; a random pause keeps them from asking again in step.
            let cap = member_wait.unwrap_or_default().min(MAX_PAUSE);
            let pause = random::between(Duration::ZERO, cap);
            if Instant::now() + pause >= deadline {
                return Ok(None);
            }
            std::thread::sleep(pause);
        }
    }

    /// The guard's holds released in parallel.
    fn release(&self, mut held: Grants<RLockGuard>) -> Result<()> {
        self.verdict(self.release_listed(&mut held, &[], Others::Registered))
    }

    /// One hold of the current thread on every member, in parallel; members the thread
    /// does not hold (those that had not granted) are skipped.
    fn unlock_detached(&self) -> Result<()> {
        let all: Vec<usize> = (0..self.members.len()).collect();
        let mut outcomes = self.release_listed(&mut [], &all, Others::Registered);
        // A member that had not granted is no failure of this release.
        outcomes.retain(|(_, r)| !matches!(r, Err(Error::NotHeld { .. })));
        self.verdict(outcomes)
    }
}

impl Majority {
    /// One pass: every member asked at once; then, until `pass_end`, the members that
    /// were busy waited for together and asked again, until a majority is held. `None`
    /// for `pass_end` is a single round. Whatever the pass does not keep (its grants when
    /// it ends short, possible grants whose reply was lost) is released before it
    /// returns.
    fn pass(&self, lease: Option<Duration>, pass_end: Option<Instant>) -> Result<Pass> {
        let members = &self.members;
        let n = members.len();
        let needed = quorum::needed(n);
        let owners: Vec<String> = members.iter().map(|m| m.owner()).collect();
        let mut held: Vec<Option<RLockGuard>> = (0..n).map(|_| None).collect();
        // Members whose reply was lost: they may have granted without our knowing.
        let mut unknown = vec![false; n];
        let mut subscriptions: Vec<Option<Subscription>> = (0..n).map(|_| None).collect();
        let end: End = loop {
            let pending: Vec<usize> = (0..n).filter(|&i| held[i].is_none()).collect();
            let ask = Ask {
                lock: self,
                pending: &pending,
                owners: &owners,
                lease,
                ttls: Mutex::new(vec![None; pending.len()]),
            };
            let budget = self.round_budget(lease);
            let tally = quorum::vote(&self.cores_of(&pending)[..], &ask, Some(budget));
            let ttls = ask.ttls.into_inner();
            let mut busy = Vec::new();
            let mut retry_by = None;
            let mut failures = Vec::new();
            for (j, vote) in tally.votes.into_iter().enumerate() {
                let i = pending[j];
                match vote {
                    Vote::Yes => {
                        let lease = lease.map(|l| (l, clock::capped_ms(l)));
                        let guard = members[i].granted(&owners[i], lease, tally.started, None);
                        held[i] = Some(guard);
                        unknown[i] = false;
                        // Its subscription has nothing more to say; dropped, any unused
                        // wake-up goes to the next local waiter of that lock.
                        subscriptions[i] = None;
                    }
                    Vote::No => {
                        busy.push(i);
                        let hint = ttls.get(j).copied().flatten().unwrap_or(-1);
                        retry_by = earliest(retry_by, clock::retry_after(hint));
                    }
                    Vote::Failed(e) => {
                        unknown[i] |= matches!(e, Error::ResponseTimeout(_));
                        failures.push((i, e));
                    }
                }
            }
            let granted = held.iter().flatten().count();
            if granted >= needed {
                break End::Held;
            }
            if failures.len() > n - needed {
                // The failed members alone leave no majority possible: an outage, not
                // contention, and waiting would not end it.
                break End::Failed(quorum::shortfall(
                    self.describe(),
                    "acquire",
                    n,
                    granted,
                    failures,
                ));
            }
            let Some(pass_end) = pass_end.filter(|end| Instant::now() < *end) else {
                break End::Short;
            };
            match self.wait_for(&busy, &mut subscriptions, retry_by, pass_end) {
                Err(e) => break End::Failed(e),
                Ok(Woken::Closed) => break End::Failed(Error::Shutdown),
                Ok(Woken::Timeout) if Instant::now() >= pass_end => break End::Short,
                Ok(Woken::Signal | Woken::Timeout) => {}
            }
        };
        drop(subscriptions);
        let mut held: Grants<RLockGuard> = held
            .into_iter()
            .enumerate()
            .filter_map(|(i, g)| g.map(|g| (i, g)))
            .collect();
        let kept = matches!(end, End::Held);
        // Only a member that shows the thread a hold beyond those it counts did grant:
        // the thread may hold a member besides (a reentrant RedLock), and releasing "one
        // hold" of a member whose acquire never ran would take a hold its guard trusts.
        // A member that cannot say keeps whatever it has until its lease ends, or until
        // the thread's last release of it.
        let unknown: Vec<usize> = (0..n)
            .filter(|&i| unknown[i])
            .filter(|&i| members[i].uncounted_holds().is_ok_and(|n| n > 0))
            .collect();
        let give_back = if kept { &mut [][..] } else { &mut held[..] };
        for (i, outcome) in self.release_listed(give_back, &unknown, Others::Unregistered) {
            match outcome {
                Ok(()) | Err(Error::NotHeld { .. }) => {}
                // A grant that could not be released expires with its lease.
                Err(e) => log::warn!(
                    "redmutex: releasing RedLock member {:?} failed: {e}",
                    members[i].name()
                ),
            }
        }
        match end {
            End::Held => Ok(Pass::Held(held)),
            End::Short => Ok(Pass::Short),
            End::Failed(e) => Err(e),
        }
    }

    /// How long one acquire round waits for the members' replies: a small share of the
    /// lease the members are asked for ([`ROUND_BUDGET_SHARE`], as go-redsync and the
    /// RedLock description size it), within [`MIN_ROUND_BUDGET`] and the smallest
    /// member response timeout. A member that is down (its pool retrying the connection)
    /// or slow then costs a round that much, not a connection timeout, and a grant is
    /// never kept from a round that outlasted its own lease.
    fn round_budget(&self, lease: Option<Duration>) -> Duration {
        let cores = &self.cores;
        let lease = lease.unwrap_or_else(|| {
            cores
                .iter()
                .map(|c| c.watchdog_timeout())
                .min()
                .unwrap_or_default()
        });
        let cap = cores
            .iter()
            .map(|c| c.config().response_timeout())
            .min()
            .unwrap_or(MIN_ROUND_BUDGET);
        (lease / ROUND_BUDGET_SHARE).min(cap).max(MIN_ROUND_BUDGET)
    }

    /// Each listed member's client, in the order listed: the quorum engine's members.
    fn cores_of(&self, list: &[usize]) -> Vec<Arc<Core>> {
        list.iter().map(|&i| Arc::clone(&self.cores[i])).collect()
    }

    /// Sleeps until one of the `busy` members is released (its unlock message) or its
    /// holder's lease may have ended (`retry_by`), or `pass_end`.
    ///
    /// A busy member is subscribed to before its next attempt, and the first wait on a
    /// new subscription lasts until its server confirmed it: every release that member
    /// runs after the next attempt then sends a message that reaches us, so no wake-up
    /// is lost between that attempt and the sleep after it (see pubsub.rs). Signals
    /// still buffered when the sleep ends are cleared, since the attempt that follows
    /// reads every pending member anyway.
    fn wait_for(
        &self,
        busy: &[usize],
        subscriptions: &mut [Option<Subscription>],
        retry_by: Option<Instant>,
        pass_end: Instant,
    ) -> Result<Woken> {
        let mut fresh = Vec::new();
        for &i in busy {
            if subscriptions[i].is_none() {
                let member = &self.members[i];
                let interest = Interest {
                    channel: &member.kind().names().channel,
                    rule: WakeRule::Lock,
                };
                subscriptions[i] = Some(member.core().subscribe(interest)?);
                fresh.push(i);
            }
        }
        let woken = if fresh.is_empty() {
            let waiting: Vec<&Subscription> = busy
                .iter()
                .filter_map(|&i| subscriptions[i].as_ref())
                .collect();
            pubsub::wait_any(&waiting, earliest(retry_by, Some(pass_end)))
        } else {
            // Every new subscription confirmed, each within the pass.
            let mut woken = Woken::Signal;
            for s in fresh.iter().filter_map(|&i| subscriptions[i].as_ref()) {
                woken = s.wait(Some(pass_end));
                if woken != Woken::Signal {
                    break;
                }
            }
            woken
        };
        for s in subscriptions.iter().flatten() {
            s.clear();
        }
        Ok(woken)
    }

    /// Releases one hold of the current thread on the members of `held` (a guard's
    /// grants, whose guards it disarms) and on the members listed in `others`, each
    /// settled as `others_are` says. Every release is written before any reply is read
    /// (one round trip plus the slowest member), then each is settled as a single lock's
    /// release is; returns each member's outcome.
    fn release_listed(
        &self,
        held: &mut [(usize, RLockGuard)],
        others: &[usize],
        others_are: Others,
    ) -> Vec<(usize, Result<()>)> {
        let members = &self.members;
        for (_, g) in held.iter_mut() {
            g.disarm();
        }
        let registry: Vec<Option<Arc<Hold>>> = others
            .iter()
            .map(|&i| match others_are {
                Others::Registered => {
                    let m = &members[i];
                    m.core()
                        .watchdog()
                        .hold(Renewal::Lock, m.name(), &m.owner())
                }
                Others::Unregistered => None,
            })
            .collect();
        let owners: Vec<String> = held
            .iter()
            .map(|(i, _)| *i)
            .chain(others.iter().copied())
            .map(|i| members[i].owner())
            .collect();
        let settles = held
            .iter()
            .map(|(i, g)| (*i, Settle::Hold(Some(g.hold()))))
            .chain(others.iter().zip(&registry).map(|(&i, hold)| {
                let settle = match others_are {
                    Others::Registered => Settle::Hold(hold.as_deref()),
                    Others::Unregistered => Settle::Blind,
                };
                (i, settle)
            }));
        let list: Vec<(usize, &str, Settle<'_>)> = settles
            .zip(&owners)
            .map(|((i, settle), owner)| (i, owner.as_str(), settle))
            .collect();
        if list.is_empty() {
            return Vec::new();
        }
        let latches: Vec<String> = list
            .iter()
            .map(|(i, _, _)| members[*i].unlock_latch())
            .collect();
        let release = Release {
            lock: self,
            list: &list,
            latches: &latches,
            outcomes: Mutex::new((0..list.len()).map(|_| None).collect()),
        };
        let indices: Vec<usize> = list.iter().map(|(i, _, _)| *i).collect();
        let tally = quorum::vote(&self.cores_of(&indices)[..], &release, None);
        let mut outcomes = release.outcomes.into_inner();
        tally
            .votes
            .into_iter()
            .zip(latches)
            .enumerate()
            .map(|(j, (vote, latch))| {
                let (i, owner, settle) = list[j];
                let member = &members[i];
                let outcome = match vote {
                    Vote::Failed(e) => Err(e),
                    Vote::Yes | Vote::No => outcomes[j]
                        .take()
                        .unwrap_or_else(|| Err(Error::Config("release not judged".into()))),
                };
                // A member whose release outcome is unknown keeps its latch to its PX:
                // the request may still arrive (see `Lock::send_release`).
                let spent =
                    member.spent_or_kept(latch, outcome.as_ref().is_err_and(Error::is_transient));
                let settled = match settle {
                    Settle::Hold(hold) => member.settle_release(owner, hold, spent, outcome),
                    // A grant nobody registered: the renewal registry must not count its
                    // release against a hold the thread has besides.
                    Settle::Blind => outcome.map(|_| {
                        if let Some(latch) = spent {
                            member.core().watchdog().discard_latch(latch);
                        }
                    }),
                };
                (i, settled)
            })
            .collect()
    }

    /// How a release over the members went, from the outcomes that matter.
    fn verdict(&self, outcomes: Vec<(usize, Result<()>)>) -> Result<()> {
        let released = outcomes.iter().filter(|(_, r)| r.is_ok()).count();
        let failures: Vec<(usize, Error)> = outcomes
            .into_iter()
            .filter_map(|(i, r)| r.err().map(|e| (i, e)))
            .collect();
        let n = self.members.len();
        if released < quorum::needed(n) {
            return Err(quorum::shortfall(
                self.describe(),
                "release",
                n,
                released,
                failures,
            ));
        }
        if failures.is_empty() {
            return Ok(());
        }
        let members = &self.members;
        Err(Error::Members(
            failures
                .into_iter()
                .map(|(i, e)| (members[i].name().to_owned(), e))
                .collect(),
        ))
    }

    /// The members' names, for errors.
    fn describe(&self) -> String {
        let names: Vec<&str> = self.members.iter().map(RLock::name).collect();
        format!("RedLock[{}]", names.join(","))
    }
}

/// The share of the lease an acquire round may take: a twentieth, go-redsync's default
/// timeout factor (0.05).
const ROUND_BUDGET_SHARE: u32 = 20;

/// The shortest reply budget of an acquire round, for very short leases.
const MIN_ROUND_BUDGET: Duration = Duration::from_millis(10);

/// The longest random pause between two passes.
const MAX_PAUSE: Duration = Duration::from_millis(50);

/// The acquire script to each pending member; remembers each busy member's PTTL.
struct Ask<'a> {
    lock: &'a Majority,
    pending: &'a [usize],
    owners: &'a [String],
    lease: Option<Duration>,
    ttls: Mutex<Vec<Option<i64>>>,
}

impl Question for Ask<'_> {
    fn request(&self, member: usize) -> Request<'_> {
        let i = self.pending[member];
        let lock = &self.lock.members[i];
        let lease_ms = self
            .lease
            .map_or_else(|| lock.core().watchdog_ms(), clock::capped_ms);
        Request {
            key: lock.name(),
            call: hash::acquire_call(lock.name(), &self.owners[i], lease_ms, Reentry::Counted),
        }
    }

    fn judge(&self, member: usize, reply: Value) -> Vote {
        match redis::from_redis_value::<Option<i64>>(reply) {
            // nil: granted; a number: the holder's PTTL.
            Ok(None) => Vote::Yes,
            Ok(Some(ttl)) => {
                if let Some(slot) = self.ttls.lock().get_mut(member) {
                    *slot = Some(ttl);
                }
                Vote::No
            }
            Err(e) => Vote::Failed(Error::Redis(e.into())),
        }
    }
}

/// One hold's release (under its own unlock latch) to each listed member; remembers
/// each outcome for the settling.
struct Release<'a, 'b> {
    lock: &'a Majority,
    list: &'a [(usize, &'b str, Settle<'b>)],
    latches: &'a [String],
    outcomes: Mutex<Vec<Option<Result<Released>>>>,
}

impl Question for Release<'_, '_> {
    fn request(&self, member: usize) -> Request<'_> {
        let (i, owner, _) = self.list[member];
        let lock = &self.lock.members[i];
        let names = lock.kind().names();
        let args = lock.release_args(owner, &self.latches[member]);
        Request {
            key: lock.name(),
            call: hash::release_call([&names.name, &names.channel], UNLOCK_MESSAGE, &args),
        }
    }

    fn judge(&self, member: usize, reply: Value) -> Vote {
        let outcome = Released::from_value(reply).map_err(Error::Redis);
        let vote = match &outcome {
            Ok(Released::Partly | Released::Fully { .. }) => Vote::Yes,
            Ok(_) => Vote::No,
            Err(_) => Vote::No,
        };
        if let Some(slot) = self.outcomes.lock().get_mut(member) {
            *slot = Some(outcome);
        }
        vote
    }
}
