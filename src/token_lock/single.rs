//! The string-token lock on one Redis deployment: the kind [`Token`] under the one safe
//! layer, so [`TokenLock`] is `Lock<Token>` and [`TokenLockGuard`] is `LockGuard<Token>`;
//! what only a token lock has (its key, options, holder's token, a guard's token and
//! `extend`) is added to those two types here.

use std::time::{Duration, Instant};

use redis::{Connection, RedisResult};

use super::held;
use super::options::{ExtendMode, TokenLockOptions};
use crate::clock;
use crate::error::{Error, Result, short};
use crate::lock::{
    Acquire, Adopt, Answer, Backoff, Lock, LockGuard, Names, Owned, Ownership, RawLock,
};
use crate::protocol::hash::{self, ReleaseArgs, Uncounted};
use crate::protocol::names;
use crate::protocol::replies::{Forced, Released};
use crate::random;
use crate::token_lock::token::{self, ExtendBy, TOKEN_WAKE_MESSAGE, TokenReleased};
use crate::watchdog::Renewal;
use crate::watchdog::hold::Loss;

/// The kind of the plain string-token lock: the string key `<prefix><name>` holding its
/// holder's token, with the key's TTL as the lease; see [`TokenLock`] for its rules.
///
/// Its owner is not a thread but the token drawn for each acquisition (see
/// [`TokenFormat`](crate::TokenFormat)); the thread that took it keeps a claim on the
/// lock until the guard goes, which refuses it a second hold before any I/O.
#[derive(Debug)]
pub struct Token {
    /// The name as given; the key in `names` carries the options' prefix.
    name: String,
    names: Names,
    options: TokenLockOptions,
}

impl Token {
    /// The lock `name`; `options` must have been validated.
    pub(crate) fn new(name: String, options: TokenLockOptions) -> Self {
        let key = options.key(&name);
        let channel = names::token_channel(&key);
        Self {
            name,
            names: Names { name: key, channel },
            options,
        }
    }
}

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
pub type TokenLock = Lock<Token>;

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
pub type TokenLockGuard = LockGuard<Token>;

impl RawLock for Token {
    const LOCK: &'static str = "TokenLock";
    const RENEWAL: Renewal = Renewal::Token;
    const OWNERSHIP: Ownership = Ownership::Token;

    fn names(&self) -> &Names {
        &self.names
    }

    fn name(&self) -> &str {
        &self.name
    }

    /// Claims the lock for this thread (refusing a second hold, as the peers' locks
    /// are not reentrant) and draws the one token every attempt of this acquisition
    /// writes.
    fn new_owner(&self, client_id: &str) -> Result<Owned> {
        let key = self.key();
        let claim = held::claim(client_id, key).ok_or_else(|| Error::AlreadyHeld {
            name: key.to_owned(),
        })?;
        Ok(Owned {
            field: self.options.token.make()?,
            claim: Some(claim),
        })
    }

    /// `GET == token`: the token is this acquisition's alone, so the key holding it
    /// means the `SET` ran. The safe layer dates such a grant from its own send.
    fn adopt(&self, c: &mut Connection, a: &Adopt<'_>) -> RedisResult<Option<Uncounted>> {
        let ran = self.holds(c, a.owner)?;
        Ok(ran.then_some(Uncounted {
            ttl_ms: None,
            token: None,
        }))
    }

    fn holds(&self, c: &mut Connection, owner: &str) -> RedisResult<bool> {
        let held: Option<String> = redis::cmd("GET").arg(self.key()).query(c)?;
        Ok(held.as_deref() == Some(owner))
    }

    /// One `SET NX PX` (as a script, so that a refusal also says how long the holder's
    /// key lives and a key of another type is an error).
    fn acquire(&self, c: &mut Connection, a: &Acquire<'_>) -> RedisResult<Answer> {
        token::token_acquire(c, self.key(), a.owner, a.lease_ms).map(Answer::from)
    }

    /// The compare-and-delete, which wakes one redmutex waiter. It never leaves holds
    /// behind, so it is `Fully` released or `NotHeld` (the key gone or another's).
    fn release(&self, c: &mut Connection, r: &ReleaseArgs<'_>) -> RedisResult<Released> {
        let released =
            token::token_release(c, [self.key(), &self.names.channel], r.owner, r.publish)?;
        Ok(match released {
            // Nobody counts who heard it: the token lock opens no courtesy window.
            TokenReleased::Deleted => Released::Fully { heard: 0 },
            TokenReleased::Other | TokenReleased::Gone => Released::NotHeld,
        })
    }

    fn force_release(&self, c: &mut Connection, _now: u64, publish: &str) -> RedisResult<Forced> {
        hash::delete_and_publish(
            c,
            [self.key(), &self.names.channel],
            TOKEN_WAKE_MESSAGE,
            publish,
        )
    }

    /// After the configured random pause, and no later than the holder's key expires (a
    /// key without a TTL gives no bound); `None`: only a wake-up message can help.
    fn retry_by(&self, pttl: i64, _backoff: &mut Backoff) -> Option<Instant> {
        let expiry = match pttl {
            // Gone in between (it expired as we asked): retry at once.
            -2 => return Some(Instant::now()),
            ms => clock::retry_after(ms),
        };
        let pause = self
            .options
            .retry_delay
            .and_then(|(lo, hi)| Instant::now().checked_add(random::between(lo, hi)));
        clock::earliest(expiry, pause)
    }
}

impl Lock<Token> {
    /// The lock's settings.
    pub fn options(&self) -> &TokenLockOptions {
        &self.kind().options
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
}

impl LockGuard<Token> {
    /// The token this hold wrote into the key.
    pub fn token(&self) -> &str {
        self.owner()
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
        let by = match self.lock().options().extend {
            ExtendMode::Replace => ExtendBy::Set,
            ExtendMode::Add => ExtendBy::Add,
        };
        let key = self.lock().key();
        let sent = Instant::now();
        let token = self.token();
        let answer = self
            .lock()
            .core()
            .run(key, |c| token::token_extend(c, key, token, ms, by))?;
        match answer {
            ms if ms > 0 => {
                self.hold()
                    .extend(sent + Duration::from_millis(ms.unsigned_abs()));
                Ok(())
            }
            0 => {
                self.hold().mark(Loss::Lost);
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
        Ok(self.lock().holder_token()?.as_deref() == Some(self.token()))
    }
}
