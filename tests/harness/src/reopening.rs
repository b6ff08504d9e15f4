//! A raw connection for a test's own reads across a failover.
//!
//! A promotion or demotion ends with the sentinels' `CLIENT KILL TYPE normal` on the
//! node they reconfigure, and a killed node takes its clients with it, so a connection
//! the test opened around a failover can read EOF on its next command. That says
//! nothing about what the test checks: [`Reopening`] opens a new connection from its
//! `open` function and sends the command again. It implements
//! [`redis::ConnectionLike`], so the helpers in `raw.rs` take it where they take a
//! plain connection.
//!
//! Reads only: a write whose reply was lost may have been applied, and sending it again
//! would hide exactly the double execution a test might be looking for.

use std::time::{Duration, Instant};

use redis::{ConnectionLike, RedisResult, Value};

/// How long a command is tried again on new connections before its error is returned.
const REOPEN_LIMIT: Duration = Duration::from_secs(10);

/// A connection that reopens itself after a dropped connection (see the module docs).
pub struct Reopening<F: FnMut() -> redis::Connection> {
    open: F,
    conn: redis::Connection,
}

impl<F: FnMut() -> redis::Connection> std::fmt::Debug for Reopening<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reopening").finish_non_exhaustive()
    }
}

impl<F: FnMut() -> redis::Connection> Reopening<F> {
    /// A connection from `open`, which is called again for each new connection (e.g.
    /// `|| set.master().conn()`, which follows the master).
    pub fn new(mut open: F) -> Self {
        let conn = open();
        Self { open, conn }
    }

    /// Runs `send` on the connection; on an error that means the connection is gone,
    /// opens a new one and runs it again, within [`REOPEN_LIMIT`].
    fn retry<T>(
        &mut self,
        mut send: impl FnMut(&mut redis::Connection) -> RedisResult<T>,
    ) -> RedisResult<T> {
        let end = Instant::now() + REOPEN_LIMIT;
        loop {
            match send(&mut self.conn) {
                Err(e) if e.is_connection_dropped() && Instant::now() < end => {
                    // Not a poll for an event: the node that closed the connection gives
                    // no signal when it accepts again, so back off a little.
                    std::thread::sleep(Duration::from_millis(20));
                    self.conn = (self.open)();
                }
                other => return other,
            }
        }
    }
}

impl<F: FnMut() -> redis::Connection> ConnectionLike for Reopening<F> {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        self.retry(|c| c.req_packed_command(cmd))
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        self.retry(|c| c.req_packed_commands(cmd, offset, count))
    }

    fn get_db(&self) -> i64 {
        self.conn.get_db()
    }

    fn check_connection(&mut self) -> bool {
        if self.conn.check_connection() {
            return true;
        }
        self.conn = (self.open)();
        self.conn.check_connection()
    }

    fn is_open(&self) -> bool {
        self.conn.is_open()
    }
}
