//! Raw Redis for checking what redmutex leaves on the wire: Redisson's key and channel
//! names, spelled out here as the protocol doc has them (never taken from the library,
//! so a wrong name in the library cannot make its own test pass), and plain commands
//! that read them back, on a plain connection or a [`Reopening`](super::reopening::Reopening)
//! one.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::ConnectionLike;

use super::eventually;

// ---- names --------------------------------------------------------------------------

/// The unlock channel of an `RLock` or `RFairLock` whose name has no braces (a braced
/// name keeps its own tag instead).
pub fn lock_channel(name: &str) -> String {
    assert!(!name.contains('{'), "a braced name: {name}");
    format!("redisson_lock__channel:{{{name}}}")
}

/// The channel on which a fair lock tells the queued waiter `owner` that it is next.
pub fn fair_wait_channel(name: &str, owner: &str) -> String {
    format!("{}:{owner}", lock_channel(name))
}

/// A fair lock's waiter queue (a list of owners).
pub fn fair_queue_key(name: &str) -> String {
    format!("redisson_lock_queue:{{{name}}}")
}

/// A fair lock's waiter slots (a zset of owners scored by the slot's end, in ms).
pub fn fair_timeouts_key(name: &str) -> String {
    format!("redisson_lock_timeout:{{{name}}}")
}

/// The unlock channel of a read-write lock with an unbraced name.
pub fn rwlock_channel(name: &str) -> String {
    format!("redisson_rwlock:{{{name}}}")
}

/// The key that times the `n`-th read hold of `owner` on an unbraced read-write lock.
pub fn read_timeout_key(name: &str, owner: &str, n: u32) -> String {
    format!("{{{name}}}:{owner}:rwlock_timeout:{n}")
}

/// A fenced lock's token counter.
pub fn fenced_token_key(name: &str) -> String {
    format!("redisson_lock_token:{{{name}}}")
}

/// The channel of both semaphore kinds.
pub fn semaphore_channel(name: &str) -> String {
    format!("redisson_sc:{{{name}}}")
}

/// A permit-expirable semaphore's acquired permits (a zset of raw ids scored by lease end).
pub fn permit_timeouts_key(name: &str) -> String {
    format!("{{{name}}}:timeout")
}

/// The channel of a count-down latch, which braces even a braced name.
pub fn latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

// ---- reads --------------------------------------------------------------------------

/// Wall-clock milliseconds, the unit of fair-lock slots and permit leases.
pub fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as f64
}

/// `PTTL key`: -2 for no key, -1 for no expiry.
pub fn pttl(raw: &mut impl ConnectionLike, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(raw).unwrap()
}

/// `GET key` as a number.
pub fn get(raw: &mut impl ConnectionLike, key: &str) -> Option<i64> {
    redis::cmd("GET").arg(key).query(raw).unwrap()
}

/// `EXISTS key` as a bool.
pub fn exists(raw: &mut impl ConnectionLike, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query(raw).unwrap()
}

/// `HGETALL key`, sorted by field.
pub fn hgetall(raw: &mut impl ConnectionLike, key: &str) -> BTreeMap<String, String> {
    redis::cmd("HGETALL").arg(key).query(raw).unwrap()
}

/// The whole list at `key`.
pub fn lrange(raw: &mut impl ConnectionLike, key: &str) -> Vec<String> {
    redis::cmd("LRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .query(raw)
        .unwrap()
}

/// `ZCARD key`.
pub fn zcard(raw: &mut impl ConnectionLike, key: &str) -> i64 {
    redis::cmd("ZCARD").arg(key).query(raw).unwrap()
}

/// A fair lock's queued owners, first in line first.
pub fn fair_queue(raw: &mut impl ConnectionLike, name: &str) -> Vec<String> {
    lrange(raw, &fair_queue_key(name))
}

/// A fair lock's waiter slots with their end times, earliest first.
pub fn fair_timeouts(raw: &mut impl ConnectionLike, name: &str) -> Vec<(String, f64)> {
    redis::cmd("ZRANGE")
        .arg(fair_timeouts_key(name))
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(raw)
        .unwrap()
}

/// The end of `owner`'s slot in a fair lock's queue.
pub fn fair_slot_end(raw: &mut impl ConnectionLike, name: &str, owner: &str) -> Option<f64> {
    redis::cmd("ZSCORE")
        .arg(fair_timeouts_key(name))
        .arg(owner)
        .query(raw)
        .unwrap()
}

/// A permit-expirable semaphore's acquired permits: raw ids with their lease ends.
pub fn permit_leases(raw: &mut impl ConnectionLike, name: &str) -> Vec<(Vec<u8>, f64)> {
    redis::cmd("ZRANGE")
        .arg(permit_timeouts_key(name))
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(raw)
        .unwrap()
}

/// Subscribers of `channel` as Redis counts them.
pub fn numsub(raw: &mut impl ConnectionLike, channel: &str) -> i64 {
    let v: (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query(raw)
        .unwrap();
    v.1
}

/// Waits up to 10 s until Redis counts exactly `n` subscribers of `channel`: the way to
/// know a waiter is asleep on its wake-up channel.
pub fn await_numsub(raw: &mut impl ConnectionLike, channel: &str, n: i64) {
    eventually(
        Duration::from_secs(10),
        &format!("{n} subscriber(s) of {channel}"),
        || numsub(raw, channel) == n,
    );
}

/// How many times Redis has run `command` (from `INFO commandstats`).
pub fn calls(raw: &mut impl ConnectionLike, command: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(raw).unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

/// The id of a client blocked in `command` (a `WAIT`, a `BLPOP`), per `CLIENT LIST`;
/// `None` when there is none.
pub fn client_in(raw: &mut impl ConnectionLike, command: &str) -> Option<u64> {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(raw).unwrap();
    let want = format!("cmd={command}");
    list.lines()
        .find(|l| {
            let blocked = |f: &str| f.strip_prefix("flags=").is_some_and(|v| v.contains('b'));
            l.split(' ').any(blocked) && l.split(' ').any(|f| f == want)
        })
        .and_then(|l| l.split(' ').find_map(|f| f.strip_prefix("id=")))
        .map(|id| id.parse().unwrap())
}
