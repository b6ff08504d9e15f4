//! The Lua scripts of `lua/` and one typed call per script.
//!
//! Every script is one file of `lua/`, prefixed at build time with the shared rules it
//! uses from `lua/lib/` (the unlock latch, the fair queue, the permit reclaim), so the
//! text sent to Redis is one self-contained script and the rules are written once.
//!
//! Scripts go out as `EVALSHA`; on `NOSCRIPT` (a `SCRIPT FLUSH`, a restarted or new
//! primary) the script is loaded and sent again, so a flushed script cache costs one
//! extra round trip and is never seen by callers.
//!
//! Calls take everything from their caller: the publish command (the transport's), and
//! the wall clock where a script compares against stored epoch times.

use std::sync::LazyLock;

use redis::{Connection, RedisResult, Script};

/// Declares one `LazyLock<Script>` per file of `lua/`, each prefixed with the `lua/lib/`
/// files it names, and the list of them all for the contract test.
macro_rules! scripts {
    ($($name:ident => $file:literal $(after [$($lib:literal),+])?,)*) => {
        $(static $name: LazyLock<Script> = LazyLock::new(|| {
            Script::new(concat!(
                $($(include_str!(concat!("../../lua/lib/", $lib)),)+)?
                include_str!(concat!("../../lua/", $file))
            ))
        });)*

        /// Every script: its own file's text, the `lua/lib/` files before it, and the
        /// script sent to Redis.
        #[cfg(test)]
        fn all_scripts() -> Vec<(&'static str, &'static [&'static str], &'static Script)> {
            vec![$((
                include_str!(concat!("../../lua/", $file)),
                &[$($($lib),+)?],
                &*$name,
            ),)*]
        }
    };
}

scripts! {
    ACQUIRE => "acquire.lua",
    RELEASE => "release.lua" after ["latch.lua"],
    RENEW => "renew.lua",
    RENEW_LOCAL => "renew_local.lua",
    REWRITE_TTL => "rewrite_ttl.lua",
    ADOPT => "adopt.lua" after ["uncounted.lua"],
    ADOPT_READ => "adopt_read.lua" after ["uncounted.lua"],
    DELETE_AND_PUBLISH => "delete_and_publish.lua",
    DELETE_LOCAL => "delete_local.lua",
    FAIR_ACQUIRE => "fair_acquire.lua" after ["fair_queue.lua"],
    FAIR_ACQUIRE_FAILED => "fair_acquire_failed.lua" after ["fair_queue.lua"],
    FAIR_RELEASE => "fair_release.lua" after ["fair_queue.lua", "latch.lua"],
    FAIR_FORCE_RELEASE => "fair_force_release.lua" after ["fair_queue.lua"],
    READ_ACQUIRE => "read_acquire.lua",
    READ_RELEASE => "read_release.lua" after ["latch.lua", "rwlock.lua"],
    READ_IS_LOCKED => "read_is_locked.lua",
    RENEW_READS => "renew_reads.lua",
    RENEW_READS_LOCAL => "renew_reads_local.lua",
    WRITE_ACQUIRE => "write_acquire.lua",
    WRITE_RELEASE => "write_release.lua" after ["latch.lua", "rwlock.lua"],
    RW_FORCE_RELEASE => "rw_force_release.lua",
    SEMAPHORE_TRY_ACQUIRE => "semaphore_try_acquire.lua",
    SEMAPHORE_RELEASE => "semaphore_release.lua",
    SEMAPHORE_DRAIN => "semaphore_drain.lua",
    SEMAPHORE_TRY_SET => "semaphore_try_set.lua",
    SEMAPHORE_ADD => "semaphore_add.lua",
    PERMIT_ACQUIRE => "permit_acquire.lua" after ["permits.lua"],
    PERMIT_RELEASE => "permit_release.lua",
    PERMIT_RELEASE_MANY => "permit_release_many.lua" after ["permits.lua"],
    PERMIT_COUNTS => "permit_counts.lua" after ["permits.lua"],
    PERMIT_SET => "permit_set.lua",
    PERMIT_ADD => "permit_add.lua",
    PERMIT_UPDATE_LEASE => "permit_update_lease.lua" after ["permits.lua"],
    PERMIT_LEASE_TIME => "permit_lease_time.lua" after ["permits.lua"],
    LATCH_TRY_SET => "latch_try_set.lua",
    LATCH_COUNT_DOWN => "latch_count_down.lua",
    TOKEN_ACQUIRE => "token_acquire.lua",
    TOKEN_RELEASE => "token_release.lua",
    TOKEN_EXTEND => "token_extend.lua",
    TOKEN_RENEW => "token_renew.lua",
    TOKEN_RENEW_LOCAL => "token_renew_local.lua",
    FENCED_ACQUIRE => "fenced_acquire.lua",
    FENCED_WRITE => "fenced_write.lua",
    EXPIRE_KEYS => "expire_keys.lua",
}

/// The per-node scripts with their `#!lua flags=allow-cross-slot-keys` line turned into
/// a comment, for a cluster of servers before 7.0, which know no script flags (they fail
/// to compile the line) and need none: they never check which keys a script touches.
fn unflagged(text: &str) -> Script {
    Script::new(&format!("--{text}"))
}

static RENEW_LOCAL_UNFLAGGED: LazyLock<Script> =
    LazyLock::new(|| unflagged(include_str!("../../lua/renew_local.lua")));
static DELETE_LOCAL_UNFLAGGED: LazyLock<Script> =
    LazyLock::new(|| unflagged(include_str!("../../lua/delete_local.lua")));
static RENEW_READS_LOCAL_UNFLAGGED: LazyLock<Script> =
    LazyLock::new(|| unflagged(include_str!("../../lua/renew_reads_local.lua")));
static TOKEN_RENEW_LOCAL_UNFLAGGED: LazyLock<Script> =
    LazyLock::new(|| unflagged(include_str!("../../lua/token_renew_local.lua")));

/// True when `e` is a server's refusal to compile a `#!lua` flags line (Redis before 7.0).
fn flags_refused(e: &redis::RedisError) -> bool {
    let text = e.to_string();
    text.contains("Error compiling script") && text.contains("near '#'")
}

/// A per-node script call: the flagged script where the cluster knows script flags
/// (`flags`, learnt at connect: Redis 7.0+), else its unflagged twin. The unflagged script on a 7.0+ node would not fail
/// but answer "not here" for every key outside one slot, so the choice is the
/// cluster's, not a guess; a flagged call that a node still refuses (a cluster of mixed
/// versions) is sent again unflagged, and that is logged once per process. The
/// watchdog asks a key's owner about every hold a per-node batch did not renew, so a
/// 6.2 node that reads a moved key as missing costs a question, never a hold.
fn invoke_per_node<T: redis::FromRedisValue>(
    flagged: &'static Script,
    fallback: &'static Script,
    flags: bool,
    conn: &mut Connection,
    args: impl Fn(&mut redis::ScriptInvocation<'static>),
) -> RedisResult<T> {
    if !flags {
        let mut call = fallback.prepare_invoke();
        args(&mut call);
        return invoke(&call, conn);
    }
    let mut call = flagged.prepare_invoke();
    args(&mut call);
    match invoke(&call, conn) {
        Err(e) if flags_refused(&e) => {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                log::warn!(
                    "redmutex: a cluster node refused a script's flags line (Redis before \
                     7.0 among newer nodes): its per-node batches run unflagged"
                );
            });
            let mut call = fallback.prepare_invoke();
            args(&mut call);
            invoke(&call, conn)
        }
        other => other,
    }
}

