//! Reading one lock-family object from its keys: which kind it is, who holds it, for how
//! long, and who waits. Whether the key has a lock's shape at all comes first
//! (`shape.rs`: owner fields, token formats); a key without one is `other`, and one whose
//! shape is only doubtful is `other` too unless `--kind` says what it is. The kinds are
//! then told apart by Redisson's key layout:
//!
//! | what the keys show | kind |
//! |---|---|
//! | hash with a `mode` field | read-write lock |
//! | hash, plus `redisson_lock_queue:{name}` / `redisson_lock_timeout:{name}` | fair lock |
//! | hash, plus `redisson_lock_token:{name}` | fenced lock |
//! | any other hash of owner fields | lock (an RLock; spin and non-reentrant locks look the same) |
//! | integer string plus a `{name}:timeout` zset | permit-expirable semaphore |
//! | integer string, someone subscribed to `redisson_sc:{name}` | semaphore |
//! | integer string, someone subscribed to the latch channel | count-down latch |
//! | integer string, no one waiting | a semaphore or a latch (say which with `--kind`) |
//! | a string in a token's shape | string-token lock (redsync, redis-py) |
//!
//! A hash and its side keys are read in one `MULTI`, so holders, TTL and queue belong to
//! one moment; read-hold timeouts follow in a second round trip.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::connect::Redis;
use crate::fail::Failure;
use crate::names;
use crate::shape::{self, HashLock, Shape, StringLock};

/// A kind of object, as `status` names it (and `--kind` takes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Kind {
    /// Redisson RLock (also its spin and non-reentrant locks).
    Lock,
    /// Redisson RFencedLock.
    FencedLock,
    /// Redisson RFairLock.
    FairLock,
    /// Redisson RReadWriteLock.
    ReadWriteLock,
    /// Redisson RSemaphore.
    Semaphore,
    /// Redisson RPermitExpirableSemaphore.
    PermitExpirableSemaphore,
    /// Redisson RCountDownLatch.
    CountDownLatch,
    /// A plain `SET key token NX PX` lock (redsync, redis-py).
    TokenLock,
    /// An integer string nobody waits on: a semaphore or a latch.
    #[value(skip)]
    SemaphoreOrLatch,
    /// No key at all.
    #[value(skip)]
    None,
    /// A key without a lock's shape (another type, application data, or a doubtful shape
    /// that `--kind` did not confirm).
    #[value(skip)]
    Other,
}

impl Kind {
    /// The name in JSON and on the command line.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Lock => "lock",
            Self::FencedLock => "fenced-lock",
            Self::FairLock => "fair-lock",
            Self::ReadWriteLock => "read-write-lock",
            Self::Semaphore => "semaphore",
            Self::PermitExpirableSemaphore => "permit-expirable-semaphore",
            Self::CountDownLatch => "count-down-latch",
            Self::TokenLock => "token-lock",
            Self::SemaphoreOrLatch => "semaphore-or-latch",
            Self::None => "none",
            Self::Other => "other",
        }
    }

    /// What a person calls it.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Self::Lock => "lock (Redisson RLock)",
            Self::FencedLock => "fenced lock (Redisson RFencedLock)",
            Self::FairLock => "fair lock (Redisson RFairLock)",
            Self::ReadWriteLock => "read-write lock (Redisson RReadWriteLock)",
            Self::Semaphore => "semaphore (Redisson RSemaphore)",
            Self::PermitExpirableSemaphore => {
                "permit-expirable semaphore (Redisson RPermitExpirableSemaphore)"
            }
            Self::CountDownLatch => "count-down latch (Redisson RCountDownLatch)",
            Self::TokenLock => "string-token lock (redsync, redis-py)",
            Self::SemaphoreOrLatch => "semaphore or count-down latch",
            Self::None => "no such key",
            Self::Other => "not a lock-family object",
        }
    }

    /// Kinds whose key is a hash of owner fields.
    fn is_hash_lock(self) -> bool {
        matches!(
            self,
            Self::Lock | Self::FencedLock | Self::FairLock | Self::ReadWriteLock
        )
    }

    /// Kinds whose key is an integer string.
    fn is_counter(self) -> bool {
        matches!(
            self,
            Self::Semaphore
                | Self::PermitExpirableSemaphore
                | Self::CountDownLatch
                | Self::SemaphoreOrLatch
        )
    }
}

