//! A named object of one client (Redisson's `RedissonObject`): the semaphores and the
//! latch are a key and a channel on the client's core.

use std::sync::Arc;

use crate::core::Core;
use crate::error::{Error, Result};

/// A permit count a Redisson client can read: its semaphores keep counts in a Java
/// `int`, and a larger one reaches it wrapped (its waiters throw and stay blocked).
/// Counts Redis computes (a release, an addition) are checked by the scripts instead.
pub(crate) fn java_int(permits: u32) -> Result<u64> {
    if permits > i32::MAX.unsigned_abs() {
        return Err(Error::Config(format!(
            "{permits} permits: Redisson keeps permit counts in a Java int (at most {})",
            i32::MAX
        )));
    }
    Ok(u64::from(permits))
}

/// A failure that says the key of `name` holds something else than a count (the string
/// of a semaphore or latch): [`Error::WrongType`], as a lock on a key of another type
/// gets. Redis says so in several ways: `WRONGTYPE` for a hash or list, "not an integer"
/// from `INCRBY`/`DECR` on a word, a Lua comparison with the `nil` that `tonumber` made
/// of it, or a reply that does not parse as a number.
pub(crate) fn not_a_count(name: &str, err: Error) -> Error {
    let Error::Redis(source) = err else {
        return err;
    };
    let text = source.to_string();
    let not_a_count = matches!(
        source.kind(),
        redis::ErrorKind::UnexpectedReturnType | redis::ErrorKind::Parse
    ) || text.contains("not an integer")
        || (text.contains("attempt to compare") && text.contains("nil"))
        || text.contains("attempt to perform arithmetic on a nil value");
    if not_a_count {
        Error::WrongType {
            name: name.to_owned(),
            source,
        }
    } else {
        Error::Redis(source)
    }
}

/// The client core, the object's key and the channel its waiters listen on.
pub(crate) struct Object {
    core: Arc<Core>,
    name: String,
    channel: String,
}

impl Object {
    pub(crate) fn new(core: Arc<Core>, name: String, channel: String) -> Self {
        Self {
            core,
            name,
            channel,
        }
    }

    pub(crate) fn core(&self) -> &Core {
        &self.core
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn channel(&self) -> &str {
        &self.channel
    }

    /// Runs `f` on the object's node with its key, its channel and the publish command.
    /// Never sent twice (see [`Core::run_once`]): a semaphore's acquire or release, a
    /// latch's count-down, run again after a lost reply, would take or add permits twice.
    pub(crate) fn run<T>(
        &self,
        mut f: impl FnMut(&mut redis::Connection, &str, &str, &str) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let publish = self.core.publish_command();
        self.core
            .run_once(&self.name, |c| f(c, &self.name, &self.channel, publish))
            .map_err(|e| not_a_count(&self.name, e))
    }

    /// The count kept in the object's key (`GET`, a missing key is 0).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the key holds something else than a count.
    pub(crate) fn count(&self) -> Result<i64> {
        self.core
            .get_count(&self.name)
            .map_err(|e| not_a_count(&self.name, e))
    }

    /// `Debug` output for the public type `type_name`: its name and its client.
    pub(crate) fn debug(
        &self,
        type_name: &str,
        f: &mut std::fmt::Formatter<'_>,
    ) -> std::fmt::Result {
        f.debug_struct(type_name)
            .field("name", &self.name)
            .field("client", &self.core.id())
            .finish()
    }
}
