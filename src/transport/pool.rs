//! The connections of one node of a topology whose nodes come and go (a cluster's
//! masters, the master the sentinels name): an idle stack behind the same [`Turns`] as a
//! single server's pool, which also cap how many connections the node gets.
//!
//! A single server uses r2d2, whose `get` waits up to the connection timeout while it
//! retries a failed connect in the background. For a master that just died that is the
//! wrong answer: its replica is promoted within seconds, and the caller should learn at
//! once that the node is gone, so that it can read the topology again and go there. So
//! here a checkout with a turn in hand either pops an idle connection or connects right
//! away, and a refused connection is an immediate error (which says the command was
//! never sent).
//!
//! # The cap
//!
//! A checkout first takes one of the node's `size` turns (`turns.rs`: the longest
//! waiting thread first, a woken waiter's retry before every first attempt), and keeps
//! it until the connection is given back or closed ([`Leased`]). A connection is only
//! opened by a turn's holder that found the idle stack empty, and goes onto the stack
//! only as its turn is handed on, so the node's open pooled connections (checked out,
//! being opened, idle) never outnumber its turns:
//!
//! - a holder that pops the stack changes nothing in the count;
//! - a holder that finds it empty holds one of the turns and counts no connection yet, so
//!   the others are at most `size - 1`, and its own makes at most `size`;
//! - giving one back moves it from checked out to idle.
//!
//! Connections opened outside the turns (a check of the node's role, the first
//! connection of a client) are kept only while that count leaves room
//! ([`Elastic::give`]). A background thread's own connections (the watchdog's, the
//! cluster's map reads) and the subscriber's are not the pool's and are not counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::{RedisError, RedisResult};

use super::connector::Connector;
use super::turns::{Patience, Turn, Turns};
use crate::error::Error;

/// An idle connection older than this is checked with `PING` before a command is
/// trusted to it: a connection that died while idle must fail on the `PING`, not on a
/// script whose reply would then be lost (see [`Elastic::take`]).
const STALE_AFTER: Duration = Duration::from_secs(1);

/// One node's connections.
pub(crate) struct Elastic {
    connector: Connector,
    idle: Mutex<Vec<(redis::Connection, Instant)>>,
    /// One per connection the node may have open (see the module docs).
    turns: Arc<Turns>,
    size: u32,
    /// The node no longer serves slots (or failed): connections given back are closed.
    condemned: AtomicBool,
}

impl std::fmt::Debug for Elastic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Elastic")
            .field("addr", &self.connector.addr())
            .field("size", &self.size)
            .field("idle", &self.idle.lock().len())
            .field("condemned", &self.condemned.load(Ordering::Relaxed))
            .finish()
    }
}

/// A connection to a node, with the turn it was taken in (none for one opened outside
/// the pool). Dropped, it closes the connection and hands the turn on; given back
/// ([`Elastic::give`]), the connection waits on the idle stack.
pub(crate) struct Leased {
    // Fields drop in order: the connection is closed before its turn lets another
    // connection be opened.
    conn: redis::Connection,
    turn: Option<Turn>,
}

impl std::fmt::Debug for Leased {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leased")
            .field("pooled", &self.turn.is_some())
            .finish_non_exhaustive()
    }
}

/// A connection opened outside the pool: it holds no turn.
impl From<redis::Connection> for Leased {
    fn from(conn: redis::Connection) -> Self {
        Self { conn, turn: None }
    }
}

/// A command can be sent on it as on the connection itself: redis-rs makes everything
/// that derefs to a connection `ConnectionLike`.
impl std::ops::Deref for Leased {
    type Target = redis::Connection;

    fn deref(&self) -> &redis::Connection {
        &self.conn
    }
}

impl std::ops::DerefMut for Leased {
    fn deref_mut(&mut self) -> &mut redis::Connection {
        &mut self.conn
    }
}

/// Why a checkout got no connection. Either way nothing was sent.
#[derive(Debug)]
pub(crate) enum NotTaken {
    /// No turn came within the wait: [`Error::PoolTimeout`]. The node may be fine, only
    /// busy.
    Timeout(Error),
    /// Connecting failed: the node is down, unreachable or refused the login.
    Connect(RedisError),
}