/// One holder: an owner field with its hold count (locks), a permit (permit-expirable
/// semaphores) or a token (string-token locks).
#[derive(Debug, Clone)]
pub(crate) struct Holder {
    /// The hash field without `:write`, the permit id in hex, or the token.
    pub(crate) owner: String,
    /// `<client-id>` of a `<client-id>:<thread>` owner.
    pub(crate) client_id: Option<String>,
    /// `<thread>` of a `<client-id>:<thread>` owner.
    pub(crate) thread: Option<u64>,
    pub(crate) count: i64,
    /// `read` or `write` in a read-write lock.
    pub(crate) mode: Option<&'static str>,
    /// Milliseconds left of each read hold (its timeout key's PTTL: -2 when it is gone,
    /// the mark of a dead reader), or of a permit's lease (`None` for no lease).
    pub(crate) leases_ms: Vec<Option<i64>>,
}

impl Holder {
    /// A holder named by a lock's hash field.
    fn of_field(field: &str, count: i64, mode: Option<&'static str>) -> Self {
        let owner = field.strip_suffix(":write").unwrap_or(field);
        let (client_id, thread) = split_owner(owner);
        Self {
            owner: owner.to_owned(),
            client_id,
            thread,
            count,
            mode,
            leases_ms: Vec::new(),
        }
    }
}

/// `<client-id>:<thread>` split in two; an owner of another shape has no parts.
pub(crate) fn split_owner(owner: &str) -> (Option<String>, Option<u64>) {
    match owner.rsplit_once(':') {
        Some((id, thread)) if !id.is_empty() => match thread.parse() {
            Ok(thread) => (Some(id.to_owned()), Some(thread)),
            Err(_) => (None, None),
        },
        _ => (None, None),
    }
}

/// One queued fair-lock waiter.
#[derive(Debug, Clone)]
pub(crate) struct Waiter {
    pub(crate) owner: String,
    pub(crate) client_id: Option<String>,
    pub(crate) thread: Option<u64>,
    /// When its slot ends (epoch ms); the queue drops it then if it has not come back.
    pub(crate) deadline_ms: Option<i64>,
}

/// What one name holds.
#[derive(Debug, Clone)]
pub(crate) struct Object {
    pub(crate) name: String,
    pub(crate) kind: Kind,
    /// The key's Redis type (`hash`, `string`, `none`, ...).
    pub(crate) key_type: String,
    /// Milliseconds left; -1 when the key never expires; `None` when there is no key.
    pub(crate) ttl_ms: Option<i64>,
    pub(crate) holders: Vec<Holder>,
    /// Fair-lock waiters in queue order.
    pub(crate) queue: Vec<Waiter>,
    /// Read-write lock mode.
    pub(crate) mode: Option<String>,
    /// Fenced lock: the last token handed out.
    pub(crate) token: Option<i64>,
    /// Semaphores: available permits; latch: the count.
    pub(crate) count: Option<i64>,
    /// Clients subscribed to the object's channel (waiting, for most kinds).
    pub(crate) subscribers: i64,
    /// What an `other` key looks like, in words.
    pub(crate) looks_like: Option<String>,
    /// For an `other` key whose shape is only doubtful, the kind it would be read as:
    /// `--kind` of that family confirms it.
    pub(crate) could_be: Option<Kind>,
    /// The wall clock this was read at (epoch ms), for the queue's deadlines.
    pub(crate) read_at_ms: i64,
}

impl Object {
    /// Whether somebody holds it.
    pub(crate) fn is_held(&self) -> bool {
        !self.holders.is_empty()
    }
}

/// Wall-clock milliseconds.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Reads `name`; `kind` overrides the detection (it must fit the key's type and shape, and
/// confirms a doubtful shape).
pub(crate) fn inspect(
    redis: &mut Redis,
    name: &str,
    kind: Option<Kind>,
) -> Result<Object, Failure> {
    let fail = |e| Failure::redis_on(&format!("reading `{name}`"), e);
    let key_type: String = redis::cmd("TYPE")
        .arg(name)
        .query(redis.on_key(name))
        .map_err(fail)?;
    let mut object = Object {
        name: name.to_owned(),
        kind: Kind::None,
        key_type: key_type.clone(),
        ttl_ms: None,
        holders: Vec::new(),
        queue: Vec::new(),
        mode: None,
        token: None,
        count: None,
        subscribers: 0,
        read_at_ms: now_ms(),
        looks_like: None,
        could_be: None,
    };
    let trusted = kind.is_some();
    match key_type.as_str() {
        "hash" => read_hash(redis, &mut object, trusted).map_err(fail)?,
        "string" => read_string(redis, &mut object, trusted).map_err(fail)?,
        "none" => read_absent(redis, &mut object).map_err(fail)?,
        other => {
            object.kind = Kind::Other;
            object.looks_like = Some(format!("a {other} key, which no lock is"));
        }
    }
    if let Some(kind) = kind {
        apply_kind(&mut object, kind)?;
    }
    object.subscribers = subscribers(redis, &object).map_err(fail)?;
    Ok(object)
}

