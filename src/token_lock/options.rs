//! The settings of a token lock, chosen to match the peer that shares its keys.

use std::time::Duration;

use super::token::TokenFormat;

/// How [`extend`](crate::TokenLockGuard::extend) changes the key's TTL.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use redmutex::{ExtendMode, TokenLockOptions};
///
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client.get_token_lock_with(
///     "reports:daily",
///     TokenLockOptions::new().extend_mode(ExtendMode::Add), // as redis-py's extend
/// )?;
/// let guard = lock.lock_with_lease(Duration::from_secs(10))?;
/// guard.extend(Duration::from_secs(5))?; // what was left, plus 5 s
/// guard.unlock()?;
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ExtendMode {
    /// The TTL becomes the given time, whatever was left: go-redsync's `Extend` (which
    /// resets to the mutex's full expiry) and redis-py's `reacquire` and
    /// `extend(replace_ttl=True)`. The default.
    #[default]
    Replace,
    /// The given time is added to what is left: redis-py's `extend`. Like redis-py, it
    /// refuses a key that has no TTL at all.
    Add,
}

/// Settings of a [`TokenLock`](crate::TokenLock) or
/// [`QuorumTokenLock`](crate::QuorumTokenLock); every setter takes and returns the
/// options. The defaults match go-redsync's mutex.
///
/// ```
/// use std::time::Duration;
/// use redmutex::{ExtendMode, TokenFormat, TokenLockOptions};
///
/// // What a redis-py service expects: uuid-hex tokens, extend adds to the TTL left.
/// let py = TokenLockOptions::new()
///     .token_format(TokenFormat::UuidHex)
///     .extend_mode(ExtendMode::Add)
///     .retry_delay(Some((Duration::from_millis(100), Duration::from_millis(100))));
/// # drop(py);
/// ```
#[derive(Debug, Clone)]
pub struct TokenLockOptions {
    pub(crate) token: TokenFormat,
    pub(crate) extend: ExtendMode,
    pub(crate) key_prefix: String,
    pub(crate) retry_delay: Option<(Duration, Duration)>,
    pub(crate) tries: Option<u32>,
    pub(crate) drift_factor: f64,
    pub(crate) timeout_factor: f64,
}

impl Default for TokenLockOptions {
    fn default() -> Self {
        Self {
            token: TokenFormat::Random,
            extend: ExtendMode::Replace,
            key_prefix: String::new(),
            retry_delay: Some((Duration::from_millis(50), Duration::from_millis(250))),
            tries: None,
            drift_factor: 0.01,
            timeout_factor: 0.05,
        }
    }
}

impl TokenLockOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// How tokens are made. Defaults to [`TokenFormat::Random`] (redsync's).
    pub fn token_format(mut self, format: TokenFormat) -> Self {
        self.token = format;
        self
    }

    /// What `extend` does to the TTL. Defaults to [`ExtendMode::Replace`] (redsync's).
    pub fn extend_mode(mut self, mode: ExtendMode) -> Self {
        self.extend = mode;
        self
    }

    /// Put before the lock's name to make its key (`<prefix><name>`), for services that
    /// keep their locks under a prefix. Defaults to none: the peers use the name as the
    /// key.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// While the lock is held elsewhere, a waiter tries again after a pause drawn
    /// uniformly from this range, and in any case no later than the holder's key
    /// expires. Defaults to 50–250 ms, redsync's delay.
    ///
    /// The pause is for holders that are not redmutex: go-redsync and redis-py publish
    /// nothing when they release, so only a retry can notice. A release by redmutex
    /// also wakes a waiting redmutex thread at once with a message on the lock's own
    /// channel. With `None` a single-server lock waits for that message or the holder's
    /// TTL only (right when only redmutex takes the lock); a quorum lock always
    /// retries, with `None` as 50–250 ms.
    pub fn retry_delay(mut self, range: Option<(Duration, Duration)>) -> Self {
        self.retry_delay = range;
        self
    }

    /// Quorum locks only: how many rounds one acquisition makes at most. Defaults to
    /// `None`: as many as its wait allows (redsync defaults to 32).
    pub fn tries(mut self, tries: Option<u32>) -> Self {
        self.tries = tries;
        self
    }

    /// Quorum locks only: the clock-drift allowance per unit of TTL, subtracted from a
    /// grant's validity. Defaults to 0.01, redsync's.
    pub fn drift_factor(mut self, factor: f64) -> Self {
        self.drift_factor = factor;
        self
    }

    /// Quorum locks only: how long one round waits for the members' replies, per unit of
    /// TTL (a member slower than that counts as failed). Defaults to 0.05, redsync's (400
    /// ms for an 8 s TTL); never longer than the clients' response timeout.
    pub fn timeout_factor(mut self, factor: f64) -> Self {
        self.timeout_factor = factor;
        self
    }

    /// The key of lock `name`.
    pub(crate) fn key(&self, name: &str) -> String {
        let mut key = String::with_capacity(self.key_prefix.len() + name.len());
        key.push_str(&self.key_prefix);
        key.push_str(name);
        key
    }

    /// Checks the numbers.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if !(0.0..1.0).contains(&self.drift_factor) {
            return Err("drift_factor must be in [0, 1)".into());
        }
        if !(self.timeout_factor > 0.0 && self.timeout_factor <= 1.0) {
            return Err("timeout_factor must be in (0, 1]".into());
        }
        if self.tries == Some(0) {
            return Err("tries must be at least 1".into());
        }
        if self.retry_delay.is_some_and(|(lo, hi)| hi < lo) {
            return Err("retry_delay must be (min, max) with min <= max".into());
        }
        Ok(())
    }
}
