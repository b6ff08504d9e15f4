//! The string-token lock over several independent servers (RedLock), [`QuorumTokenLock`],
//! and its guard: the quorum engine asking each member the single-server lock's scripts.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::Value;

use super::held::{self, Claim};
use super::options::{ExtendMode, TokenLockOptions};
use crate::clock;
use crate::core::Core;
use crate::error::{Error, Result};
use crate::metrics;
use crate::protocol::names;
use crate::quorum::{self, Grant, Policy, Question, Request, Vote};
use crate::token_lock::token::{self, ExtendBy, TokenReleased};

/// The `kind` label of this lock's metrics.
const KIND: &str = "QuorumTokenLock";

/// A string-token lock over several independent Redis servers, granted by a majority of
/// them: the RedLock algorithm, as go-redsync runs it over several pools, so a redsync
/// mutex over the same servers and key excludes it and is excluded by it.
///
/// Each member is a [`Client`](crate::Client) of its own server. Acquiring writes
/// `SET key token NX PX ttl` to **every member at once** (one round trip plus the slowest
/// member), and the lock is held when `members / 2 + 1` granted it while validity is
/// left: validity = TTL − the round's duration − TTL × drift factor (redsync's current
/// rule; see [`TokenLockOptions::drift_factor`]). A round that fails is undone on every
/// member (compare-and-delete on the round's token, so nobody else's key is touched), and
/// the next round comes after a random pause ([`TokenLockOptions::retry_delay`]), up to
/// [`TokenLockOptions::tries`] rounds and the caller's wait.
///
/// Every hold has an explicit TTL; there is no watchdog renewal: keep a long hold with
/// [`extend`](QuorumTokenLockGuard::extend), which needs a majority within validity too.
/// A waiter learns of releases only by retrying (members are separate servers with no
/// channel in common). Not reentrant; guards are not `Send`.
///
/// A quorum lock and a single-server lock on one of its members do **not** exclude each
/// other: that server is only one vote of the quorum's.
///
/// ```no_run
/// use std::time::Duration;
/// use redmutex::Client;
///
/// let members: Vec<Client> = (6379..6384)
///     .map(|port| Client::open(&format!("redis://127.0.0.1:{port}")))
///     .collect::<Result<_, _>>()?;
/// let lock = Client::get_quorum_token_lock(&members, "payments:settle")?;
/// let guard = lock.lock_with_lease(Duration::from_secs(10))?;
/// assert!(guard.valid_until() > std::time::Instant::now() || guard.is_lost());
/// guard.unlock()?;
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Clone)]
pub struct QuorumTokenLock {
    shared: Arc<Shared>,
}

struct Shared {
    members: Vec<Arc<Core>>,
    /// The member client ids, comma-separated: who "this lock" is, for the claim.
    holder: String,
    name: String,
    key: String,
    channel: String,
    options: TokenLockOptions,
}

impl std::fmt::Debug for QuorumTokenLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuorumTokenLock")
            .field("key", &self.key())
            .field("members", &self.shared.members.len())
            .field("options", &self.shared.options)
            .finish()
    }
}

impl QuorumTokenLock {
    /// The lock `name` over `members`, with checked `options`.
    pub(crate) fn new(
        members: Vec<Arc<Core>>,
        name: String,
        options: TokenLockOptions,
    ) -> Result<Self> {
        options.validate().map_err(Error::Config)?;
        if members.is_empty() {
            return Err(Error::Config(
                "a quorum lock needs at least one member".into(),
            ));
        }
        let holder = members.iter().map(|m| m.id()).collect::<Vec<_>>().join(",");
        let key = options.key(&name);
        let channel = names::token_channel(&key);
        Ok(Self {
            shared: Arc::new(Shared {
                members,
                holder,
                name,
                key,
                channel,
                options,
            }),
        })
    }

    /// The lock's name, as given.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The lock's Redis key on every member.
    pub fn key(&self) -> &str {
        &self.shared.key
    }

    /// How many members the lock has.
    pub fn members(&self) -> usize {
        self.shared.members.len()
    }

