//! The writes of one fenced write ([`LockGuard::fenced`](super::LockGuard::fenced)).

use redis::ToRedisArgs;

use crate::protocol::scripts::Command;

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
