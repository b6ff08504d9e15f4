//! The Lua scripts of `lua/` and one typed call per script.
//!
//! Scripts go out as `EVALSHA`; on `NOSCRIPT` (a `SCRIPT FLUSH`, a restarted or new
//! primary) redis-rs loads the script and sends `EVALSHA` once more, so a flushed script
//! cache costs one extra round trip and is never seen by callers.

use std::sync::LazyLock;

use redis::{Connection, RedisResult, Script};

static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/acquire.lua")));
static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/release.lua")));
static RENEW: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../lua/renew.lua")));
static FORCE_RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/force_release.lua")));

/// Redisson's RLock unlock message.
pub(crate) const UNLOCK_MESSAGE: &str = "0";

/// Runs the acquire script: `None` when the owner now holds the lock, otherwise the
/// lock's remaining TTL in milliseconds (-1: the key has no TTL).
pub(crate) fn acquire(
    conn: &mut Connection,
    key: &str,
    owner: &str,
    lease_ms: u64,
) -> RedisResult<Option<i64>> {
    ACQUIRE.key(key).arg(lease_ms).arg(owner).invoke(conn)
}

/// What one release request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Released {
    /// The caller held no hold.
    NotHeld,
    /// One hold was released; others remain.
    Partly,
    /// The last hold was released and the unlock message published.
    Fully,
}

/// The arguments of one release request; `latch` must stay the same across retries.
#[derive(Debug)]
pub(crate) struct Release<'a> {
    pub(crate) key: &'a str,
    pub(crate) channel: &'a str,
    pub(crate) latch: &'a str,
    pub(crate) owner: &'a str,
    pub(crate) lease_ms: u64,
    pub(crate) latch_ms: u64,
}

/// Runs the release script.
pub(crate) fn release(conn: &mut Connection, r: &Release<'_>) -> RedisResult<Released> {
    let outcome: Option<i64> = RELEASE
        .key(r.key)
        .key(r.channel)
        .key(r.latch)
        .arg(UNLOCK_MESSAGE)
        .arg(r.lease_ms)
        .arg(r.owner)
        .arg("PUBLISH")
        .arg(r.latch_ms)
        .invoke(conn)?;
    Ok(match outcome {
        None => Released::NotHeld,
        Some(0) => Released::Partly,
        Some(_) => Released::Fully,
    })
}

/// Renews every `(key, owner)` pair with `lease_ms`; element i of the answer says whether
/// pair i was still held.
pub(crate) fn renew(
    conn: &mut Connection,
    holds: &[(&str, &str)],
    lease_ms: u64,
) -> RedisResult<Vec<bool>> {
    let mut call = RENEW.prepare_invoke();
    call.arg(lease_ms);
    for (key, owner) in holds {
        call.key(*key).arg(*owner);
    }
    let answer: Vec<i64> = call.invoke(conn)?;
    Ok(answer.into_iter().map(|v| v == 1).collect())
}

/// Deletes the lock whoever holds it; true when there was one.
pub(crate) fn force_release(conn: &mut Connection, key: &str, channel: &str) -> RedisResult<bool> {
    FORCE_RELEASE
        .key(key)
        .key(channel)
        .arg(UNLOCK_MESSAGE)
        .arg("PUBLISH")
        .invoke(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_script_documents_its_contract_and_hashes_stably() {
        for (src, script) in [
            (include_str!("../lua/acquire.lua"), &*ACQUIRE),
            (include_str!("../lua/release.lua"), &*RELEASE),
            (include_str!("../lua/renew.lua"), &*RENEW),
            (include_str!("../lua/force_release.lua"), &*FORCE_RELEASE),
        ] {
            assert!(
                src.contains("KEYS[") && src.contains("ARGV[") && src.contains("Returns"),
                "{src}"
            );
            assert_eq!(script.get_hash().len(), 40);
            assert_eq!(script.get_hash(), Script::new(src).get_hash());
        }
    }
}
