//! What Redisson's scripts publish and answer, as every kind reads it: the messages on a
//! lock's channel, and the outcome of a release or a forced release.

use redis::RedisResult;

/// Redisson's RLock unlock message.
pub(crate) const UNLOCK_MESSAGE: &str = "0";

/// The "message" of a release that publishes nothing (the spin lock's).
pub(crate) const NO_MESSAGE: &str = "";

/// Redisson's message that wakes every waiter: the write lock's unlock
/// (`READ_UNLOCK_MESSAGE`); the read lock's unlock sends [`UNLOCK_MESSAGE`].
pub(crate) const WAKE_ALL_MESSAGE: &str = "1";

/// What one release request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// The caller held no hold.
    NotHeld,
    /// One hold was released; others remain.
    Partly,
    /// The last hold was released and the unlock message published; `heard` is how
    /// many subscribers it reached, where the script reports that (the `RLock` family's
    /// release), else 0.
    Fully {
        /// Subscribers the unlock message reached (this client's own included).
        heard: u32,
    },
    /// There was no lock at all, and the script counts that as released (the fair
    /// lock's quirk, kept from Redisson).
    Missing,
}

impl Released {
    /// The answer every release script gives: nil, 0, 1, or 2 for [`Released::Missing`].
    pub(crate) fn from_reply(outcome: Option<i64>) -> Self {
        match outcome {
            None => Self::NotHeld,
            Some(0) => Self::Partly,
            Some(2) => Self::Missing,
            Some(_) => Self::Fully { heard: 0 },
        }
    }

    /// The answer of a release sent as a [`Call`], or of any hash release: besides
    /// [`from_reply`](Self::from_reply)'s answers, `{1, n}` for a full release whose
    /// message reached `n` subscribers.
    pub(crate) fn from_value(reply: redis::Value) -> RedisResult<Self> {
        if let redis::Value::Array(items) = &reply
            && let [redis::Value::Int(1), redis::Value::Int(heard)] = items.as_slice()
        {
            let heard = u32::try_from(*heard).unwrap_or(u32::MAX);
            return Ok(Self::Fully { heard });
        }
        Ok(Self::from_reply(redis::from_redis_value::<Option<i64>>(
            reply,
        )?))
    }
}

/// What a force release did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forced {
    /// The lock was deleted (and its waiters told).
    Deleted,
    /// There was no lock.
    Absent,
    /// The lock is held in the other mode of a read-write lock and was left alone.
    Kept,
}

impl Forced {
    /// The answer of every force-release script: 1, 0, or 2 for [`Forced::Kept`].
    pub(crate) fn from_reply(outcome: i64) -> Self {
        match outcome {
            1 => Self::Deleted,
            2 => Self::Kept,
            _ => Self::Absent,
        }
    }
}