/// How many times a script call is sent again after `NOSCRIPT`.
const NOSCRIPT_RETRIES: u32 = 5;

/// `invoke` that survives a script cache flushed at any moment.
///
/// redis-rs answers `NOSCRIPT` with `SCRIPT LOAD` and one more `EVALSHA`; a flush that
/// lands between those two would still surface. `NOSCRIPT` means the script did not
/// run, so sending it again can never apply it twice.
fn invoke<T: redis::FromRedisValue>(
    call: &redis::ScriptInvocation<'_>,
    conn: &mut dyn redis::ConnectionLike,
) -> RedisResult<T> {
    let mut tries = 0;
    loop {
        match call.invoke(conn) {
            Err(e)
                if tries < NOSCRIPT_RETRIES
                    && e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
            {
                tries += 1;
            }
            other => return other,
        }
    }
}

/// One script call prepared for a connection that its caller drives by hand (the quorum
/// engine writes a call to every member before it reads any reply): the packed `EVALSHA`
/// and the script, to load it when a member answers `NOSCRIPT`.
pub(crate) struct Call {
    script: &'static Script,
    packed: Vec<u8>,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Arguments may carry tokens: only the script is shown.
        f.debug_struct("Call")
            .field("script", &self.script.get_hash())
            .finish_non_exhaustive()
    }
}

impl Call {
    /// `EVALSHA <sha> <keys.len()> keys… args…`.
    fn new(script: &'static Script, keys: &[&[u8]], args: &[&[u8]]) -> Self {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(script.get_hash()).arg(keys.len());
        for k in keys {
            cmd.arg(*k);
        }
        for a in args {
            cmd.arg(*a);
        }
        Self {
            script,
            packed: cmd.get_packed_command(),
        }
    }

    /// The command as it goes on the wire.
    pub(crate) fn packed(&self) -> &[u8] {
        &self.packed
    }

    /// Loads the script, so that the call can be sent again after `NOSCRIPT`.
    pub(crate) fn load(&self, conn: &mut dyn redis::ConnectionLike) -> RedisResult<()> {
        self.script.load(conn).map(drop)
    }
}

/// Redisson's RLock unlock message.
pub(crate) const UNLOCK_MESSAGE: &str = "0";

/// The "message" of a release that publishes nothing (the spin lock's).
pub(crate) const NO_MESSAGE: &str = "";

/// Redisson's message that wakes every waiter: the write lock's unlock
/// (`READ_UNLOCK_MESSAGE`); the read lock's unlock sends [`UNLOCK_MESSAGE`].
pub(crate) const WAKE_ALL_MESSAGE: &str = "1";

