//! The base of the topologies whose nodes come and go (a Redis Cluster's masters, the
//! master the sentinels name): each node's connections, the registry of nodes by
//! address, the refresher thread that keeps the topology current, and the rules that
//! decide whether a routed command may be sent again. [`cluster`](super::cluster) and
//! [`sentinel`](super::sentinel) add only how they find their nodes and read a refusal
//! (Redisson's cluster and sentinel connection managers extend one master/replica
//! manager the same way).
//!
//! # Never twice
//!
//! A command goes out on a plain connection to the node the topology names. Whether it
//! may be sent again depends on what came back, and two answers are the same for every
//! topology, so they are decided here, once:
//!
//! | what happened                                | ran?  | then                                   |
//! |----------------------------------------------|-------|----------------------------------------|
//! | no connection (refused, timed out connecting) | no   | the node is suspect; back off, send again ([`Taken::Failed`]) |
//! | every pooled connection stayed busy          | no    | back to the caller at once ([`Taken::Busy`]) |
//! | I/O error or timeout after sending           | maybe | **never sent again** ([`Sent::Lost`])  |
//! | an error reply                               | no, if the topology says so | the topology decides ([`Sent::Refused`]) |
//!
//! Back-offs ([`Resend`]) start at 10 ms, double, and stop at the client's retry budget
//! (`retry_attempts × retry_max_delay`) or when the client stops.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded};
use parking_lot::Mutex;
use redis::{RedisError, RedisResult};

use super::checkout::{Checkout, GiveBack};
use super::connector::{Connector, Endpoint};
use super::pool::{Elastic, Leased, NotTaken, Pooled};
use crate::config::Config;
use crate::error::{Error, Result, is_connection_error};

/// First back-off after a "did not run, try again" answer.
const FIRST_PAUSE: Duration = Duration::from_millis(10);
/// Longest single back-off.
const MAX_PAUSE: Duration = Duration::from_millis(500);

/// One data node (a cluster master, the sentinels' master, or a node asked for the
/// topology): its pooled connections, and how to open subscriber connections to it.
#[derive(Debug)]
pub(crate) struct Node {
    pub(super) pool: Elastic,
    /// The same node in RESP3, for subscriber connections.
    pubsub: Connector,
}

impl Node {
    /// A node reached through `connector`, with at most `pool_size` pooled connections.
    pub(super) fn new(connector: Connector, pool_size: usize) -> Result<Self> {
        Ok(Self {
            pubsub: connector.resp3()?,
            pool: Elastic::new(connector, pool_size),
        })
    }

    pub(crate) fn addr(&self) -> &str {
        self.pool.connector().addr()
    }

    pub(crate) fn pubsub_connector(&self) -> &Connector {
        &self.pubsub
    }

    /// A best-effort `PUBLISH` on a pooled connection, for the listener's control
    /// channel. A failed one drops its connection.
    pub(super) fn publish(&self, channel: &str, message: &str) -> Result<()> {
        let mut conn = self.pool.take()?;
        redis::cmd("PUBLISH")
            .arg(channel)
            .arg(message)
            .query::<i64>(&mut conn)?;
        self.pool.give(conn);
        Ok(())
    }
}

impl GiveBack for Node {
    fn give(&self, conn: Leased) {
        self.pool.give(conn);
    }
}

/// What every multi-node topology's shared state holds: its nodes by address (each
/// created on first use with the same TLS mode, login and timeouts), the kick and stop
/// flag of its refresher thread, and the retry budget of its routed commands.
#[derive(Debug)]
pub(crate) struct Nodes {
    /// The TLS mode, root certificate, login and database of every node.
    template: Endpoint,
    connect_timeout: Duration,
    response_timeout: Duration,
    /// The most pooled connections per node ([`Config::pool_max_size`]).
    pool_size: usize,
    /// The `CLIENT SETNAME` of every connection.
    name: String,
    by_addr: Mutex<HashMap<String, Arc<Node>>>,
    kick: Sender<()>,
    stop: AtomicBool,
    /// How long a command that did not run is sent again.
    budget: Duration,
}

impl Nodes {
    /// The nodes reached like `template`, with `config`'s timeouts, pool size and
    /// retry budget, every connection named `name`; and the receiving end of the kicks,
    /// for the refresher thread.
    pub(super) fn new(template: Endpoint, config: &Config, name: &str) -> (Self, Receiver<()>) {
        let (kick, kicked) = bounded(1);
        let nodes = Self {
            template,
            connect_timeout: config.connection_timeout,
            response_timeout: config.response_timeout,
            pool_size: config.pool_max_size as usize,
            name: name.to_owned(),
            by_addr: Mutex::new(HashMap::new()),
            kick,
            stop: AtomicBool::new(false),
            budget: config.retry_max_delay.saturating_mul(config.retry_attempts),
        };
        (nodes, kicked)
    }

