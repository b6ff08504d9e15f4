//! The string-token lock on one Redis deployment, [`TokenLock`], and its guard.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use super::held::{self, Claim};
use super::options::{ExtendMode, TokenLockOptions};
use crate::clock::{self, Wait};
use crate::core::Core;
use crate::error::{Error, Result, short};
use crate::hold::Loss;
use crate::lock::HoldState;
use crate::metrics;
use crate::names;
use crate::pubsub::{Interest, WakeRule};
use crate::random;
use crate::scripts::{self, ExtendBy, TOKEN_WAKE_MESSAGE, TokenReleased};
use crate::wait::{self, Attempt};
use crate::watchdog::Renewal;

/// The `kind` label of this lock's metrics.
const KIND: &str = "TokenLock";

/// A plain string-token lock, the protocol of go-redsync, redis-py's `Lock` and the
/// `SET NX PX` recipe, so that it excludes and is excluded by those clients on the same
/// key.
///
/// The lock is the string key `<prefix><name>` holding its holder's token (see
/// [`TokenFormat`](crate::TokenFormat)), with the key's TTL as the lease. Acquiring is
/// `SET key token NX PX ttl`; releasing and extending are scripts that act only while
/// the key still holds the caller's token, so a release or extend with a stale token
/// changes nothing. Taken without a lease, the lock gets the client's
/// [watchdog timeout](crate::Config::lock_watchdog_timeout) and the watchdog renews it
/// (compare-and-`PEXPIRE`, batched with the other locks) until it is released.
///
/// A waiting thread retries after a random pause (see
/// [`TokenLockOptions::retry_delay`]), never later than the holder's key expires, and
/// at once when a redmutex holder releases: redmutex publishes `"0"` on the lock's own
/// channel `redmutex_token_lock__channel:{<key>}`. go-redsync and redis-py publish
/// nothing, so a wait behind them ends by a retry or at their TTL.
///
/// The lock is **not reentrant**, like its peers': a thread that holds it and asks again
/// gets [`Error::AlreadyHeld`]. Guards are not `Send`, so a hold stays on the thread that
/// took it. Cloning is cheap (an `Arc`).
///
/// ```no_run
/// use std::time::Duration;
///
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// // The key a Go service locks with redsync.NewMutex("jobs:nightly").
/// let lock = client.get_token_lock("jobs:nightly");
/// if let Some(guard) = lock.try_lock_with_lease(Duration::from_secs(1), Duration::from_secs(8))? {
///     // ... at most 8 s of work; extend if it takes longer:
///     guard.extend(Duration::from_secs(8))?;
///     guard.unlock()?;
/// }
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Clone)]
pub struct TokenLock {
    shared: Arc<Shared>,
}

struct Shared {
    core: Arc<Core>,
    name: String,
    key: String,
    channel: String,
    options: TokenLockOptions,
}

impl std::fmt::Debug for TokenLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenLock")
            .field("key", &self.key())
            .field("client", &self.shared.core.id())
            .field("options", &self.shared.options)
            .finish()
    }
}

/// How long an acquisition may wait.
#[derive(Clone, Copy)]
enum Patience {
    Once,
    For(Duration),
    Forever,
}

impl TokenLock {
    /// The lock `name` of `core`; `options` must have been validated.
    pub(crate) fn new(core: Arc<Core>, name: String, options: TokenLockOptions) -> Self {
        let key = options.key(&name);
        let channel = names::token_channel(&key);
        Self {
            shared: Arc::new(Shared {
                core,
                name,
                key,
                channel,
                options,
            }),
        }
    }

    fn core(&self) -> &Arc<Core> {
        &self.shared.core
    }

    /// The lock's name, as given.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The lock's Redis key: the name after the options' key prefix.
    pub fn key(&self) -> &str {
        &self.shared.key
    }

    /// The lock's settings.
    pub fn options(&self) -> &TokenLockOptions {
        &self.shared.options
    }

    /// Waits as long as it takes, then holds the lock under the watchdog.
    ///
    /// # Errors
    ///
    /// [`Error::AlreadyHeld`] when this thread holds it already; [`Error::WrongType`]
    /// when the key is not a string; Redis, pool and shutdown errors.
    pub fn lock(&self) -> Result<TokenLockGuard> {
        self.acquire(None, Patience::Forever)?
            .ok_or(Error::Shutdown)
    }