/// The count-down latch's messages: the count reached zero, and a new count was set.
pub(crate) const LATCH_ZERO_MESSAGE: &str = "0";
/// See [`LATCH_ZERO_MESSAGE`].
pub(crate) const LATCH_NEW_COUNT_MESSAGE: &str = "1";

/// The lease-end score Redisson gives a permit without lease.
pub(crate) const NO_LEASE_SCORE: u64 = 922_337_203_685_477;

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
    fn from_reply(outcome: Option<i64>) -> Self {
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
    fn from_reply(outcome: i64) -> Self {
        match outcome {
            1 => Self::Deleted,
            2 => Self::Kept,
            _ => Self::Absent,
        }
    }
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

// ---- reentrant lock ----------------------------------------------------------------

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
    fn arg(self) -> &'static str {
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

/// What a fenced acquisition found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fencing {
    /// The caller holds the lock now, under this new token.
    Granted(u64),
    /// Held by another; the lock's PTTL in ms (-1: no TTL).
    Busy(i64),
}

/// Runs the fenced acquire: on every grant, re-entry included, the token counter goes
/// up by one and its new value is the grant's token.
pub(crate) fn fenced_acquire(
    conn: &mut Connection,
    [key, counter]: [&str; 2],
    owner: &str,
    lease_ms: u64,
) -> RedisResult<Fencing> {
    let (granted, value): (i64, i64) = invoke(
        FENCED_ACQUIRE
            .key(key)
            .key(counter)
            .arg(lease_ms)
            .arg(owner),
        conn,
    )?;
    Ok(if granted == 1 {
        Fencing::Granted(value.max(0).unsigned_abs())
    } else {
        Fencing::Busy(value)
    })
}

/// One command of a fenced write: its words as Redis runs them (name, keys, arguments)
/// and, apart, the keys among them, which the script call declares.
#[derive(Debug, Clone)]
pub(crate) struct Command {
    pub(crate) words: Vec<Vec<u8>>,
    pub(crate) keys: Vec<Vec<u8>>,
}