    /// The node at `addr`, created on first use.
    pub(super) fn node(&self, addr: &str) -> Result<Arc<Node>> {
        let mut by_addr = self.by_addr.lock();
        if let Some(node) = by_addr.get(addr) {
            return Ok(Arc::clone(node));
        }
        let endpoint = self.template.at(addr)?;
        let connector = Connector::to(&endpoint, self.connect_timeout, self.response_timeout)?
            .named(&self.name);
        let node = Arc::new(Node::new(connector, self.pool_size)?);
        by_addr.insert(addr.to_owned(), Arc::clone(&node));
        Ok(node)
    }

    /// Calls `f` with every node known so far, under the registry's lock.
    pub(super) fn each(&self, mut f: impl FnMut(&str, &Node)) {
        for (addr, node) in self.by_addr.lock().iter() {
            f(addr, node);
        }
    }

    pub(super) fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    pub(super) fn response_timeout(&self) -> Duration {
        self.response_timeout
    }

    /// The `CLIENT SETNAME` of every connection.
    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// How long a command that did not run is sent again.
    pub(super) fn budget(&self) -> Duration {
        self.budget
    }

    /// Asks the refresher thread to read the topology now.
    pub(super) fn kick(&self) {
        let _ = self.kick.try_send(());
    }

    /// Whether the client stops: no more back-offs, and the refresher thread ends.
    pub(super) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// A node failed (refused a connection, or a connection to it broke): its idle
    /// connections are likely dead too, and the topology may be about to change.
    pub(super) fn node_failed(&self, addr: &str) {
        if let Some(node) = self.by_addr.lock().get(addr) {
            node.pool.drop_idle();
        }
        self.kick();
    }

    /// A connection to `node` from `source` for one send (see the module docs).
    pub(super) fn take(&self, source: &mut dyn Source, node: &Node) -> Taken {
        match source.take(node) {
            Ok(conn) => Taken::Conn(conn),
            // Every pooled connection to the node stayed busy: nothing was sent, and
            // the node is not known to have failed.
            Err(e) if source.timed_out() => Taken::Busy(e),
            Err(e) => {
                // Not even connected: nothing was sent.
                self.node_failed(node.addr());
                Taken::Failed(e)
            }
        }
    }

    /// Sends `f` on `conn`, a connection to `node` from `source` (see the module docs).
    pub(super) fn send<T>(
        &self,
        source: &mut dyn Source,
        node: &Node,
        mut conn: Leased,
        f: impl FnOnce(&mut redis::Connection) -> RedisResult<T>,
    ) -> Sent<T> {
        match f(&mut conn) {
            Ok(value) => {
                source.give(node, conn);
                Sent::Done(value)
            }
            Err(e) if is_connection_error(&e) => {
                // The command may have run and its reply be what went missing: it is
                // never sent again. The node's other idle connections are suspect.
                self.node_failed(node.addr());
                Sent::Lost(e)
            }
            // An error reply leaves the connection's reply stream in step.
            Err(e) => Sent::Refused(e, conn),
        }
    }
}

/// What [`Nodes::take`] found.
pub(super) enum Taken {
    /// A connection to send on.
    Conn(Leased),
    /// No pooled connection came free in time: nothing was sent, and the command goes
    /// back to its caller as it is.
    Busy(RedisError),
    /// No connection could be opened: nothing was sent, the node is marked failed, and
    /// the command may be sent again after a back-off.
    Failed(RedisError),
}

/// What [`Nodes::send`] found.
pub(super) enum Sent<T> {
    /// The reply; the connection went back to its source.
    Done(T),
    /// The connection failed after sending: the command may have run, so it is never
    /// sent again. The connection is closed and the node marked failed.
    Lost(RedisError),
    /// An error reply, with the connection (still in step): the topology reads the
    /// error, decides whether the command ran, and gives the connection back or not.
    Refused(RedisError, Leased),
}

/// The back-offs of one routed command that did not run.
#[derive(Debug)]
pub(super) struct Resend {
    started: Instant,
    budget: Duration,
    pauses: u32,
}

impl Resend {
    /// Back-offs for at most `budget` from now (none for a zero budget).
    pub(super) fn within(budget: Duration) -> Self {
        Self {
            started: Instant::now(),
            budget,
            pauses: 0,
        }
    }

    /// Sleeps before sending a command again that did not run, or gives up with `err`
    /// when the budget is spent (or the client stops).
    pub(super) fn pause_or<E>(&mut self, nodes: &Nodes, err: E) -> std::result::Result<(), E> {
        if self.pause(nodes) { Ok(()) } else { Err(err) }
    }