    /// Waits as long as it takes (or [`TokenLockOptions::tries`] rounds), then holds the
    /// lock for `lease` on a majority.
    ///
    /// # Errors
    ///
    /// [`Error::NoQuorum`] when too many members failed to answer; [`Error::AlreadyHeld`]
    /// when this thread holds it already; [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a zero or absurd lease;
    /// [`Error::Shutdown`]. When the tries run out with the lock held elsewhere, an
    /// `Ok` is impossible, so that is [`Error::NoQuorum`] too, with no failed member.
    pub fn lock_with_lease(&self, lease: Duration) -> Result<QuorumTokenLockGuard> {
        match self.acquire(lease, None)? {
            Some(guard) => Ok(guard),
            None => Err(self.refused()),
        }
    }

    /// Waits at most `wait` (a zero `wait` is one round), then holds the lock for `lease`
    /// on a majority. `Ok(None)`: held elsewhere until the wait or the tries ran out.
    ///
    /// # Errors
    ///
    /// As [`lock_with_lease`](Self::lock_with_lease).
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<QuorumTokenLockGuard>> {
        self.acquire(lease, Some(wait))
    }

    fn refused(&self) -> Error {
        quorum::shortfall(
            self.key().to_owned(),
            "acquire",
            self.members(),
            0,
            Vec::new(),
        )
    }

    /// The engine's settings for a hold of `ttl`.
    fn policy(&self, ttl: Duration, tries: Option<u32>) -> Policy {
        let o = &self.shared.options;
        let budget = Duration::try_from_secs_f64(ttl.as_secs_f64() * o.timeout_factor)
            .unwrap_or(ttl)
            .max(Duration::from_millis(1));
        Policy {
            tries,
            retry_delay: o
                .retry_delay
                .unwrap_or((Duration::from_millis(50), Duration::from_millis(250))),
            drift_factor: o.drift_factor,
            budget: Some(budget),
        }
    }

    fn acquire(
        &self,
        lease: Duration,
        wait: Option<Duration>,
    ) -> Result<Option<QuorumTokenLockGuard>> {
        let started = Instant::now();
        let outcome = self.acquire_uncounted(lease, wait);
        let ended = metrics::Outcome::of(&outcome);
        metrics::acquisition(KIND, self.label(), ended, started.elapsed(), None);
        outcome
    }

    /// The lock's name as a metrics label, if the members' clients label with names.
    fn label(&self) -> Option<&str> {
        let names = self.shared.members.first()?.config().metrics_lock_names();
        names.then(|| self.name())
    }

    /// [`acquire`](Self::acquire) without its metrics.
    fn acquire_uncounted(
        &self,
        lease: Duration,
        wait: Option<Duration>,
    ) -> Result<Option<QuorumTokenLockGuard>> {
        let claim =
            held::claim(&self.shared.holder, self.key()).ok_or_else(|| Error::AlreadyHeld {
                name: self.key().to_owned(),
            })?;
        let ttl_ms = clock::lease_ms(lease)?;
        let token = self.shared.options.token.make()?;
        let tries = match wait {
            Some(w) if w.is_zero() => Some(1),
            _ => self.shared.options.tries,
        };
        let deadline = wait.and_then(|w| Instant::now().checked_add(w));
        let ask = Ask {
            key: self.key(),
            token: &token,
            ttl_ms,
        };
        let undo = Undo {
            lock: self,
            token: &token,
        };
        let grant = quorum::acquire(
            &*self.shared.members,
            &self.policy(lease, tries),
            lease,
            deadline,
            (self.key(), &ask, &undo),
        )?;
        Ok(grant.map(|grant| QuorumTokenLockGuard {
            lock: self.clone(),
            token,
            grant: Mutex::new(grant),
            lost: std::sync::atomic::AtomicBool::new(false),
            granted: Instant::now(),
            done: false,
            _claim: claim,
            _not_send: PhantomData,
        }))
    }
}

/// `SET key token NX PX ttl` on every member.
struct Ask<'a> {
    key: &'a str,
    token: &'a str,
    ttl_ms: u64,
}

