//! A connection driven by hand: a request written now and its reply read later, so that
//! a caller (the quorum engine) can have requests in flight on several nodes at once.

use std::sync::Arc;
use std::time::Duration;

use redis::{RedisResult, Value};

use super::connector::Pooled;
use super::pool::Leased;
use crate::error::is_connection_error;

/// A node whose connections come back to it after a checkout (a cluster master, a
/// sentinel-mode master).
pub(super) trait GiveBack: Send + Sync {
    /// Takes back a connection whose reply stream is in step.
    fn give(&self, conn: Leased);
}

/// A connection checked out of a node's connections, given back when dropped unless it
/// was condemned.
///
/// A connection whose reply stream may be out of step (an I/O error, a timeout) is
/// condemned: it is closed instead of being handed out again, as
/// [`Transport::run`](super::Transport::run) does for its own connections.
pub(crate) struct Checkout {
    held: Held,
    response_timeout: Duration,
}

/// Where the connection came from, and so where it goes back.
enum Held {
    /// A single server's r2d2 pool (which closes it if marked broken).
    Pooled(Pooled),
    /// A master's connections; a broken one is closed on drop (which hands its turn
    /// on).
    Node {
        conn: Option<Leased>,
        node: Arc<dyn GiveBack>,
        broken: bool,
    },
}

impl std::fmt::Debug for Checkout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let broken = match &self.held {
            Held::Pooled(p) => p.broken,
            Held::Node { broken, .. } => *broken,
        };
        f.debug_struct("Checkout")
            .field("broken", &broken)
            .finish_non_exhaustive()
    }
}

impl Checkout {
    /// A connection of a single server's pool.
    pub(super) fn pooled(pooled: Pooled, response_timeout: Duration) -> Self {
        Self {
            held: Held::Pooled(pooled),
            response_timeout,
        }
    }

    /// A connection of `node` (a cluster or sentinel-mode master).
    pub(super) fn of_node(
        conn: Leased,
        node: Arc<dyn GiveBack>,
        response_timeout: Duration,
    ) -> Self {
        Self {
            held: Held::Node {
                conn: Some(conn),
                node,
                broken: false,
            },
            response_timeout,
        }
    }

    /// The connection itself, for a follow-up command in the usual request-reply way.
    pub(crate) fn conn(&mut self) -> RedisResult<&mut redis::Connection> {
        match &mut self.held {
            Held::Pooled(p) => Ok(&mut p.conn),
            // Only `Drop` takes the connection out, so this is always `Some`.
            Held::Node { conn, .. } => conn.as_deref_mut().ok_or_else(|| {
                redis::RedisError::from((redis::ErrorKind::Client, "connection given back"))
            }),
        }
    }

    /// Writes one packed command without reading its reply.
    pub(crate) fn send(&mut self, packed: &[u8]) -> RedisResult<()> {
        let sent = self.conn()?.send_packed_command(packed);
        if sent.as_ref().is_err_and(is_connection_error) {
            self.condemn();
        }
        sent
    }

    /// Reads the reply of the command sent last, waiting at most `within` (never longer
    /// than the client's response timeout). An error reply is returned as `Err`.
    pub(crate) fn recv(&mut self, within: Option<Duration>) -> RedisResult<Value> {
        let response_timeout = self.response_timeout;
        // Only a budget shorter than the connection's own timeout needs a change of the
        // socket's timeout (two system calls); the usual path leaves it alone.
        let shorter = within.filter(|w| *w < response_timeout);
        if let Some(w) = shorter {
            // A zero timeout means "block forever" to the socket, so at least 1 ms.
            let w = w.max(Duration::from_millis(1));
            if let Err(e) = self.conn()?.set_read_timeout(Some(w)) {
                self.condemn();
                return Err(e);
            }
        }
        let reply = self.conn()?.recv_response().and_then(Value::extract_error);
        if reply.as_ref().is_err_and(is_connection_error) {
            // A late reply would be read as the answer to the next command.
            self.condemn();
        } else if shorter.is_some()
            && self
                .conn()
                .and_then(|c| c.set_read_timeout(Some(response_timeout)))
                .is_err()
        {
            self.condemn();
        }
        reply
    }

    /// Marks the connection as out of step: it is closed, never reused.
    pub(crate) fn condemn(&mut self) {
        match &mut self.held {
            Held::Pooled(p) => p.broken = true,
            Held::Node { broken, .. } => *broken = true,
        }
    }
}

impl Drop for Checkout {
    fn drop(&mut self) {
        if let Held::Node { conn, node, broken } = &mut self.held
            && !*broken
            && let Some(conn) = conn.take()
        {
            node.give(conn);
        }
    }
}