    /// Waits as long as it takes, then holds the lock for `lease`, never renewed (the
    /// key's TTL is `lease`, as redsync's expiry and redis-py's timeout).
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock); [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a zero or absurd lease.
    pub fn lock_with_lease(&self, lease: Duration) -> Result<TokenLockGuard> {
        self.acquire(Some(lease), Patience::Forever)?
            .ok_or(Error::Shutdown)
    }

    /// One attempt; held under the watchdog on success. `Ok(None)`: held elsewhere.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn try_lock(&self) -> Result<Option<TokenLockGuard>> {
        self.acquire(None, Patience::Once)
    }

    /// Waits at most `wait`; held under the watchdog on success. `Ok(None)`: the wait
    /// ran out.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<TokenLockGuard>> {
        self.acquire(None, Patience::For(wait))
    }

    /// Waits at most `wait`, then holds the lock for `lease`, never renewed. A zero
    /// `wait` makes one attempt.
    ///
    /// # Errors
    ///
    /// As [`lock_with_lease`](Self::lock_with_lease).
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<TokenLockGuard>> {
        let patience = if wait.is_zero() {
            Patience::Once
        } else {
            Patience::For(wait)
        };
        self.acquire(Some(lease), patience)
    }

    /// Whether anyone holds the lock: redmutex, redsync, redis-py or anyone else who
    /// wrote the key (`EXISTS`).
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn is_locked(&self) -> Result<bool> {
        let key = self.key();
        self.core()
            .run(key, |c| redis::cmd("EXISTS").arg(key).query(c))
    }

    /// The token the key holds now, whoever wrote it (`GET`); `None` when free.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the key is not a string; Redis, pool and shutdown
    /// errors.
    pub fn holder_token(&self) -> Result<Option<String>> {
        let key = self.key();
        self.core()
            .run(key, |c| redis::cmd("GET").arg(key).query(c))
    }

    /// The lock's remaining lease (`PTTL`): `None` when free, `Some(Duration::MAX)` when
    /// the key has no TTL (redis-py without a timeout).
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn remain_time_to_live(&self) -> Result<Option<Duration>> {
        self.core().remain_time_to_live(self.key())
    }

    /// Deletes the key whoever holds it and wakes one redmutex waiter; returns whether
    /// there was a key. Every hold of this client on it is reported lost to its guard.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn force_unlock(&self) -> Result<bool> {
        let core = self.core();
        let publish = core.publish_command();
        let forced = core.run(self.key(), |c| {
            scripts::delete_and_publish(
                c,
                [self.key(), &self.shared.channel],
                TOKEN_WAKE_MESSAGE,
                publish,
            )
        })?;
        core.watchdog().forget_lock(self.key());
        Ok(forced == scripts::Forced::Deleted)
    }

    /// The acquisition: claim the lock for this thread (refusing a second hold), draw
    /// one token for every attempt of this call, then try, wait, try.
    fn acquire(
        &self,
        lease: Option<Duration>,
        patience: Patience,
    ) -> Result<Option<TokenLockGuard>> {
        let started = Instant::now();
        let mut attempts = 0u32;
        let outcome = self.acquire_counted(lease, patience, &mut attempts);
        metrics::acquisition(
            KIND,
            self.label(),
            metrics::Outcome::of(&outcome),
            started.elapsed(),
            Some(attempts),
        );
        outcome
    }

    /// The lock's name as a metrics label, if the client labels with names.
    fn label(&self) -> Option<&str> {
        self.core()
            .config()
            .metrics_lock_names()
            .then(|| self.name())
    }

    /// [`acquire`](Self::acquire), counting the attempts it makes in `attempts`.
    fn acquire_counted(
        &self,
        lease: Option<Duration>,
        patience: Patience,
        attempts: &mut u32,
    ) -> Result<Option<TokenLockGuard>> {
        let core = self.core();
        let claim = held::claim(core.id(), self.key()).ok_or_else(|| Error::AlreadyHeld {
            name: self.key().to_owned(),
        })?;
        let ttl_ms = lease.map_or(Ok(core.watchdog_ms()), clock::lease_ms)?;
        let token = self.options().token.make()?;
        let wait = match patience {
            Patience::Once => Wait::No,
            Patience::For(d) => Wait::from_duration(d),
            Patience::Forever => Wait::Forever,
        };
        let interest = Interest {
            channel: &self.shared.channel,
            rule: WakeRule::Lock,
        };
        let sent = wait::acquire_or_wait(core, interest, wait, || {
            *attempts += 1;
            self.attempt(&token, ttl_ms)
        })?;
        Ok(sent.map(|sent| {
            let state = HoldState::acquired(
                core.watchdog(),
                core.watchdog_timeout(),
                (Renewal::Token, self.key(), &token),
                lease,
                sent,
            );
            TokenLockGuard {
                lock: self.clone(),
                token,
                state,
                renewed: lease.is_none(),
                granted: Instant::now(),
                done: false,
                _claim: claim,
                _not_send: PhantomData,
            }
        }))
    }

    /// One `SET NX PX` (as a script, so that a refusal also says how long the holder's
    /// key lives and a key of another type is an error): when it was sent, or when to try
    /// again at the latest.
    fn attempt(&self, token: &str, ttl_ms: u64) -> Result<Attempt<Instant>> {
        let key = self.key();
        let sent = Instant::now();
        match self
            .core()
            .run(key, |c| scripts::token_acquire(c, key, token, ttl_ms))
        {
            Ok(None) => Ok(Attempt::Done(sent)),
            Ok(Some(pttl)) => Ok(Attempt::RetryBy(self.retry_by(pttl))),
            Err(e) if e.is_transient() => self.resolve(token, sent, e),
            Err(e) => Err(e),
        }
    }

    /// After an acquire whose reply was lost: the `SET` may have run. The token is ours
    /// alone, so reading the key tells: holding our token, the lock is ours (its lease
    /// counted from the send); otherwise it did not run, or not yet.
    fn resolve(&self, token: &str, sent: Instant, err: Error) -> Result<Attempt<Instant>> {
        match self.holder_token() {
            Ok(Some(held)) if held == token => Ok(Attempt::Done(sent)),
            Ok(_) => Err(err),
            Err(_) => {
                log::warn!(
                    "redmutex: acquire of token lock {:?} failed with its outcome unknown; if \
                     it took effect, the key expires with its TTL: {err}",
                    self.key()
                );
                Err(err)
            }
        }
    }

    /// When to retry after a refusal that reported the holder's PTTL: after the
    /// configured random pause, and no later than the key expires (a key without a TTL
    /// gives no bound). `None`: only a wake-up message can help.
    fn retry_by(&self, pttl: i64) -> Option<Instant> {
        let expiry = match pttl {
            // Gone in between (it expired as we asked): retry at once.
            -2 => return Some(Instant::now()),
            ms => clock::retry_after(ms),
        };
        let pause = self
            .options()
            .retry_delay
            .and_then(|(lo, hi)| Instant::now().checked_add(random::between(lo, hi)));
        clock::earliest(expiry, pause)
    }
}