impl Question for Ask<'_> {
    fn request(&self, _member: usize) -> Request<'_> {
        Request {
            key: self.key,
            call: token::token_acquire_call(self.key, self.token, self.ttl_ms),
        }
    }

    fn judge(&self, _member: usize, reply: Value) -> Vote {
        // nil: granted; a number: the holder's PTTL.
        match reply {
            Value::Nil => Vote::Yes,
            _ => Vote::No,
        }
    }
}

/// The compare-and-delete of `token` on every member (an undo or a release).
struct Undo<'a> {
    lock: &'a QuorumTokenLock,
    token: &'a str,
}

impl Question for Undo<'_> {
    fn request(&self, member: usize) -> Request<'_> {
        let shared = &self.lock.shared;
        let publish = shared
            .members
            .get(member)
            .map_or("PUBLISH", |m| m.publish_command());
        Request {
            key: &shared.key,
            call: token::token_release_call([&shared.key, &shared.channel], self.token, publish),
        }
    }

    fn judge(&self, _member: usize, reply: Value) -> Vote {
        match redis::from_redis_value::<i64>(reply).map(TokenReleased::from_reply) {
            Ok(TokenReleased::Deleted) => Vote::Yes,
            _ => Vote::No,
        }
    }
}

/// The extend of `token` on every member; remembers each member's new TTL.
struct Extend<'a> {
    key: &'a str,
    token: &'a str,
    ms: u64,
    by: ExtendBy,
    ttls: Mutex<Vec<u64>>,
}

impl Question for Extend<'_> {
    fn request(&self, _member: usize) -> Request<'_> {
        Request {
            key: self.key,
            call: token::token_extend_call(self.key, self.token, self.ms, self.by),
        }
    }

    fn judge(&self, _member: usize, reply: Value) -> Vote {
        match redis::from_redis_value::<i64>(reply) {
            Ok(ms) if ms > 0 => {
                self.ttls.lock().push(ms.unsigned_abs());
                Vote::Yes
            }
            _ => Vote::No,
        }
    }
}

impl Extend<'_> {
    /// The TTL a majority's keys have at least: the quorum-th largest of the new TTLs
    /// (all equal to the asked time when replacing; adding gives each key its own).
    fn quorum_ttl(&self, members: usize) -> Duration {
        let mut ttls = self.ttls.lock().clone();
        ttls.sort_unstable_by(|a, b| b.cmp(a));
        let ms = ttls.get(quorum::needed(members) - 1).copied().unwrap_or(0);
        Duration::from_millis(ms)
    }
}

/// A hold of a [`QuorumTokenLock`] on a majority of its members, released when dropped.
///
/// The hold is trusted until [`valid_until`](Self::valid_until) only: then a majority's
/// keys may have expired, and another client may hold the lock.
#[must_use = "dropping the guard unlocks at once: `lock.lock_with_lease(ttl)?;` as a statement holds nothing; bind it (`let guard = lock.lock_with_lease(ttl)?;`) for the critical section"]
#[clippy::has_significant_drop]
pub struct QuorumTokenLockGuard {
    lock: QuorumTokenLock,
    token: String,
    grant: Mutex<Grant>,
    lost: std::sync::atomic::AtomicBool,
    /// When the grant came back, for the hold-duration metric.
    granted: Instant,
    done: bool,
    _claim: Claim,
    _not_send: PhantomData<std::sync::MutexGuard<'static, ()>>,
}

impl QuorumTokenLockGuard {
    /// The token this hold wrote into the members' keys.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The lock this guard holds.
    pub fn lock(&self) -> &QuorumTokenLock {
        &self.lock
    }

    /// Until when the hold is valid, on this process's monotonic clock: the start of the
    /// granting (or last extending) round plus the TTL, less the drift allowance.
    pub fn valid_until(&self) -> Instant {
        self.grant.lock().valid_until
    }

    /// How many members granted (or last extended) the hold.
    pub fn granted_by(&self) -> usize {
        self.grant.lock().members
    }

