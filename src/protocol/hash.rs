//! The scripts every lock kept in a plain Redis hash shares (`RLock`, the non-reentrant,
//! fenced and spin locks, the write lock, the token lock's force release): acquire and
//! release with Redisson's owner field and counter, the lost-reply check that adopts an
//! uncounted hold, the TTL rewrite that a replica-sync `WAIT` follows, and the forced
//! delete that tells the waiters.

use redis::{Connection, RedisResult, Script};

use crate::protocol::replies::{Forced, Released};
use crate::protocol::script::{Call, invoke};

crate::protocol::script::scripts! {
    ACQUIRE => "lock/acquire.lua",
    RELEASE => "lock/release.lua" after ["latch.lua"],
    REWRITE_TTL => "lock/rewrite_ttl.lua",
    ADOPT => "lock/adopt.lua" after ["uncounted.lua"],
    DELETE_AND_PUBLISH => "lock/delete_and_publish.lua",
}

/// What every release request carries besides its keys; `latch` must stay the same
/// across retries of one request.
#[derive(Debug, Clone, Copy)]
pub struct ReleaseArgs<'a> {
    pub(crate) owner: &'a str,
    pub(crate) latch: &'a str,
    pub(crate) latch_ms: u64,
    /// Redisson's instance lease, re-applied after a partial release.
    pub(crate) lease_ms: u64,
    pub(crate) now_ms: u64,
    pub(crate) publish: &'a str,
}

/// Whether a thread that holds a lock may take it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reentry {
    /// One more hold (every Redisson lock but the non-reentrant ones).
    Counted,
    /// Refused with `NON_REENTRANT_REACQUIRE`, nothing changed (Redisson 4.4+'s
    /// non-reentrant locks).
    Refused,
}

impl Reentry {
    pub(crate) fn arg(self) -> &'static str {
        match self {
            Self::Counted => "1",
            Self::Refused => "0",
        }
    }
}

/// Runs the acquire script: `None` when the owner now holds the lock, otherwise the
/// lock's remaining TTL in milliseconds (-1: the key has no TTL). A refused re-entry is
/// the error `NON_REENTRANT_REACQUIRE`.
pub(crate) fn acquire(
    conn: &mut Connection,
    key: &str,
    owner: &str,
    lease_ms: u64,
    reentry: Reentry,
) -> RedisResult<Option<i64>> {
    invoke(
        ACQUIRE.key(key).arg(lease_ms).arg(owner).arg(reentry.arg()),
        conn,
    )
}

/// Runs the release script; `message` is published after the last hold
/// ([`UNLOCK_MESSAGE`], or [`NO_MESSAGE`] for none).
pub(crate) fn release(
    conn: &mut Connection,
    [key, channel]: [&str; 2],
    message: &str,
    r: &ReleaseArgs<'_>,
) -> RedisResult<Released> {
    hash_release(&RELEASE, conn, [key, channel], message, r)
}

/// [`acquire`] as a [`Call`] (a RedLock member's acquire, written to every member before
/// any reply is read); its reply reads as [`acquire`]'s.
pub(crate) fn acquire_call(key: &str, owner: &str, lease_ms: u64, reentry: Reentry) -> Call {
    let lease = lease_ms.to_string();
    Call::new(
        &ACQUIRE,
        &[key.as_bytes()],
        &[lease.as_bytes(), owner.as_bytes(), reentry.arg().as_bytes()],
    )
}

/// [`release`] as a [`Call`]; read its reply with [`Released::from_value`].
pub(crate) fn release_call([key, channel]: [&str; 2], message: &str, r: &ReleaseArgs<'_>) -> Call {
    let (lease, latch_ms) = (r.lease_ms.to_string(), r.latch_ms.to_string());
    Call::new(
        &RELEASE,
        &[key.as_bytes(), channel.as_bytes(), r.latch.as_bytes()],
        &[
            message.as_bytes(),
            lease.as_bytes(),
            r.owner.as_bytes(),
            r.publish.as_bytes(),
            latch_ms.as_bytes(),
        ],
    )
}

/// The release scripts of the reentrant lock and the write lock, which take the same
/// keys (`[lock, channel]` and the latch) and arguments, with their own message.
pub(crate) fn hash_release(
    script: &Script,
    conn: &mut Connection,
    [key, channel]: [&str; 2],
    message: &str,
    r: &ReleaseArgs<'_>,
) -> RedisResult<Released> {
    invoke(
        script
            .key(key)
            .key(channel)
            .key(r.latch)
            .arg(message)
            .arg(r.lease_ms)
            .arg(r.owner)
            .arg(r.publish)
            .arg(r.latch_ms),
        conn,
    )
    .and_then(Released::from_value)
}

/// Writes the TTL of `owner`'s hold of `key` again, unchanged, so that a `WAIT` sent
/// next on `conn` covers the master's earlier writes; false when `owner` does not hold
/// `key` (or it has no TTL) and nothing was written.
pub(crate) fn rewrite_ttl(conn: &mut Connection, key: &str, owner: &str) -> RedisResult<bool> {
    let mut call = REWRITE_TTL.prepare_invoke();
    call.key(key).arg(owner);
    invoke::<i64>(&call, conn).map(|v| v == 1)
}

/// An owner's hold that its client did not count, as the lost-reply check found it: how
/// long its key lives at least, and a fenced lock's current token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Uncounted {
    /// The least TTL in milliseconds of the keys the hold lives in, read with the count;
    /// `None` when none of them has a TTL.
    pub(crate) ttl_ms: Option<u64>,
    /// The token counter's value (fenced locks only).
    pub(crate) token: Option<u64>,
}

impl Uncounted {
    pub(crate) fn new(pttl: i64, token: Option<u64>) -> Self {
        Self {
            // -1: no TTL; a key gone already (-2) cannot come back from these scripts.
            ttl_ms: u64::try_from(pttl).ok(),
            token,
        }
    }
}

/// The lost-reply check of the kinds kept in a plain hash: `Some` when `owner` holds
/// `key` more than `counted` times, with the key's TTL after renewing it to at least
/// `renew_ms` (0: no renewal), and the counter's value when `counter` is given.
pub(crate) fn adopt(
    conn: &mut Connection,
    key: &str,
    counter: Option<&str>,
    owner: &str,
    counted: u32,
    renew_ms: u64,
) -> RedisResult<Option<Uncounted>> {
    let found: Option<(i64, Option<u64>)> = invoke(
        ADOPT
            .key(key)
            .key(counter.unwrap_or(key))
            .arg(owner)
            .arg(counted)
            .arg(renew_ms)
            .arg(if counter.is_some() { "1" } else { "0" }),
        conn,
    )?;
    Ok(found.map(|(pttl, token)| Uncounted::new(pttl, token)))
}

/// Deletes `key` (a lock whoever holds it, or a latch) and, when it existed, publishes
/// `message` on `channel`.
pub(crate) fn delete_and_publish(
    conn: &mut Connection,
    [key, channel]: [&str; 2],
    message: &str,
    publish: &str,
) -> RedisResult<Forced> {
    let mut call = DELETE_AND_PUBLISH.prepare_invoke();
    call.key(key).key(channel).arg(message).arg(publish);
    invoke::<i64>(&call, conn).map(Forced::from_reply)
}