    /// Sleeps before sending a command again that did not run; false when the budget
    /// is spent (or the client stops).
    pub(super) fn pause(&mut self, nodes: &Nodes) -> bool {
        let pause = FIRST_PAUSE
            .saturating_mul(1 << self.pauses.min(16))
            .min(MAX_PAUSE);
        if nodes.stopped() || self.started.elapsed() + pause > self.budget {
            return false;
        }
        std::thread::sleep(pause);
        self.pauses += 1;
        true
    }
}

/// Where a routed command takes its connection from: the node's pool, or a
/// background thread's own connections.
pub(crate) trait Source {
    /// A connection to `node`; an error means nothing was sent.
    fn take(&mut self, node: &Node) -> RedisResult<Leased>;
    /// Gives back a connection whose reply stream is in step.
    fn give(&mut self, node: &Node, conn: Leased);
    /// Whether the last [`take`](Self::take) failed for want of a free pooled
    /// connection rather than of the node: the command goes back to its caller as it is.
    fn timed_out(&self) -> bool {
        false
    }
}

/// The nodes' pools.
impl Source for Pooled {
    fn take(&mut self, node: &Node) -> RedisResult<Leased> {
        self.take_from(&node.pool)
    }

    fn give(&mut self, node: &Node, conn: Leased) {
        node.pool.give(conn);
    }

    fn timed_out(&self) -> bool {
        Pooled::timed_out(self)
    }
}

/// A background thread's connections, outside the pools: one per node, or only the
/// last one used (a sentinel client's, which follows the one master).
pub(super) struct Own {
    conns: HashMap<String, Leased>,
    /// Keep the connection to the node used last only: taking one for another node
    /// closes the rest.
    last_only: bool,
    connect: Duration,
    response: Duration,
}

impl Own {
    /// One connection per node, with these timeouts.
    pub(super) fn per_node(connect: Duration, response: Duration) -> Self {
        Self {
            conns: HashMap::new(),
            last_only: false,
            connect,
            response,
        }
    }

    /// One connection, to the node used last, with these timeouts.
    pub(super) fn last_only(connect: Duration, response: Duration) -> Self {
        Self {
            last_only: true,
            ..Self::per_node(connect, response)
        }
    }

    /// Closes every connection but the one to `addr`.
    pub(super) fn keep_only(&mut self, addr: &str) {
        self.conns.retain(|at, _| at == addr);
    }

    /// Closes every connection (their replies made no sense).
    pub(super) fn clear(&mut self) {
        self.conns.clear();
    }
}

impl std::fmt::Debug for Own {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Own")
            .field("nodes", &self.conns.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Source for Own {
    fn take(&mut self, node: &Node) -> RedisResult<Leased> {
        let kept = self.conns.remove(node.addr());
        if self.last_only {
            self.conns.clear();
        }
        match kept {
            Some(conn) if redis::ConnectionLike::is_open(&conn) => Ok(conn),
            _ => node
                .pool
                .connector()
                .with_timeouts(self.connect, self.response)
                .connect()
                .map(Leased::from),
        }
    }

    fn give(&mut self, node: &Node, conn: Leased) {
        self.conns.insert(node.addr().to_owned(), conn);
    }
}

/// How a multi-node topology routes: what [`cluster`](super::cluster) and
/// [`sentinel`](super::sentinel) each add to the base.
pub(crate) trait Routing: Send + Sync + 'static {
    /// The nodes, the refresher's kick and stop flag, the retry budget.
    fn nodes(&self) -> &Nodes;

    /// Runs `f` on the node that owns `key`, sending it again only where the answer
    /// says it did not run (see the module docs), with connections from `source` and
    /// back-offs for at most `budget`.
    fn route<T>(
        &self,
        key: &str,
        budget: Duration,
        source: &mut dyn Source,
        f: &mut dyn FnMut(&mut redis::Connection) -> RedisResult<T>,
    ) -> RedisResult<T>;

    /// Runs `f` once on the node that owns `key` as the topology says now, for a
    /// script that names no keys (the watchdog's per-node renewal).
    fn run_on_owner<T>(
        &self,
        key: &str,
        source: &mut dyn Source,
        f: impl FnOnce(&mut redis::Connection) -> RedisResult<T>,
    ) -> RedisResult<T>;

    /// The node that owns `key` as the topology says now; an error means none does.
    fn owner_of(&self, key: &str) -> RedisResult<Arc<Node>>;
}

/// A multi-node topology: its shared state and the refresher thread that keeps it
/// current (the cluster's scanner, the sentinel monitor), stopped on shutdown or drop.
#[derive(Debug)]
pub(crate) struct MultiNode<R: Routing> {
    shared: Arc<R>,
    refresher: Mutex<Option<JoinHandle<()>>>,
}

impl<R: Routing> MultiNode<R> {
    /// Starts the refresher thread `thread`, which runs `refresh` on the shared state
    /// until the client stops.
    pub(super) fn start(
        shared: Arc<R>,
        thread: &str,
        refresh: impl FnOnce(&R) + Send + 'static,
    ) -> Result<Self> {
        let thread_shared = Arc::clone(&shared);
        let refresher = std::thread::Builder::new()
            .name(thread.into())
            .spawn(move || refresh(&thread_shared))?;
        Ok(Self {
            shared,
            refresher: Mutex::new(Some(refresher)),
        })
    }