/// A hold of a [`TokenLock`], released when dropped.
///
/// Dropping the guard releases the hold and logs a failure at `warn`; call
/// [`unlock`](Self::unlock) to see the `Result`. The guard is not `Send`: the lock knows
/// which thread holds it, to refuse that thread a second hold.
///
/// ```compile_fail
/// fn assert_send<T: Send>(_: T) {}
/// let client = redmutex::Client::open("redis://127.0.0.1/").unwrap();
/// assert_send(client.get_token_lock("x").lock().unwrap());
/// ```
#[must_use = "dropping the guard unlocks at once: `lock.lock()?;` as a statement holds nothing; bind it (`let guard = lock.lock()?;`) for the critical section"]
#[clippy::has_significant_drop]
pub struct TokenLockGuard {
    lock: TokenLock,
    token: String,
    state: HoldState,
    renewed: bool,
    /// When the grant came back, for the hold-duration metric.
    granted: Instant,
    done: bool,
    _claim: Claim,
    _not_send: PhantomData<std::sync::MutexGuard<'static, ()>>,
}

impl TokenLockGuard {
    /// The token this hold wrote into the key.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The lock this guard holds.
    pub fn lock(&self) -> &TokenLock {
        &self.lock
    }

    /// Releases the hold: deletes the key if it still holds this guard's token, and
    /// wakes one redmutex waiter.
    ///
    /// # Errors
    ///
    /// [`Error::LockLost`] when the key was gone or held another token (the lease ran
    /// out, someone deleted or took it): nothing was deleted. Redis, pool and shutdown
    /// errors otherwise; the hold is no longer renewed, and if the release did not reach
    /// Redis the key expires with its TTL.
    pub fn unlock(mut self) -> Result<()> {
        self.release()
    }