impl From<NotTaken> for Error {
    fn from(not: NotTaken) -> Self {
        match not {
            NotTaken::Timeout(e) => e,
            NotTaken::Connect(e) => e.into(),
        }
    }
}

impl Elastic {
    /// At most `size` pooled connections through `connector`. A checkout without a
    /// deadline waits while the queue moves, giving up after the connector's connection
    /// timeout without one (as a single server's pool does).
    pub(crate) fn new(connector: Connector, size: usize) -> Self {
        let size = u32::try_from(size).unwrap_or(u32::MAX);
        Self {
            connector,
            idle: Mutex::new(Vec::new()),
            turns: Turns::new(size),
            size,
            condemned: AtomicBool::new(false),
        }
    }

    pub(crate) fn connector(&self) -> &Connector {
        &self.connector
    }

    /// A connection for one command, in the calling thread's lane (see `turns.rs`),
    /// waiting for a turn as long as other threads keep getting connections: the most
    /// recently used idle one (LIFO keeps the fresh ones busy and lets the rest go stale
    /// and be dropped), or a new one.
    ///
    /// A connection idle for longer than [`STALE_AFTER`] is first checked with `PING`.
    /// Commands sent on a connection that then fails are never sent again (their reply
    /// may be the part that was lost), so a dead idle connection has to be found before
    /// a command is entrusted to it. Connections in steady use skip the check.
    ///
    /// # Errors
    ///
    /// [`NotTaken::Timeout`] when no thread got a connection to this node for a whole
    /// connection timeout; [`NotTaken::Connect`] with the connect error.
    pub(crate) fn take(&self) -> Result<Leased, NotTaken> {
        let asked = Instant::now();
        let patience = Patience::WhileMoving(self.connector.connect_timeout());
        self.take_with(patience, asked)
    }

    /// [`take`](Self::take) waiting at most `wait` for a turn (and never longer than the
    /// connection timeout).
    pub(crate) fn take_within(&self, wait: Duration) -> Result<Leased, NotTaken> {
        let asked = Instant::now();
        let wait = wait
            .min(self.connector.connect_timeout())
            .max(Duration::from_millis(1));
        self.take_with(Patience::Until(asked + wait), asked)
    }

    fn take_with(&self, patience: Patience, asked: Instant) -> Result<Leased, NotTaken> {
        let Some(mut turn) = self.turns.take(patience) else {
            return Err(NotTaken::Timeout(Error::PoolTimeout {
                address: self.connector.addr().to_owned(),
                pool_size: self.size,
                waited: asked.elapsed(),
                connect_error: None,
            }));
        };
        // A failed connect drops the turn unserved: the queue behind it does not count
        // that as moving (see `Turn`).
        let conn = match self.pop_idle() {
            Some(conn) => conn,
            None => self.connector.connect().map_err(NotTaken::Connect)?,
        };
        turn.served();
        Ok(Leased {
            conn,
            turn: Some(turn),
        })
    }

    /// An idle connection checked as [`take`](Self::take) does, or `None` when there is
    /// no free turn or no live idle connection; never waits, never connects.
    pub(crate) fn take_idle(&self) -> Option<Leased> {
        let mut turn = self.turns.try_take()?;
        let conn = self.pop_idle()?;
        turn.served();
        Some(Leased {
            conn,
            turn: Some(turn),
        })
    }