/// Runs `commands` only if `owner` holds the lock and, with a `token`, the token counter
/// still equals it; returns each command's reply. Refusals are the errors
/// `FENCED_NOT_HELD` and `FENCED_STALE_TOKEN`, a failed command `FENCED_PARTIAL`.
pub(crate) fn fenced_write(
    conn: &mut Connection,
    [key, counter]: [&str; 2],
    owner: &str,
    token: Option<u64>,
    commands: &[Command],
) -> RedisResult<Vec<redis::Value>> {
    let mut call = FENCED_WRITE.prepare_invoke();
    call.key(key).key(counter);
    call.arg(owner)
        .arg(token.map(|t| t.to_string()).unwrap_or_default())
        .arg(commands.len());
    for c in commands {
        for k in &c.keys {
            call.key(&k[..]);
        }
        call.arg(c.words.len());
        for w in &c.words {
            call.arg(&w[..]);
        }
    }
    invoke(&call, conn)
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

/// The release scripts of the reentrant lock and the write lock, which take the same
/// keys (`[lock, channel]` and the latch) and arguments, with their own message.
fn hash_release(
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
    let answer: Vec<i64> = invoke(&call, conn)?;
    Ok(answer.into_iter().map(|v| v == 1).collect())
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
    fn new(pttl: i64, token: Option<u64>) -> Self {
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

/// [`adopt`] for a read hold, whose timeout keys `{own_timeouts}:1..n` bound its life as
/// much as the hash's TTL does.
pub(crate) fn adopt_read(
    conn: &mut Connection,
    [key, own_timeouts]: [&str; 2],
    owner: &str,
    counted: u32,
    renew_ms: u64,
) -> RedisResult<Option<Uncounted>> {
    let found: Option<i64> = invoke(
        ADOPT_READ
            .key(key)
            .key(own_timeouts)
            .arg(owner)
            .arg(counted)
            .arg(renew_ms),
        conn,
    )?;
    Ok(found.map(|pttl| Uncounted::new(pttl, None)))
}

/// What a per-node renewal found for one hold: held (renewed), not held, or not on
/// this node (`None`: ask the key's owner).
fn local_answers(answer: Vec<i64>) -> Vec<Option<bool>> {
    answer
        .into_iter()
        .map(|v| match v {
            1 => Some(true),
            0 => Some(false),
            _ => None,
        })
        .collect()
}

/// Deletes `keys`, all served by the cluster master the call goes to, whatever their
/// slots; returns how many existed. `flags`: see [`invoke_per_node`].
pub(crate) fn delete_local(
    conn: &mut Connection,
    keys: &[String],
    flags: bool,
) -> RedisResult<i64> {
    invoke_per_node(
        &DELETE_LOCAL,
        &DELETE_LOCAL_UNFLAGGED,
        flags,
        conn,
        |call| {
            for key in keys {
                call.arg(key);
            }
        },
    )
}

/// [`renew`] for one cluster master, with the locks named in arguments (any slots the
/// node serves); element i is `None` when the node could not look at pair i. `flags`:
/// see [`invoke_per_node`].
pub(crate) fn renew_local(
    conn: &mut Connection,
    holds: &[(&str, &str)],
    lease_ms: u64,
    flags: bool,
) -> RedisResult<Vec<Option<bool>>> {
    invoke_per_node(&RENEW_LOCAL, &RENEW_LOCAL_UNFLAGGED, flags, conn, |call| {
        call.arg(lease_ms);
        for (key, owner) in holds {
            call.arg(*key).arg(*owner);
        }
    })
    .map(local_answers)
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

// ---- fair lock -------------------------------------------------------------------

/// The keys and channel of a fair lock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FairKeys<'a> {
    pub(crate) lock: &'a str,
    pub(crate) queue: &'a str,
    pub(crate) timeouts: &'a str,
    /// `redisson_lock__channel:{name}`; a waiter's own channel is this plus `:<owner>`.
    pub(crate) channel: &'a str,
}

/// One fair acquisition attempt.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FairAcquire<'a> {
    pub(crate) owner: &'a str,
    pub(crate) lease_ms: u64,
    /// The caller's slot length in the queue.
    pub(crate) wait_ms: u64,
    pub(crate) now_ms: u64,
    pub(crate) reentry: Reentry,
}

/// Runs the fair acquire: `None` when the caller now holds the lock. Otherwise, when
/// `queue`, the caller is queued and the answer is a retry hint in ms (see
/// `lua/fair_acquire.lua`: > 0 sleep at most that long, 0 the lock is free but another
/// waiter is first, -1 only a message can help); a single attempt answers 1. A refused
/// re-entry is the error `NON_REENTRANT_REACQUIRE`.
pub(crate) fn fair_acquire(
    conn: &mut Connection,
    k: FairKeys<'_>,
    a: &FairAcquire<'_>,
    queue: bool,
) -> RedisResult<Option<i64>> {
    invoke(
        FAIR_ACQUIRE
            .key(k.lock)
            .key(k.queue)
            .key(k.timeouts)
            .arg(a.lease_ms)
            .arg(a.owner)
            .arg(a.wait_ms)
            .arg(a.now_ms)
            .arg(if queue { "1" } else { "0" })
            .arg(a.reentry.arg()),
        conn,
    )
}

/// Takes a waiter that gives up out of the queue, moving the waiters behind it up.
pub(crate) fn fair_acquire_failed(
    conn: &mut Connection,
    k: FairKeys<'_>,
    owner: &str,
    wait_ms: u64,
    publish: &str,
) -> RedisResult<()> {
    invoke::<i64>(
        FAIR_ACQUIRE_FAILED
            .key(k.queue)
            .key(k.timeouts)
            .key(k.lock)
            .key(k.channel)
            .arg(owner)
            .arg(wait_ms)
            .arg(UNLOCK_MESSAGE)
            .arg(publish),
        conn,
    )
    .map(drop)
}

/// Runs the fair release script; [`Released::Missing`] when there was no lock at all.
pub(crate) fn fair_release(
    conn: &mut Connection,
    k: FairKeys<'_>,
    r: &ReleaseArgs<'_>,
) -> RedisResult<Released> {
    invoke(
        FAIR_RELEASE
            .key(k.lock)
            .key(k.queue)
            .key(k.timeouts)
            .key(k.channel)
            .key(r.latch)
            .arg(UNLOCK_MESSAGE)
            .arg(r.lease_ms)
            .arg(r.owner)
            .arg(r.now_ms)
            .arg(r.publish)
            .arg(r.latch_ms),
        conn,
    )
    .and_then(Released::from_value)
}

/// Deletes the fair lock whoever holds it and tells the next waiter.
pub(crate) fn fair_force_release(
    conn: &mut Connection,
    k: FairKeys<'_>,
    now_ms: u64,
    publish: &str,
) -> RedisResult<Forced> {
    invoke::<i64>(
        FAIR_FORCE_RELEASE
            .key(k.lock)
            .key(k.queue)
            .key(k.timeouts)
            .key(k.channel)
            .arg(UNLOCK_MESSAGE)
            .arg(now_ms)
            .arg(publish),
        conn,
    )
    .map(Forced::from_reply)
}

// ---- read-write lock ------------------------------------------------------------

/// The keys of a read-write lock, as its read half sees them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadKeys<'a> {
    pub(crate) lock: &'a str,
    pub(crate) channel: &'a str,
    /// The caller's timeout-key prefix, `{name}:<owner>:rwlock_timeout`.
    pub(crate) own_timeouts: &'a str,
    /// `{name}`: what precedes `:<owner>:rwlock_timeout:<n>` in every timeout key.
    pub(crate) key_prefix: &'a str,
}

/// Runs the read acquire: `None` when the caller now holds one more read hold, otherwise
/// the hash's PTTL in ms.
pub(crate) fn read_acquire(
    conn: &mut Connection,
    k: ReadKeys<'_>,
    read_owner: &str,
    write_owner: &str,
    lease_ms: u64,
) -> RedisResult<Option<i64>> {
    invoke(
        READ_ACQUIRE
            .key(k.lock)
            .key(k.own_timeouts)
            .arg(lease_ms)
            .arg(read_owner)
            .arg(write_owner),
        conn,
    )
}

/// Runs the read release script. `Fully` means the hash was deleted.
pub(crate) fn read_release(
    conn: &mut Connection,
    k: ReadKeys<'_>,
    r: &ReleaseArgs<'_>,
) -> RedisResult<Released> {
    invoke(
        READ_RELEASE
            .key(k.lock)
            .key(k.channel)
            .key(k.own_timeouts)
            .key(k.key_prefix)
            .key(r.latch)
            .arg(UNLOCK_MESSAGE)
            .arg(r.owner)
            .arg(r.publish)
            .arg(r.latch_ms),
        conn,
    )
    .and_then(Released::from_value)
}

/// Whether anyone holds a read hold (Redisson's `RReadLock.isLocked` rule).
pub(crate) fn read_is_locked(conn: &mut Connection, hash: &str) -> RedisResult<bool> {
    invoke(&READ_IS_LOCKED.key(hash), conn)
}

/// Renews the read holds `(lock name, read owner)`; element i of the answer says
/// whether owner i still held reads. Runs of the same lock share one key pair.
pub(crate) fn renew_reads(
    conn: &mut Connection,
    holds: &[(&str, &str)],
    lease_ms: u64,
) -> RedisResult<Vec<bool>> {
    let mut call = RENEW_READS.prepare_invoke();
    call.arg(lease_ms);
    for run in holds.chunk_by(|a, b| a.0 == b.0) {
        let name = run.first().map_or("", |h| h.0);
        call.key(name)
            .key(crate::protocol::names::read_key_prefix(name));
        call.arg(run.len());
        for (_, owner) in run {
            call.arg(*owner);
        }
    }
    let answer: Vec<i64> = invoke(&call, conn)?;
    Ok(answer.into_iter().map(|v| v == 1).collect())
}

/// [`renew_reads`] for one cluster master, with the locks named in arguments. `flags`:
/// see [`invoke_per_node`].
pub(crate) fn renew_reads_local(
    conn: &mut Connection,
    holds: &[(&str, &str)],
    lease_ms: u64,
    flags: bool,
) -> RedisResult<Vec<Option<bool>>> {
    invoke_per_node(
        &RENEW_READS_LOCAL,
        &RENEW_READS_LOCAL_UNFLAGGED,
        flags,
        conn,
        |call| {
            call.arg(lease_ms);
            for run in holds.chunk_by(|a, b| a.0 == b.0) {
                let name = run.first().map_or("", |h| h.0);
                call.arg(name)
                    .arg(crate::protocol::names::read_key_prefix(name));
                call.arg(run.len());
                for (_, owner) in run {
                    call.arg(*owner);
                }
            }
        },
    )
    .map(local_answers)
}

/// Runs the write acquire: `None` when the caller now holds one more write hold,
/// otherwise the hash's PTTL in ms.
pub(crate) fn write_acquire(
    conn: &mut Connection,
    hash: &str,
    write_owner: &str,
    lease_ms: u64,
) -> RedisResult<Option<i64>> {
    invoke(WRITE_ACQUIRE.key(hash).arg(lease_ms).arg(write_owner), conn)
}

/// Runs the write release script. `Fully` means the last write hold went.
pub(crate) fn write_release(
    conn: &mut Connection,
    hash: &str,
    channel: &str,
    r: &ReleaseArgs<'_>,
) -> RedisResult<Released> {
    hash_release(&WRITE_RELEASE, conn, [hash, channel], WAKE_ALL_MESSAGE, r)
}

/// The two modes of a read-write lock, for [`rw_force_release`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RwMode {
    Read,
    Write,
}