/// Checks that `kind` fits what the keys hold, and takes it.
fn apply_kind(object: &mut Object, kind: Kind) -> Result<(), Failure> {
    let fits = match object.key_type.as_str() {
        "hash" => kind.is_hash_lock(),
        "string" => kind.is_counter() || kind == Kind::TokenLock,
        "none" => true,
        _ => false,
    };
    if !fits {
        return Err(Failure::usage(format!(
            "`{}` is a {} key, which a {} never is",
            object.name,
            object.key_type,
            kind.as_str()
        )));
    }
    if object.kind == Kind::Other && object.could_be.is_none() {
        // No lock has this shape, whatever the caller says it is.
        return Err(Failure::not_a_lock(format!(
            "`{}` is not a {}: it is {}",
            object.name,
            kind.as_str(),
            object.looks_like.as_deref().unwrap_or("not a lock")
        )));
    }
    // A read-write lock is the one hash with a mode; reading one as the other would
    // release the wrong way and tell the wrong channel.
    let read_write = object.could_be.unwrap_or(object.kind) == Kind::ReadWriteLock;
    if object.key_type == "hash" && read_write != (kind == Kind::ReadWriteLock) {
        return Err(Failure::usage(format!(
            "`{}` is {}, which a {} never is",
            object.name,
            if read_write {
                "a read-write lock (its hash has a mode field)"
            } else {
                "a hash without the mode field of a read-write lock"
            },
            kind.as_str()
        )));
    }
    if kind == Kind::TokenLock
        && object.key_type == "string"
        && let Some(count) = object.count.take()
    {
        // An integer string read as a counter: it is a token after all.
        object.holders = vec![token_holder(count.to_string())];
    }
    if kind.is_counter() && object.kind == Kind::TokenLock {
        return Err(Failure::usage(format!(
            "`{}` holds a non-numeric string, which a {} never is",
            object.name,
            kind.as_str()
        )));
    }
    object.kind = kind;
    Ok(())
}

/// Reads a hash; `trusted` (the caller named a kind) reads a doubtful shape as the lock
/// it resembles.
fn read_hash(redis: &mut Redis, object: &mut Object, trusted: bool) -> redis::RedisResult<()> {
    let name = object.name.clone();
    let queue_key = names::fair_queue(&name);
    let timeouts_key = names::fair_timeouts(&name);
    let token_key = names::prefixed("redisson_lock_token", &name);
    let mut pipe = redis::pipe();
    pipe.cmd("HGETALL").arg(&name);
    pipe.cmd("PTTL").arg(&name);
    pipe.cmd("LRANGE").arg(&queue_key).arg(0).arg(-1);
    pipe.cmd("ZRANGE")
        .arg(&timeouts_key)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES");
    pipe.cmd("GET").arg(&token_key);
    type Snapshot = (
        Vec<(Vec<u8>, Vec<u8>)>,
        i64,
        Vec<String>,
        Vec<(String, f64)>,
        Option<i64>,
    );
    // One MULTI: the fields, the TTL and the queue of one moment. A user without MULTI
    // (a read-only ACL) still gets the reads, one after the other.
    let conn = redis.on_key(&name);
    let (raw_fields, pttl, queue, timeouts, token): Snapshot =
        match pipe.clone().atomic().query(conn) {
            Ok(snapshot) => snapshot,
            Err(e) if e.code() == Some("NOPERM") => pipe.query(conn)?,
            Err(e) => return Err(e),
        };
    object.ttl_ms = ttl_of(pttl);
    let sort = match shape::of_hash(&raw_fields) {
        Shape::Lock(sort) => sort,
        Shape::Doubtful(sort, looks) if trusted => {
            object.looks_like = Some(looks);
            sort
        }
        Shape::Doubtful(sort, looks) => {
            object.kind = Kind::Other;
            object.looks_like = Some(looks);
            object.could_be = Some(match sort {
                HashLock::ReadWrite => Kind::ReadWriteLock,
                HashLock::Owners => Kind::Lock,
            });
            return Ok(());
        }
        Shape::Foreign(looks) => {
            object.kind = Kind::Other;
            object.looks_like = Some(looks);
            return Ok(());
        }
    };
    // The shape check passed only UTF-8 fields and values.
    let fields: BTreeMap<String, String> = raw_fields
        .into_iter()
        .map(|(f, v)| {
            (
                String::from_utf8_lossy(&f).into_owned(),
                String::from_utf8_lossy(&v).into_owned(),
            )
        })
        .collect();
    object.token = token;
    if sort == HashLock::ReadWrite {
        object.kind = Kind::ReadWriteLock;
        object.mode = fields.get("mode").cloned();
        read_rw_holders(redis, object, &fields)?;
        return Ok(());
    }
    object.holders = fields
        .iter()
        .map(|(field, count)| Holder::of_field(field, count.parse().unwrap_or(0), None))
        .collect();
    object.kind = if !queue.is_empty() || !timeouts.is_empty() {
        Kind::FairLock
    } else if token.is_some() {
        Kind::FencedLock
    } else {
        Kind::Lock
    };
    object.queue = fair_queue(queue, &timeouts);
    Ok(())
}

