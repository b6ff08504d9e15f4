//! Redisson's `RExpirable` on the lock-family objects: setting, conditioning and clearing
//! the time to live of every key an object is made of, in one script call.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::{Connection, RedisResult};

use crate::clock;
use crate::error::{Error, Result};
use crate::protocol::script::invoke;

pub(crate) mod sealed {
    use crate::core::Core;

    /// What the expiry family needs of an object: its client core and every key it is
    /// made of, the main key first, all in one slot.
    #[derive(Debug)]
    pub struct Target<'a> {
        pub(crate) core: &'a Core,
        pub(crate) keys: Vec<&'a str>,
    }

    /// An object with an expiry. Only this crate implements it.
    pub trait Keys {
        /// The object's core and keys.
        fn expiry_target(&self) -> Target<'_>;
    }
}

/// Redisson's `RExpirable` on the objects of this crate that have it: every lock kind
/// ([`Lock`](crate::Lock)), [`RSemaphore`](crate::RSemaphore),
/// [`RPermitExpirableSemaphore`](crate::RPermitExpirableSemaphore) and
/// [`RCountDownLatch`](crate::RCountDownLatch). [`MultiLock`](crate::MultiLock) and
/// `RedLock` do not, as in Redisson.
///
/// Each call covers every key the object is made of, as Redisson's overrides do: a fair
/// lock's queue and timeouts, a fenced lock's token counter, a permit-expirable
/// semaphore's `{name}:timeout` set; keys that do not exist are skipped. Each answers
/// whether any key changed. [`remain_time_to_live`](Self::remain_time_to_live) reads
/// the main key only.
///
/// A lock held under the watchdog gets the watchdog's lease back at the next renewal,
/// in Redisson as here; an expiry set on a fenced lock's counter can make it expire, and
/// then tokens start again at 1.
///
/// The conditional forms need Redis 7.0 or later.
///
/// ```no_run
/// use std::time::Duration;
/// use redmutex::RExpirable;
///
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let sem = client.get_semaphore("slots");
/// sem.try_set_permits(3)?;
/// assert!(sem.expire(Duration::from_secs(3600))?);
/// # Ok::<(), redmutex::Error>(())
/// ```
pub trait RExpirable: sealed::Keys {
    /// Every key lives `ttl` from now (Redisson `expire(Duration)`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a time under 1 ms or absurdly long; Redis, pool and shutdown
    /// errors.
    fn expire(&self, ttl: Duration) -> Result<bool> {
        set(self, ExpireAction::In(clock::duration_ms("ttl", ttl)?), "")
    }

    /// Every key lives until `at` (Redisson `expireAt`); a time in the past deletes them.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a time before 1970; Redis, pool and shutdown errors.
    fn expire_at(&self, at: SystemTime) -> Result<bool> {
        let ms = at
            .duration_since(UNIX_EPOCH)
            .map_err(|_| Error::invalid("at", "an expiry time must be after 1970"))?;
        set(self, ExpireAction::At(clock::capped_ms(ms)), "")
    }

    /// As [`expire`](Self::expire), only for keys that have a TTL already (Redisson
    /// `expireIfSet`, `PEXPIRE … XX`).
    ///
    /// # Errors
    ///
    /// As [`expire`](Self::expire). [`Error::Config`] on a server before Redis 7.0, which has no
    /// `PEXPIRE` conditions.
    fn expire_if_set(&self, ttl: Duration) -> Result<bool> {
        set(
            self,
            ExpireAction::In(clock::duration_ms("ttl", ttl)?),
            "XX",
        )
    }

    /// As [`expire`](Self::expire), only for keys without a TTL (Redisson
    /// `expireIfNotSet`, `NX`).
    ///
    /// # Errors
    ///
    /// As [`expire`](Self::expire). [`Error::Config`] on a server before Redis 7.0, which has no
    /// `PEXPIRE` conditions.
    fn expire_if_not_set(&self, ttl: Duration) -> Result<bool> {
        set(
            self,
            ExpireAction::In(clock::duration_ms("ttl", ttl)?),
            "NX",
        )
    }