    pub(crate) fn shared(&self) -> &Arc<R> {
        &self.shared
    }

    /// Runs `f` on a pooled connection to the node that owns `key`.
    pub(crate) fn run<T>(
        &self,
        key: &str,
        mut f: impl FnMut(&mut redis::Connection) -> RedisResult<T>,
    ) -> Result<T> {
        let budget = self.shared.nodes().budget();
        let mut pooled = Pooled::default();
        self.shared
            .route(key, budget, &mut pooled, &mut f)
            .map_err(|e| pooled.error(key, e))
    }

    /// A connection to the node that owns `key` as the topology says now, for a caller
    /// that drives it by hand: with `wait` `None` only an idle one (`Ok(None)` when there
    /// is none), else an idle or a new one, waiting at most `wait` for a turn. Redirects
    /// are the caller's to handle: a request sent on it after a migration gets `MOVED`
    /// back as its error reply.
    ///
    /// # Errors
    ///
    /// [`Error::PoolTimeout`] when no turn came within `wait`; the connect error (for
    /// the object `key` names) when the node cannot be reached.
    pub(crate) fn checkout(&self, key: &str, wait: Option<Duration>) -> Result<Option<Checkout>> {
        let node = self
            .shared
            .owner_of(key)
            .map_err(|e| Error::from_redis(key, e))?;
        let conn = match wait {
            None => node.pool.take_idle(),
            Some(wait) => Some(node.pool.take_within(wait).map_err(|not| match not {
                NotTaken::Timeout(e) => e,
                NotTaken::Connect(e) => {
                    self.shared.nodes().node_failed(node.addr());
                    Error::from_redis(key, e)
                }
            })?),
        };
        let response = self.shared.nodes().response_timeout();
        Ok(conn.map(|conn| Checkout::of_node(conn, node, response)))
    }

    /// The watchdog's own connections (`own`), routed as the topology says.
    pub(super) fn dedicated_with(&self, own: Own) -> Dedicated<R> {
        Dedicated {
            shared: Arc::clone(&self.shared),
            own,
        }
    }

    /// Stops the refresher thread and waits for it. Idempotent.
    pub(crate) fn shutdown(&self) {
        let nodes = self.shared.nodes();
        nodes.stop.store(true, Ordering::Release);
        nodes.kick();
        if let Some(thread) = self.refresher.lock().take() {
            let _ = thread.join();
        }
    }
}

impl<R: Routing> Drop for MultiNode<R> {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A background thread's own connections (the watchdog's), routed as the topology
/// says; a failed command drops its connection so that the next one starts clean.
pub(crate) struct Dedicated<R: Routing> {
    shared: Arc<R>,
    own: Own,
}

impl<R: Routing> std::fmt::Debug for Dedicated<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dedicated")
            .field("own", &self.own)
            .finish_non_exhaustive()
    }
}

impl<R: Routing> Dedicated<R> {
    pub(crate) fn shared(&self) -> &Arc<R> {
        &self.shared
    }

    /// Runs `f` with `key` routed to its node, following redirects but never waiting
    /// (the watchdog retries a failed renewal itself, a quarter period later).
    pub(crate) fn run<T>(
        &mut self,
        key: &str,
        mut f: impl FnMut(&mut redis::Connection) -> RedisResult<T>,
    ) -> RedisResult<T> {
        self.shared
            .route(key, Duration::ZERO, &mut self.own, &mut f)
    }

    /// Runs `f` once on the node that owns `key` as the topology says now, without
    /// redirects: for the per-node renewal, which names no keys.
    pub(crate) fn run_on_owner<T>(
        &mut self,
        key: &str,
        f: impl FnOnce(&mut redis::Connection) -> RedisResult<T>,
    ) -> RedisResult<T> {
        self.shared.run_on_owner(key, &mut self.own, f)
    }

    /// Drops every connection (their replies made no sense).
    pub(crate) fn reset(&mut self) {
        self.own.clear();
    }
}