/// The queue in order, each waiter with its slot's end.
fn fair_queue(queue: Vec<String>, timeouts: &[(String, f64)]) -> Vec<Waiter> {
    queue
        .into_iter()
        .map(|owner| {
            let (client_id, thread) = split_owner(&owner);
            let deadline_ms = timeouts
                .iter()
                .find(|(o, _)| *o == owner)
                .map(|(_, score)| *score as i64);
            Waiter {
                owner,
                client_id,
                thread,
                deadline_ms,
            }
        })
        .collect()
}

/// A read-write lock's readers and writer, each read hold with its own timeout.
fn read_rw_holders(
    redis: &mut Redis,
    object: &mut Object,
    fields: &BTreeMap<String, String>,
) -> redis::RedisResult<()> {
    let name = object.name.clone();
    let mut holders: Vec<Holder> = fields
        .iter()
        .filter(|(field, _)| *field != "mode")
        .map(|(field, count)| {
            let mode = if field.ends_with(":write") {
                "write"
            } else {
                "read"
            };
            Holder::of_field(field, count.parse().unwrap_or(0), Some(mode))
        })
        .collect();
    let mut pipe = redis::pipe();
    let mut asked = 0;
    for holder in holders.iter().filter(|h| h.mode == Some("read")) {
        let prefix = names::read_timeout_prefix(&name, &holder.owner);
        for n in 1..=holder.count.clamp(0, 1000) {
            pipe.cmd("PTTL").arg(format!("{prefix}:{n}"));
            asked += 1;
        }
    }
    if asked > 0 {
        let mut ttls: std::vec::IntoIter<i64> =
            pipe.query::<Vec<i64>>(redis.on_key(&name))?.into_iter();
        for holder in holders.iter_mut().filter(|h| h.mode == Some("read")) {
            holder.leases_ms = (0..holder.count.clamp(0, 1000))
                .map(|_| ttls.next())
                .collect();
        }
    }
    // Writers first: they are what others wait for.
    holders.sort_by_key(|h| h.mode != Some("write"));
    object.holders = holders;
    Ok(())
}

