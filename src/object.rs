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