/// Deletes the lock if it is in `mode`, whoever holds it.
pub(crate) fn rw_force_release(
    conn: &mut Connection,
    hash: &str,
    channel: &str,
    mode: RwMode,
    publish: &str,
) -> RedisResult<Forced> {
    let (message, mode) = match mode {
        RwMode::Read => (UNLOCK_MESSAGE, "read"),
        RwMode::Write => (WAKE_ALL_MESSAGE, "write"),
    };
    invoke::<i64>(
        RW_FORCE_RELEASE
            .key(hash)
            .key(channel)
            .arg(message)
            .arg(publish)
            .arg(mode),
        conn,
    )
    .map(Forced::from_reply)
}

// ---- semaphore ------------------------------------------------------------------

/// Takes `permits` if available; true when taken.
pub(crate) fn semaphore_try_acquire(
    conn: &mut Connection,
    name: &str,
    permits: u64,
) -> RedisResult<bool> {
    invoke(SEMAPHORE_TRY_ACQUIRE.key(name).arg(permits), conn)
}

/// Returns `permits` and publishes the new count, which it returns; `None` when
/// `only_existing` and there is no semaphore. A count beyond Java's `int` is refused
/// (`PERMITS_OUT_OF_RANGE`).
pub(crate) fn semaphore_release(
    conn: &mut Connection,
    name: &str,
    channel: &str,
    permits: u64,
    publish: &str,
    only_existing: bool,
) -> RedisResult<Option<i64>> {
    invoke(
        SEMAPHORE_RELEASE
            .key(name)
            .key(channel)
            .arg(permits)
            .arg(publish)
            .arg(if only_existing { "1" } else { "0" }),
        conn,
    )
}