/// Reads a string; `trusted` (the caller named a kind) reads a doubtful one as a token.
fn read_string(redis: &mut Redis, object: &mut Object, trusted: bool) -> redis::RedisResult<()> {
    let name = object.name.clone();
    let permits_key = names::permit_timeouts(&name);
    let mut pipe = redis::pipe();
    pipe.cmd("GET").arg(&name);
    pipe.cmd("PTTL").arg(&name);
    pipe.cmd("ZRANGE")
        .arg(&permits_key)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES");
    let conn = redis.on_key(&name);
    type Snapshot = (Option<Vec<u8>>, i64, Vec<(Vec<u8>, f64)>);
    let (value, pttl, permits): Snapshot = match pipe.clone().atomic().query(conn) {
        Ok(snapshot) => snapshot,
        Err(e) if e.code() == Some("NOPERM") => pipe.query(conn)?,
        Err(e) => return Err(e),
    };
    object.ttl_ms = ttl_of(pttl);
    let count = match shape::of_string(&value.unwrap_or_default()) {
        Shape::Lock(StringLock::Counter(count)) => count,
        Shape::Lock(StringLock::Token(token)) => {
            object.kind = Kind::TokenLock;
            object.holders = vec![token_holder(token)];
            return Ok(());
        }
        Shape::Doubtful(StringLock::Token(token), looks) if trusted => {
            object.kind = Kind::TokenLock;
            object.looks_like = Some(looks);
            object.holders = vec![token_holder(token)];
            return Ok(());
        }
        Shape::Doubtful(_, looks) => {
            // Its value stays unread: an application's string is none of our business.
            object.kind = Kind::Other;
            object.looks_like = Some(looks);
            object.could_be = Some(Kind::TokenLock);
            return Ok(());
        }
        Shape::Foreign(looks) => {
            object.kind = Kind::Other;
            object.looks_like = Some(looks);
            return Ok(());
        }
    };
    object.count = Some(count);
    if !permits.is_empty() {
        object.kind = Kind::PermitExpirableSemaphore;
        object.holders = permit_holders(&permits, object.read_at_ms);
        return Ok(());
    }
    let semaphore = numsub(redis, &names::semaphore_channel(&name))?;
    let latch = numsub(redis, &names::latch_channel(&name))?;
    object.kind = match (semaphore > 0, latch > 0) {
        (true, false) => Kind::Semaphore,
        (false, true) => Kind::CountDownLatch,
        _ => Kind::SemaphoreOrLatch,
    };
    Ok(())
}

/// A free object may still have side keys: a fenced lock's token counter, a fair
/// lock's queue, a permit-expirable semaphore's permits.
fn read_absent(redis: &mut Redis, object: &mut Object) -> redis::RedisResult<()> {
    let name = object.name.clone();
    let mut pipe = redis::pipe();
    pipe.cmd("GET")
        .arg(names::prefixed("redisson_lock_token", &name));
    pipe.cmd("LRANGE")
        .arg(names::fair_queue(&name))
        .arg(0)
        .arg(-1);
    pipe.cmd("ZRANGE")
        .arg(names::fair_timeouts(&name))
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES");
    pipe.cmd("ZRANGE")
        .arg(names::permit_timeouts(&name))
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES");
    type Sides = (
        Option<i64>,
        Vec<String>,
        Vec<(String, f64)>,
        Vec<(Vec<u8>, f64)>,
    );
    let (token, queue, timeouts, permits): Sides = pipe.query(redis.on_key(&name))?;
    if !queue.is_empty() || !timeouts.is_empty() {
        object.kind = Kind::FairLock;
        object.queue = fair_queue(queue, &timeouts);
    } else if token.is_some() {
        object.kind = Kind::FencedLock;
    } else if !permits.is_empty() {
        object.kind = Kind::PermitExpirableSemaphore;
        object.count = Some(0);
        object.holders = permit_holders(&permits, object.read_at_ms);
    } else if numsub(redis, &names::semaphore_channel(&name))? > 0 {
        // A semaphore without permits has no key; its waiters give it away.
        object.kind = Kind::Semaphore;
        object.count = Some(0);
    }
    object.token = token;
    Ok(())
}

/// The acquired permits of a permit-expirable semaphore, each with its lease.
fn permit_holders(permits: &[(Vec<u8>, f64)], now: i64) -> Vec<Holder> {
    /// Redisson's score for a permit without lease.
    const NO_LEASE: f64 = 922_337_203_685_477.0;
    permits
        .iter()
        .map(|(id, score)| Holder {
            owner: id.iter().map(|b| format!("{b:02x}")).collect(),
            client_id: None,
            thread: None,
            count: 1,
            mode: None,
            leases_ms: vec![(*score < NO_LEASE).then(|| *score as i64 - now)],
        })
        .collect()
}

fn token_holder(token: String) -> Holder {
    Holder {
        owner: token,
        client_id: None,
        thread: None,
        count: 1,
        mode: None,
        leases_ms: Vec::new(),
    }
}

/// PTTL as `ttl_ms`: absent → `None`, no expiry → -1.
fn ttl_of(pttl: i64) -> Option<i64> {
    match pttl {
        -2 => None,
        ms => Some(ms),
    }
}

