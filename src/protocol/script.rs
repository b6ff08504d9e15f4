//! How a Lua script of `lua/` is declared, sent and packed; the scripts themselves and
//! their typed calls live with the kind whose protocol they are (`lock/fair.rs` holds the
//! fair lock's, `sync/semaphore.rs` the semaphore's, `protocol/hash.rs` those every
//! hash-kept lock shares, `watchdog/renew.rs` the renewals).
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

use redis::{Connection, RedisResult, Script};

/// Declares, in the module that invokes it, one `LazyLock<Script>` per named file of
/// `lua/`, each prefixed with the `lua/lib/` files it names, and `all_scripts()`, the
/// list of them for the crate's contract test. Paths are from the crate root, so a kind
/// may declare its scripts wherever its code lives.
macro_rules! scripts {
    ($($name:ident => $file:literal $(after [$($lib:literal),+])?,)*) => {
        $(static $name: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
            redis::Script::new(concat!(
                $($(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/lib/", $lib)),)+)?
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $file))
            ))
        });)*

        /// Every script of this module: its own file's text, the `lua/lib/` files before
        /// it, and the script sent to Redis.
        #[cfg(test)]
        pub(crate) fn all_scripts(
        ) -> Vec<(&'static str, &'static [&'static str], &'static redis::Script)> {
            vec![$((
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $file)),
                &[$($($lib),+)?],
                &*$name,
            ),)*]
        }
    };
}
pub(crate) use scripts;

/// The per-node scripts with their `#!lua flags=allow-cross-slot-keys` line turned into
/// a comment, for a cluster of servers before 7.0, which know no script flags (they fail
/// to compile the line) and need none: they never check which keys a script touches.
pub(crate) fn unflagged(text: &str) -> Script {
    Script::new(&format!("--{text}"))
}

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
pub(crate) fn invoke_per_node<T: redis::FromRedisValue>(
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
pub(crate) fn invoke<T: redis::FromRedisValue>(
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
    pub(crate) fn new(script: &'static Script, keys: &[&[u8]], args: &[&[u8]]) -> Self {
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
