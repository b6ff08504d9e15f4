//! The writes of one fenced write ([`LockGuard::fenced`](super::LockGuard::fenced)).

use redis::{Connection, RedisResult, ToRedisArgs};

use crate::protocol::script::invoke;

/// The commands of one fenced write, collected by the closure given to
/// [`LockGuard::fenced`](crate::LockGuard::fenced) and run in order, in one script
/// call, after the lock check. Every method returns `&mut Self`, so calls chain.
///
/// [`cmd`](Self::cmd) takes any Redis command whose keys come before its other
/// arguments; the others are shorthands for common writes.
#[derive(Debug, Default)]
pub struct FencedWrite {
    commands: Vec<Command>,
}

impl FencedWrite {
    /// Any command: its name, its keys, then its other arguments (a tuple, a slice, a
    /// `Vec`, or one value). For `EXPIRE k 10` that is `cmd("EXPIRE", &["k"], 10)`.
    pub fn cmd(&mut self, name: &str, keys: &[&str], args: impl ToRedisArgs) -> &mut Self {
        let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.as_bytes().to_vec()).collect();
        let mut words = Vec::with_capacity(1 + keys.len());
        words.push(name.as_bytes().to_vec());
        words.extend(keys.iter().cloned());
        words.extend(args.to_redis_args());
        self.commands.push(Command { words, keys });
        self
    }

    /// `SET key value`.
    pub fn set(&mut self, key: &str, value: impl ToRedisArgs) -> &mut Self {
        self.cmd("SET", &[key], value)
    }

    /// `INCRBY key delta`.
    pub fn incr_by(&mut self, key: &str, delta: i64) -> &mut Self {
        self.cmd("INCRBY", &[key], delta)
    }

    /// `HSET key field value`.
    pub fn hset(
        &mut self,
        key: &str,
        field: impl ToRedisArgs,
        value: impl ToRedisArgs,
    ) -> &mut Self {
        self.cmd("HSET", &[key], (field, value))
    }

    /// `DEL key`.
    pub fn del(&mut self, key: &str) -> &mut Self {
        self.cmd("DEL", &[key], Vec::<Vec<u8>>::new())
    }

    /// `PEXPIRE key ms`.
    pub fn pexpire(&mut self, key: &str, ms: u64) -> &mut Self {
        self.cmd("PEXPIRE", &[key], ms)
    }

    pub(crate) fn commands(&self) -> &[Command] {
        &self.commands
    }
}

// ---- Redis scripts ------------------------------------------------------------

crate::protocol::script::scripts! {
    FENCED_WRITE => "fenced/fenced_write.lua",
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