/// Takes every available permit; returns how many there were.
pub(crate) fn semaphore_drain(conn: &mut Connection, name: &str) -> RedisResult<i64> {
    invoke(&SEMAPHORE_DRAIN.key(name), conn)
}

/// Creates the semaphore with `permits` unless it exists; true when created.
pub(crate) fn semaphore_try_set(
    conn: &mut Connection,
    name: &str,
    channel: &str,
    permits: u64,
    ttl_ms: Option<u64>,
    publish: &str,
) -> RedisResult<bool> {
    invoke(
        SEMAPHORE_TRY_SET
            .key(name)
            .key(channel)
            .arg(permits)
            .arg(publish)
            .arg(ttl_ms.unwrap_or(0)),
        conn,
    )
}

/// Adds `delta` permits (negative: takes them); returns the new count. A count outside
/// Java's `int` is refused (`PERMITS_OUT_OF_RANGE`).
pub(crate) fn semaphore_add(
    conn: &mut Connection,
    name: &str,
    channel: &str,
    delta: i64,
    publish: &str,
) -> RedisResult<i64> {
    invoke(
        SEMAPHORE_ADD.key(name).key(channel).arg(delta).arg(publish),
        conn,
    )
}

// ---- permit-expirable semaphore ---------------------------------------------------

/// The three keys of a permit-expirable semaphore.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PermitKeys<'a> {
    pub(crate) name: &'a str,
    pub(crate) timeouts: &'a str,
    pub(crate) channel: &'a str,
}

/// What one permit acquisition attempt found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PermitAttempt {
    /// The permits were taken under the given ids.
    Acquired,
    /// Not enough permits; the earliest acquired permit's lease ends in this many ms.
    RetryIn(u64),
    /// Not enough permits, and none acquired has a lease.
    WaitForRelease,
}

/// Takes `ids.len()` permits under `ids`, each with lease end `expires_at_ms` (epoch ms,
/// [`NO_LEASE_SCORE`] for none).
pub(crate) fn permit_acquire(
    conn: &mut Connection,
    k: PermitKeys<'_>,
    ids: &[[u8; 16]],
    expires_at_ms: u64,
    now_ms: u64,
    publish: &str,
) -> RedisResult<PermitAttempt> {
    let mut call = PERMIT_ACQUIRE.prepare_invoke();
    call.key(k.name).key(k.timeouts).key(k.channel);
    call.arg(ids.len())
        .arg(expires_at_ms)
        .arg(now_ms)
        .arg(NO_LEASE_SCORE)
        .arg(publish);
    for id in ids {
        call.arg(&id[..]);
    }
    let answer: i64 = invoke(&call, conn)?;
    Ok(match answer {
        0 => PermitAttempt::Acquired,
        ms if ms > 0 => PermitAttempt::RetryIn(ms.unsigned_abs()),
        _ => PermitAttempt::WaitForRelease,
    })
}

/// Releases one permit by id; true when it was acquired and its lease had not ended.
pub(crate) fn permit_release(
    conn: &mut Connection,
    k: PermitKeys<'_>,
    id: &[u8; 16],
    now_ms: u64,
    publish: &str,
) -> RedisResult<bool> {
    invoke(
        PERMIT_RELEASE
            .key(k.name)
            .key(k.channel)
            .key(k.timeouts)
            .arg(&id[..])
            .arg(1)
            .arg(now_ms)
            .arg(publish),
        conn,
    )
}

/// Releases every permit of `ids`, or none when one of them is not live; returns how
/// many were released.
pub(crate) fn permit_release_many(
    conn: &mut Connection,
    k: PermitKeys<'_>,
    ids: &[[u8; 16]],
    now_ms: u64,
    publish: &str,
) -> RedisResult<u64> {
    let mut call = PERMIT_RELEASE_MANY.prepare_invoke();
    call.key(k.name).key(k.channel).key(k.timeouts);
    call.arg(ids.len()).arg(now_ms).arg(publish);
    for id in ids {
        call.arg(&id[..]);
    }
    invoke(&call, conn)
}

/// Reclaims expired permits, then returns `(available, acquired)`.
pub(crate) fn permit_counts(
    conn: &mut Connection,
    k: PermitKeys<'_>,
    now_ms: u64,
    publish: &str,
) -> RedisResult<(i64, i64)> {
    invoke(
        PERMIT_COUNTS
            .key(k.name)
            .key(k.channel)
            .key(k.timeouts)
            .arg(now_ms)
            .arg(publish),
        conn,
    )
}

/// Makes the total of available and acquired permits `permits`.
pub(crate) fn permit_set(
    conn: &mut Connection,
    k: PermitKeys<'_>,
    permits: u64,
    publish: &str,
) -> RedisResult<i64> {
    invoke(
        PERMIT_SET
            .key(k.name)
            .key(k.channel)
            .key(k.timeouts)
            .arg(permits)
            .arg(publish),
        conn,
    )
}