    /// As [`expire`](Self::expire), only where it makes the TTL longer (Redisson
    /// `expireIfGreater`, `GT`).
    ///
    /// # Errors
    ///
    /// As [`expire`](Self::expire). [`Error::Config`] on a server before Redis 7.0, which has no
    /// `PEXPIRE` conditions.
    fn expire_if_greater(&self, ttl: Duration) -> Result<bool> {
        set(
            self,
            ExpireAction::In(clock::duration_ms("ttl", ttl)?),
            "GT",
        )
    }

    /// As [`expire`](Self::expire), only where it makes the TTL shorter (Redisson
    /// `expireIfLess`, `LT`).
    ///
    /// # Errors
    ///
    /// As [`expire`](Self::expire). [`Error::Config`] on a server before Redis 7.0, which has no
    /// `PEXPIRE` conditions.
    fn expire_if_less(&self, ttl: Duration) -> Result<bool> {
        set(
            self,
            ExpireAction::In(clock::duration_ms("ttl", ttl)?),
            "LT",
        )
    }

    /// Removes the TTL of every key (Redisson `clearExpire`, `PERSIST`).
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    fn clear_expire(&self) -> Result<bool> {
        set(self, ExpireAction::Persist, "")
    }

    /// The main key's remaining time to live (`PTTL`, Redisson `remainTimeToLive`):
    /// `None` when it does not exist, `Some(Duration::MAX)` when it has no TTL.
    ///
    /// # Errors
    ///
    /// Redis, pool and shutdown errors.
    fn remain_time_to_live(&self) -> Result<Option<Duration>> {
        let target = self.expiry_target();
        let main = target.keys.first().copied().unwrap_or_default();
        target.core.remain_time_to_live(main)
    }
}

impl<T: sealed::Keys + ?Sized> RExpirable for T {}

/// One expiry script over every key of `object`.
fn set<T: sealed::Keys + ?Sized>(
    object: &T,
    action: ExpireAction,
    condition: &str,
) -> Result<bool> {
    let sealed::Target { core, keys } = object.expiry_target();
    let main = keys.first().copied().unwrap_or_default();
    match core.run(main, |c| expire_keys(c, &keys, action, condition)) {
        // A server before 7.0 has no PEXPIRE conditions: Lua refuses the extra argument
        // (as Redisson's own conditional expiry fails there); nothing was changed.
        Err(Error::Redis(e))
            if !condition.is_empty() && e.to_string().contains("Wrong number of args") =>
        {
            Err(Error::Config(format!(
                "a conditional expiry ({condition}) needs Redis 7.0 or later, which this \
                 server is not (PEXPIRE refused the condition; nothing was changed)"
            )))
        }
        other => other,
    }
}

// ---- Redis scripts ------------------------------------------------------------

crate::protocol::script::scripts! {
    EXPIRE_KEYS => "expiry/expire_keys.lua",
}

/// What [`expire_keys`] does to every key of an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExpireAction {
    /// `PEXPIRE` by this many ms.
    In(u64),
    /// `PEXPIREAT` this epoch ms.
    At(u64),
    /// `PERSIST`.
    Persist,
}

/// Sets or clears the expiry of every key in `keys` (one object's, all in one slot),
/// under `condition` ("", NX, XX, GT or LT); true when any key changed.
pub(crate) fn expire_keys(
    conn: &mut Connection,
    keys: &[&str],
    action: ExpireAction,
    condition: &str,
) -> RedisResult<bool> {
    let mut call = EXPIRE_KEYS.prepare_invoke();
    for k in keys {
        call.key(*k);
    }
    let (verb, when) = match action {
        ExpireAction::In(ms) => ("pexpire", ms),
        ExpireAction::At(ms) => ("pexpireat", ms),
        ExpireAction::Persist => ("persist", 0),
    };
    call.arg(verb).arg(when).arg(condition);
    invoke(&call, conn)
}