    /// Sets or extends the key's TTL, as [`TokenLockOptions::extend_mode`] says:
    /// `ttl` becomes the TTL ([`ExtendMode::Replace`], redsync's `Extend`) or is added
    /// to what is left ([`ExtendMode::Add`], redis-py's `extend`). Only while the key
    /// still holds this guard's token; otherwise nothing changes.
    ///
    /// On a hold renewed by the watchdog a longer TTL is kept: renewals only ever raise
    /// the TTL to the watchdog timeout.
    ///
    /// # Errors
    ///
    /// [`Error::LockLost`] when the key is gone or holds another token;
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a zero or absurd `ttl`, or when adding to a key that someone
    /// made persistent (redis-py refuses that too); Redis, pool and shutdown errors.
    pub fn extend(&self, ttl: Duration) -> Result<()> {
        let ms = clock::duration_ms("ttl", ttl)?;
        let by = match self.lock.options().extend {
            ExtendMode::Replace => ExtendBy::Set,
            ExtendMode::Add => ExtendBy::Add,
        };
        let key = self.lock.key();
        let sent = Instant::now();
        let answer = self
            .lock
            .core()
            .run(key, |c| scripts::token_extend(c, key, &self.token, ms, by))?;
        match answer {
            ms if ms > 0 => {
                self.state
                    .hold()
                    .extend(sent + Duration::from_millis(ms.unsigned_abs()));
                Ok(())
            }
            0 => {
                self.state.hold().mark(Loss::Lost);
                Err(Error::LockLost {
                    name: key.to_owned(),
                })
            }
            _ => Err(Error::Config(format!(
                "token lock `{}` has no TTL to add to (someone made the key persistent); \
                 ExtendMode::Replace sets one",
                short(key)
            ))),
        }
    }

    /// Whether the key still holds this guard's token (`GET`, redis-py's `owned()`).
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    pub fn is_held(&self) -> Result<bool> {
        Ok(self.lock.holder_token()?.as_deref() == Some(self.token.as_str()))
    }

    /// Whether this hold is known or presumed lost, without asking Redis: the watchdog
    /// found the key gone or holding another token, renewal could not be confirmed in
    /// time, or the lease known locally (from the acquire, the last renewal or extend)
    /// has passed.
    pub fn is_lost(&self) -> bool {
        self.loss().is_some()
    }

    /// Why the hold is no longer trusted, if it is not. See [`is_lost`](Self::is_lost).
    pub fn loss(&self) -> Option<Loss> {
        self.state.loss()
    }

    /// A channel that receives one [`Loss`] when the watchdog finds this hold lost or
    /// presumed lost (at once if it already was). Explicit-lease holds are not watched:
    /// check [`is_lost`](Self::is_lost) instead.
    pub fn loss_signal(&self) -> Receiver<Loss> {
        self.state.hold().subscribe()
    }

    /// The release, once.
    fn release(&mut self) -> Result<()> {
        self.done = true;
        metrics::guard_ended(KIND, self.lock.label(), Some(self.granted.elapsed()));
        let lock = &self.lock;
        let core = lock.core();
        let key = lock.key();
        let publish = core.publish_command();
        let outcome = core.run(key, |c| {
            scripts::token_release(c, [key, &lock.shared.channel], &self.token, publish)
        });
        // Renewal stops whatever happened: a key still there expires with its TTL.
        if self.renewed {
            core.watchdog()
                .unregister(Renewal::Token, key, &self.token, true);
        }
        match outcome {
            Ok(TokenReleased::Deleted) => Ok(()),
            Ok(TokenReleased::Other | TokenReleased::Gone) => {
                self.state.hold().mark(Loss::Lost);
                Err(Error::LockLost {
                    name: key.to_owned(),
                })
            }
            Err(e) => {
                let left = match lock.holder_token() {
                    Ok(Some(t)) if t == self.token => {
                        "did not happen; the key expires with its TTL"
                    }
                    Ok(_) => "took effect or the key had expired",
                    Err(_) => "is unknown",
                };
                log::warn!(
                    "redmutex: release of token lock {:?} failed and {left}: {e}",
                    short(key)
                );
                Err(e)
            }
        }
    }
}

impl std::fmt::Debug for TokenLockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenLockGuard")
            .field("key", &self.lock.key())
            .field("renewed", &self.renewed)
            .field("lost", &self.is_lost())
            .finish_non_exhaustive()
    }
}

impl Drop for TokenLockGuard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Err(e) = self.release() {
            log::warn!(
                "redmutex: releasing TokenLockGuard of {:?} on drop failed: {e}",
                short(self.lock.key())
            );
        }
    }
}