/// Adds `delta` available permits (negative: takes them); returns the new count. A
/// count or total outside Java's `int` is refused (`PERMITS_OUT_OF_RANGE`).
pub(crate) fn permit_add(
    conn: &mut Connection,
    k: PermitKeys<'_>,
    delta: i64,
    publish: &str,
) -> RedisResult<i64> {
    invoke(
        PERMIT_ADD
            .key(k.name)
            .key(k.channel)
            .key(k.timeouts)
            .arg(delta)
            .arg(publish),
        conn,
    )
}

/// Gives an acquired permit the lease end `expires_at_ms`; true when it was acquired.
pub(crate) fn permit_update_lease(
    conn: &mut Connection,
    k: PermitKeys<'_>,
    id: &[u8; 16],
    expires_at_ms: u64,
    now_ms: u64,
    publish: &str,
) -> RedisResult<bool> {
    invoke(
        PERMIT_UPDATE_LEASE
            .key(k.name)
            .key(k.channel)
            .key(k.timeouts)
            .arg(&id[..])
            .arg(expires_at_ms)
            .arg(now_ms)
            .arg(publish),
        conn,
    )
}

/// The remaining lease of a permit in ms: -1 without lease, -2 when not acquired.
pub(crate) fn permit_lease_time(
    conn: &mut Connection,
    k: PermitKeys<'_>,
    id: &[u8; 16],
    now_ms: u64,
    publish: &str,
) -> RedisResult<i64> {
    invoke(
        PERMIT_LEASE_TIME
            .key(k.name)
            .key(k.channel)
            .key(k.timeouts)
            .arg(&id[..])
            .arg(now_ms)
            .arg(publish)
            .arg(NO_LEASE_SCORE),
        conn,
    )
}

// ---- count-down latch -------------------------------------------------------------

/// Sets the count unless one is set; true when it was set.
pub(crate) fn latch_try_set(
    conn: &mut Connection,
    name: &str,
    channel: &str,
    count: u64,
    publish: &str,
) -> RedisResult<bool> {
    invoke(
        LATCH_TRY_SET
            .key(name)
            .key(channel)
            .arg(LATCH_NEW_COUNT_MESSAGE)
            .arg(count)
            .arg(publish),
        conn,
    )
}

/// Counts down by one; returns the count afterwards.
pub(crate) fn latch_count_down(
    conn: &mut Connection,
    name: &str,
    channel: &str,
    publish: &str,
) -> RedisResult<i64> {
    invoke(
        LATCH_COUNT_DOWN
            .key(name)
            .key(channel)
            .arg(LATCH_ZERO_MESSAGE)
            .arg(publish),
        conn,
    )
}

// ---- string-token lock ---------------------------------------------------------

/// redmutex's wake-up message on a token lock's channel: wakes one waiter.
pub(crate) const TOKEN_WAKE_MESSAGE: &str = UNLOCK_MESSAGE;

/// Runs the token acquire: `None` when the key now holds `token` for `ttl_ms`, otherwise
/// the holder's remaining TTL in ms (-1: none).
///
/// A free key is taken with a plain `SET NX PX`, the peers' own command and the cheapest
/// one Redis has for it; only a refused `SET` (the key exists, whatever its type) pays for
/// the script, which tries again and reads the holder's PTTL or reports a wrong type.
/// Trying twice is safe: the token is this caller's alone, and `NX` never overwrites.
pub(crate) fn token_acquire(
    conn: &mut Connection,
    key: &str,
    token: &str,
    ttl_ms: u64,
) -> RedisResult<Option<i64>> {
    let set: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg(token)
        .arg("NX")
        .arg("PX")
        .arg(ttl_ms)
        .query(conn)?;
    if set.is_some() {
        return Ok(None);
    }
    invoke(TOKEN_ACQUIRE.key(key).arg(token).arg(ttl_ms), conn)
}

/// [`token_acquire`] as a [`Call`]; its reply reads as [`token_acquire`]'s.
pub(crate) fn token_acquire_call(key: &str, token: &str, ttl_ms: u64) -> Call {
    let ttl = ttl_ms.to_string();
    Call::new(
        &TOKEN_ACQUIRE,
        &[key.as_bytes()],
        &[token.as_bytes(), ttl.as_bytes()],
    )
}

/// What a token release found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenReleased {
    /// The key held the token and was deleted; waiters were told.
    Deleted,
    /// The key holds another token; nothing changed.
    Other,
    /// The key was gone; nothing changed.
    Gone,
}

impl TokenReleased {
    /// The release script's answer: 1, 0 or -1.
    pub(crate) fn from_reply(reply: i64) -> Self {
        match reply {
            1 => Self::Deleted,
            0 => Self::Other,
            _ => Self::Gone,
        }
    }
}

/// Runs the token release (compare-and-delete, then a wake-up on `channel`).
pub(crate) fn token_release(
    conn: &mut Connection,
    [key, channel]: [&str; 2],
    token: &str,
    publish: &str,
) -> RedisResult<TokenReleased> {
    invoke::<i64>(
        TOKEN_RELEASE
            .key(key)
            .key(channel)
            .arg(token)
            .arg(publish)
            .arg(TOKEN_WAKE_MESSAGE),
        conn,
    )
    .map(TokenReleased::from_reply)
}