    /// Whether the hold is no longer trusted: its validity has passed, or an extend or
    /// release found it gone on too many members.
    pub fn is_lost(&self) -> bool {
        self.lost.load(std::sync::atomic::Ordering::Acquire) || Instant::now() >= self.valid_until()
    }

    /// Sets or extends the TTL of every member's key, as the lock's
    /// [`ExtendMode`] says, where it still holds this guard's token. The hold is
    /// extended when a majority did so within validity; [`valid_until`](Self::valid_until)
    /// moves accordingly.
    ///
    /// # Errors
    ///
    /// [`Error::LockLost`] when the key holds another token or is gone on too many
    /// members; [`Error::NoQuorum`] when too many members failed to answer (the hold is
    /// then left as it was, and expires at its validity); [`Error::InvalidArgument`] for a
    /// zero or absurd `ttl`.
    pub fn extend(&self, ttl: Duration) -> Result<()> {
        let ms = clock::duration_ms("ttl", ttl)?;
        let lock = &self.lock;
        let by = match lock.shared.options.extend {
            ExtendMode::Replace => ExtendBy::Set,
            ExtendMode::Add => ExtendBy::Add,
        };
        let question = Extend {
            key: lock.key(),
            token: &self.token,
            ms,
            by,
            ttls: Mutex::new(Vec::new()),
        };
        let n = lock.members();
        let tally = quorum::vote(
            &*lock.shared.members,
            &question,
            lock.policy(ttl, None).budget,
        );
        let extended_ttl = question.quorum_ttl(n);
        let policy = lock.policy(extended_ttl, None);
        match tally.valid_until(extended_ttl, policy.drift_factor) {
            Some(valid_until) if tally.has_quorum() => {
                *self.grant.lock() = Grant {
                    valid_until,
                    members: tally.yes(),
                };
                Ok(())
            }
            _ if tally.failures_prevent_quorum() => {
                Err(tally.no_quorum(lock.key(), "extend", false))
            }
            _ if tally.has_quorum() => Err(tally.no_quorum(lock.key(), "extend", true)),
            _ => {
                self.lost.store(true, std::sync::atomic::Ordering::Release);
                Err(Error::LockLost {
                    name: lock.key().to_owned(),
                })
            }
        }
    }

    /// Releases the hold: the compare-and-delete of this guard's token on every member.
    ///
    /// # Errors
    ///
    /// [`Error::LockLost`] when fewer than a majority still held the token;
    /// [`Error::NoQuorum`] when too many members failed to answer (their keys expire with
    /// their TTL).
    pub fn unlock(mut self) -> Result<()> {
        self.release()
    }

    fn release(&mut self) -> Result<()> {
        self.done = true;
        metrics::guard_ended(KIND, self.lock.label(), Some(self.granted.elapsed()));
        let lock = &self.lock;
        let undo = Undo {
            lock,
            token: &self.token,
        };
        let tally = quorum::vote(&*lock.shared.members, &undo, None);
        if tally.has_quorum() {
            return Ok(());
        }
        if tally.failures_prevent_quorum() {
            return Err(tally.no_quorum(lock.key(), "release", false));
        }
        // A quorum hold has no watchdog state to mark; its loss is counted here, once,
        // as the release is the guard's last act.
        self.lost.store(true, std::sync::atomic::Ordering::Release);
        metrics::lost(crate::Loss::Lost.label(), lock.label());
        Err(Error::LockLost {
            name: lock.key().to_owned(),
        })
    }
}

impl std::fmt::Debug for QuorumTokenLockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuorumTokenLockGuard")
            .field("key", &self.lock.key())
            .field("granted_by", &self.granted_by())
            .field("lost", &self.is_lost())
            .finish_non_exhaustive()
    }
}

impl Drop for QuorumTokenLockGuard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Err(e) = self.release() {
            log::warn!(
                "redmutex: releasing QuorumTokenLockGuard of {:?} on drop failed: {e}",
                crate::error::short(self.lock.key())
            );
        }
    }
}
