//! The connections of one node of a topology whose nodes come and go (a cluster's
//! masters): an idle stack that never makes a caller wait for a dead node.
//!
//! A single server uses r2d2, whose `get` waits up to the connection timeout while it
//! retries a failed connect in the background. For a master that just died that is the
//! wrong answer: its replica is promoted within seconds, and the caller should learn at
//! once that the node is gone, so that it can read the slot map again and go there. So
//! here a checkout either pops an idle connection or connects right away, and a refused
//! connection is an immediate error (which says the command was never sent).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::connector::Connector;

/// An idle connection older than this is checked with `PING` before a command is
/// trusted to it: a connection that died while idle must fail on the `PING`, not on a
/// script whose reply would then be lost (see [`Elastic::take`]).
const STALE_AFTER: Duration = Duration::from_secs(1);

/// One node's connections.
pub(crate) struct Elastic {
    connector: Connector,
    idle: Mutex<Vec<(redis::Connection, Instant)>>,
    max_idle: usize,
    /// The node no longer serves slots (or failed): connections given back are closed.
    condemned: AtomicBool,
}

impl std::fmt::Debug for Elastic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Elastic")
            .field("addr", &self.connector.addr())
            .field("idle", &self.idle.lock().len())
            .field("condemned", &self.condemned.load(Ordering::Relaxed))
            .finish()
    }
}

impl Elastic {
    pub(crate) fn new(connector: Connector, max_idle: usize) -> Self {
        Self {
            connector,
            idle: Mutex::new(Vec::new()),
            max_idle,
            condemned: AtomicBool::new(false),
        }
    }

    pub(crate) fn connector(&self) -> &Connector {
        &self.connector
    }

    /// A connection for one command: the most recently used idle one (LIFO keeps the
    /// fresh ones busy and lets the rest go stale and be dropped), or a new one.
    ///
    /// A connection idle for longer than [`STALE_AFTER`] is first checked with `PING`.
    /// Commands sent on a connection that then fails are never sent again (their reply
    /// may be the part that was lost), so a dead idle connection has to be found before
    /// a command is entrusted to it. Connections in steady use skip the check.
    ///
    /// # Errors
    ///
    /// The connect error: nothing was sent.
    pub(crate) fn take(&self) -> redis::RedisResult<redis::Connection> {
        match self.take_idle() {
            Some(conn) => Ok(conn),
            None => self.connector.connect(),
        }
    }

    /// An idle connection checked as [`take`](Self::take) does, or `None` when there is
    /// no live one; never connects.
    pub(crate) fn take_idle(&self) -> Option<redis::Connection> {
        loop {
            let popped = self.idle.lock().pop();
            let Some((mut conn, since)) = popped else {
                break;
            };
            if !redis::ConnectionLike::is_open(&conn) {
                continue;
            }
            if since.elapsed() < STALE_AFTER || redis::cmd("PING").query::<()>(&mut conn).is_ok() {
                return Some(conn);
            }
        }
        None
    }

    /// Gives a connection back after a command that got its reply.
    pub(crate) fn give(&self, conn: redis::Connection) {
        // Read under the idle lock, so that a condemn that empties the stack after it
        // cannot be followed by this push of a connection to the condemned node.
        let mut idle = self.idle.lock();
        if !self.condemned.load(Ordering::Acquire)
            && redis::ConnectionLike::is_open(&conn)
            && idle.len() < self.max_idle
        {
            idle.push((conn, Instant::now()));
        }
    }

    /// Closes the idle connections: the node failed, so they are likely dead too, and a
    /// command sent on one would fail after it was sent.
    pub(crate) fn drop_idle(&self) {
        self.idle.lock().clear();
    }

    /// Closes every idle connection and every one given back from now on (the node is
    /// not a master any more), until [`reprieve`](Self::reprieve).
    pub(crate) fn condemn(&self) {
        let mut idle = self.idle.lock();
        self.condemned.store(true, Ordering::Release);
        idle.clear();
    }

    /// The node serves slots again (a restarted node promoted back).
    pub(crate) fn reprieve(&self) {
        self.condemned.store(false, Ordering::Release);
    }
}