    /// The most recent live idle connection, for a thread that holds a turn.
    fn pop_idle(&self) -> Option<redis::Connection> {
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

    /// Gives a connection back after a command that got its reply. One taken from this
    /// pool waits on the idle stack, and its turn goes to the next thread; one opened
    /// outside it (a plain `redis::Connection`) is kept only if the node's connections
    /// stay within the cap, else closed.
    pub(crate) fn give(&self, conn: impl Into<Leased>) {
        let Leased { conn, turn } = conn.into();
        {
            // Read under the idle lock, so that a condemn that empties the stack after it
            // cannot be followed by this push of a connection to the condemned node.
            let mut idle = self.idle.lock();
            // A connection without a turn adds one to the count of the module docs. The
            // count is at most the idle ones plus the turns held now; a turn taken after
            // this read pops the stack under this lock, after the push, so it finds a
            // connection there rather than opening one.
            let room =
                turn.is_some() || idle.len() + (self.turns.in_use() as usize) < self.size as usize;
            if room
                && !self.condemned.load(Ordering::Acquire)
                && redis::ConnectionLike::is_open(&conn)
                && idle.len() < self.size as usize
            {
                idle.push((conn, Instant::now()));
            }
        }
        // After the push: the next turn's holder finds the connection idle instead of
        // opening another.
        drop(turn);
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

/// The pools' side of one routed command, which may take connections from several nodes
/// in turn (redirects, failovers): keeps the pool timeout that ended it, which the
/// routing code's `RedisResult` cannot carry.
#[derive(Debug, Default)]
pub(crate) struct Pooled {
    timeout: Option<Error>,
}

impl Pooled {
    /// A connection of `pool` (see [`Elastic::take`]). A pool timeout is kept for
    /// [`error`](Self::error); the `RedisError` returned for it only says so.
    pub(crate) fn take_from(&mut self, pool: &Elastic) -> RedisResult<Leased> {
        pool.take().map_err(|not| match not {
            NotTaken::Connect(e) => e,
            NotTaken::Timeout(e) => {
                let shown = RedisError::from((
                    redis::ErrorKind::Client,
                    "no pooled connection",
                    e.to_string(),
                ));
                self.timeout = Some(e);
                shown
            }
        })
    }

    /// Whether the last checkout ran out of patience: the routing code gives up at once,
    /// since the node is busy, not gone, and the caller was made to wait already.
    pub(crate) fn timed_out(&self) -> bool {
        self.timeout.is_some()
    }

    /// The caller's error for the routed command that failed with `err`: the pool
    /// timeout that ended it, else `err` classified for the object `key` names.
    pub(crate) fn error(self, key: &str, err: RedisError) -> Error {
        self.timeout.unwrap_or_else(|| Error::from_redis(key, err))
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;
    use crate::config::Config;
    use crate::transport::connector::Endpoint;

    /// A pool of one connection to a listener that accepts connections (nothing is
    /// sent on them: a connector without a name, password or database sends no setup
    /// command), and the listener.
    fn pool_of_one() -> (Elastic, TcpListener) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("redis://{}", listener.local_addr().unwrap());
        let config = Config::builder().build();
        let endpoint = Endpoint::parse(&url, &config).unwrap();
        let connector =
            Connector::to(&endpoint, Duration::from_secs(2), Duration::from_secs(2)).unwrap();
        (Elastic::new(connector, 1), listener)
    }

    #[test]
    fn a_checkout_past_its_wait_is_a_pool_timeout_and_the_cap_holds() {
        let (pool, listener) = pool_of_one();
        let held = pool.take().unwrap();
        let Err(NotTaken::Timeout(err)) = pool.take_within(Duration::from_millis(20)) else {
            panic!("a second connection within a cap of one");
        };
        let Error::PoolTimeout {
            address,
            pool_size,
            waited,
            connect_error,
        } = &err
        else {
            panic!("{err}");
        };
        assert_eq!(*address, listener.local_addr().unwrap().to_string());
        assert_eq!(*pool_size, 1);
        assert!(*waited >= Duration::from_millis(20), "{err}");
        assert!(connect_error.is_none());
        assert!(pool.take_idle().is_none());
        // A connection opened outside the pool is not kept while the cap is used up.
        pool.give(pool.connector().connect().unwrap());
        assert!(pool.idle.lock().is_empty());
        // Given back, the pooled one is idle and its turn free: the next checkout
        // takes that connection, and one from outside finds no room beside it.
        pool.give(held);
        assert_eq!(pool.idle.lock().len(), 1);
        pool.give(pool.connector().connect().unwrap());
        assert_eq!(pool.idle.lock().len(), 1);
        let again = pool.take_idle().unwrap();
        assert!(pool.take_idle().is_none());
        drop(again);
        // Closed, not given back: its turn is free again, and a connection from outside
        // may take its place.
        assert!(pool.idle.lock().is_empty());
        pool.give(pool.connector().connect().unwrap());
        assert_eq!(pool.idle.lock().len(), 1);
    }
}