/// [`token_release`] as a [`Call`]; its reply is the script's 1, 0 or -1.
pub(crate) fn token_release_call([key, channel]: [&str; 2], token: &str, publish: &str) -> Call {
    Call::new(
        &TOKEN_RELEASE,
        &[key.as_bytes(), channel.as_bytes()],
        &[
            token.as_bytes(),
            publish.as_bytes(),
            TOKEN_WAKE_MESSAGE.as_bytes(),
        ],
    )
}

/// How a token extend changes the TTL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExtendBy {
    /// The TTL becomes the given time.
    Set,
    /// The given time is added to the TTL left.
    Add,
}

impl ExtendBy {
    fn arg(self) -> &'static str {
        match self {
            Self::Set => "set",
            Self::Add => "add",
        }
    }
}

/// Runs the token extend: the new TTL in ms (≥ 1) when `token` holds the key; 0 when it
/// does not; -1 when adding to a key without a TTL.
pub(crate) fn token_extend(
    conn: &mut Connection,
    key: &str,
    token: &str,
    ms: u64,
    by: ExtendBy,
) -> RedisResult<i64> {
    invoke(TOKEN_EXTEND.key(key).arg(token).arg(ms).arg(by.arg()), conn)
}

/// [`token_extend`] as a [`Call`]; its reply reads as [`token_extend`]'s.
pub(crate) fn token_extend_call(key: &str, token: &str, ms: u64, by: ExtendBy) -> Call {
    let ms = ms.to_string();
    Call::new(
        &TOKEN_EXTEND,
        &[key.as_bytes()],
        &[token.as_bytes(), ms.as_bytes(), by.arg().as_bytes()],
    )
}

/// Renews every `(key, token)` pair with `lease_ms`; element i of the answer says whether
/// key i still held token i.
pub(crate) fn renew_tokens(
    conn: &mut Connection,
    holds: &[(&str, &str)],
    lease_ms: u64,
) -> RedisResult<Vec<bool>> {
    let mut call = TOKEN_RENEW.prepare_invoke();
    call.arg(lease_ms);
    for (key, token) in holds {
        call.key(*key).arg(*token);
    }
    let answer: Vec<i64> = invoke(&call, conn)?;
    Ok(answer.into_iter().map(|v| v == 1).collect())
}

/// [`renew_tokens`] for one cluster master, with the keys named in arguments (any slots
/// the node serves); element i is `None` when the node could not look at pair i.
/// `flags`: see [`invoke_per_node`].
pub(crate) fn renew_tokens_local(
    conn: &mut Connection,
    holds: &[(&str, &str)],
    lease_ms: u64,
    flags: bool,
) -> RedisResult<Vec<Option<bool>>> {
    invoke_per_node(
        &TOKEN_RENEW_LOCAL,
        &TOKEN_RENEW_LOCAL_UNFLAGGED,
        flags,
        conn,
        |call| {
            call.arg(lease_ms);
            for (key, token) in holds {
                call.arg(*key).arg(*token);
            }
        },
    )
    .map(local_answers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_script_documents_its_contract_and_hashes_stably() {
        let scripts = all_scripts();
        // Every file of lua/ (not its lib/ and cli/ folders) is one script here.
        let files = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/lua"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "lua")
            })
            .count();
        assert_eq!(scripts.len(), files);
        for (src, _, script) in scripts {
            assert!(
                src.contains("KEYS[") && src.contains("ARGV[") && src.contains("Returns"),
                "{src}"
            );
            assert_eq!(script.get_hash().len(), 40);
        }
    }

    #[test]
    fn a_call_is_the_evalsha_of_its_script() {
        let call = token_acquire_call("k", "t", 1500);
        let expected = format!(
            "*6\r\n$7\r\nEVALSHA\r\n$40\r\n{}\r\n$1\r\n1\r\n$1\r\nk\r\n$1\r\nt\r\n$4\r\n1500\r\n",
            TOKEN_ACQUIRE.get_hash()
        );
        assert_eq!(String::from_utf8_lossy(call.packed()), expected);
    }

    #[test]
    fn a_script_is_prefixed_with_exactly_the_shared_rules_it_calls() {
        let rules = [
            ("latch.lua", include_str!("../../lua/lib/latch.lua")),
            (
                "fair_queue.lua",
                include_str!("../../lua/lib/fair_queue.lua"),
            ),
            ("permits.lua", include_str!("../../lua/lib/permits.lua")),
            ("rwlock.lua", include_str!("../../lua/lib/rwlock.lua")),
            ("uncounted.lua", include_str!("../../lua/lib/uncounted.lua")),
        ];
        for (src, libs, _) in all_scripts() {
            for (lib, text) in rules {
                let functions: Vec<&str> = text
                    .lines()
                    .filter_map(|l| l.strip_prefix("local function "))
                    .filter_map(|l| l.split('(').next())
                    .collect();
                assert!(!functions.is_empty(), "{lib}");
                let calls = functions.iter().any(|f| src.contains(&format!("{f}(")));
                assert_eq!(calls, libs.contains(&lib), "{lib} for:\n{src}");
            }
        }
    }
}