/// Clients subscribed to `channel`, plain and sharded.
pub(crate) fn numsub(redis: &mut Redis, channel: &str) -> redis::RedisResult<i64> {
    let conn = redis.on_key(channel);
    let (_, plain): (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query(conn)?;
    // Sharded pub/sub exists from Redis 7.0 on; older servers answer with an error.
    let sharded = redis::cmd("PUBSUB")
        .arg("SHARDNUMSUB")
        .arg(channel)
        .query::<(String, i64)>(conn)
        .map_or(0, |(_, n)| n);
    Ok(plain + sharded)
}

/// The channel waiters of `object` listen on, when there is one channel for all of them.
pub(crate) fn wait_channel(kind: Kind, name: &str) -> Option<String> {
    match kind {
        Kind::Lock | Kind::FencedLock => Some(names::lock_channel(name)),
        Kind::ReadWriteLock => Some(names::rwlock_channel(name)),
        Kind::Semaphore | Kind::PermitExpirableSemaphore => Some(names::semaphore_channel(name)),
        Kind::CountDownLatch => Some(names::latch_channel(name)),
        _ => None,
    }
}

fn subscribers(redis: &mut Redis, object: &Object) -> redis::RedisResult<i64> {
    match wait_channel(object.kind, &object.name) {
        Some(channel) => numsub(redis, &channel),
        None => Ok(0),
    }
}

/// The object names behind the keys matching `pattern`: side keys (queues, tokens,
/// permits, read-hold timeouts) count for the object they belong to, unlock latches for
/// nothing.
pub(crate) fn scan(redis: &mut Redis, pattern: &str) -> Result<Vec<String>, Failure> {
    let keys = scan_keys(redis, pattern, "scanning keys")?;
    let found: std::collections::BTreeSet<String> =
        keys.iter().filter_map(|k| object_of_key(k)).collect();
    Ok(found.into_iter().collect())
}

/// Every key matching `pattern` on every master (`SCAN`, so no node blocks), sorted;
/// `doing` names the step in an error.
pub(crate) fn scan_keys(
    redis: &mut Redis,
    pattern: &str,
    doing: &str,
) -> Result<Vec<String>, Failure> {
    let mut found = Vec::new();
    for conn in redis.nodes() {
        let mut cursor: u64 = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000)
                .query(conn)
                .map_err(|e| Failure::redis_on(doing, e))?;
            found.extend(keys);
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    found.sort();
    Ok(found)
}

/// The object a key belongs to, if any.
fn object_of_key(key: &str) -> Option<String> {
    if key.starts_with("redisson_unlock_latch:") || key.contains(":rwlock_timeout:") {
        return None;
    }
    for prefix in [
        "redisson_lock_queue:",
        "redisson_lock_timeout:",
        "redisson_lock_token:",
    ] {
        if let Some(rest) = key.strip_prefix(prefix) {
            return Some(unwrap_tag(rest).to_owned());
        }
    }
    if let Some(rest) = key.strip_suffix(":timeout") {
        return Some(unwrap_tag(rest).to_owned());
    }
    Some(key.to_owned())
}

/// `{name}` → `name`; a name that carried its own braces stays as it is.
fn unwrap_tag(text: &str) -> &str {
    match text.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
        Some(inner) if !inner.contains(['{', '}']) => inner,
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn side_keys_point_back_to_their_object() {
        assert_eq!(object_of_key("orders:1").as_deref(), Some("orders:1"));
        assert_eq!(
            object_of_key("redisson_lock_queue:{orders:1}").as_deref(),
            Some("orders:1")
        );
        assert_eq!(
            object_of_key("redisson_lock_token:{t}x").as_deref(),
            Some("{t}x")
        );
        assert_eq!(object_of_key("{sem}:timeout").as_deref(), Some("sem"));
        assert_eq!(object_of_key("redisson_unlock_latch:{a}:ff"), None);
        assert_eq!(object_of_key("{rw}:u:1:rwlock_timeout:1"), None);
    }

    #[test]
    fn owners_split_into_client_and_thread() {
        let (id, thread) = split_owner("3f1c-aa:57");
        assert_eq!((id.as_deref(), thread), (Some("3f1c-aa"), Some(57)));
        assert_eq!(split_owner("c0ffee=="), (None, None));
        let write = Holder::of_field("u-1:9:write", 2, Some("write"));
        assert_eq!((write.owner.as_str(), write.thread), ("u-1:9", Some(9)));
    }
}
