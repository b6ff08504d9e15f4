//! Redis Sentinel: the master found through the sentinels ([`discover`]), and followed
//! when they move it ([`monitor`]), over the multi-node base ([`nodes`]).
//!
//! # Finding the master
//!
//! A sentinel is asked `SENTINEL GET-MASTER-ADDR-BY-NAME <master name>`; the node it names
//! must say `master` to `ROLE` before it is used (a sentinel with a stale view names a
//! demoted node). Every sentinel is asked (on one kept connection each), and the masters
//! they name are tried best first: the highest config epoch, then the most sentinels,
//! then the list's order. During a failover a sentinel that has not heard of it yet
//! names the old master, which still says `master` for seconds; the epoch outranks it.
//!
//! # A master being demoted
//!
//! When an acquire's `WAIT` finds fewer replicas than the master had (`replica_sync`),
//! [`Shared::standing`] asks the sentinels whether the master is being replaced; if so
//! the acquire is not counted as synced, and the monitor asks for the new master at once.
//!
//! # Following failovers
//!
//! A monitor thread keeps a subscription to `+switch-master` on one sentinel and asks
//! the sentinels again when that event names our master, every
//! [`sentinel_scan_interval`](crate::Config::sentinel_scan_interval), and soon after a
//! command saw trouble (a refused connection, a broken one, `READONLY`). When the master
//! changed, the old master's pool is condemned (idle connections closed, none given
//! back), and the generation is bumped so that the listener moves its subscriptions to
//! the new master and wakes their waiters.
//!
//! The events matter: after `SENTINEL FAILOVER` the old master keeps accepting writes for
//! about ten seconds (until the sentinels reconfigure it), so a client that only
//! watches for `READONLY` would go on writing locks there while the new master grants
//! them again.
//!
//! # Never twice
//!
//! As in the cluster: a command goes out on a plain connection to the master, and the
//! base decides what a failed connection means (see [`nodes`]). An error
//! reply proves the command did not run only for `READONLY`, `MASTERDOWN` and `LOADING`:
//! those are sent again after a back-off, within the client's retry budget. An I/O error
//! or a timeout after sending goes to the caller.

mod discover;
mod monitor;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::RwLock;
use redis::{ErrorKind, RedisResult, ServerErrorKind};

use super::connector::{Connector, Endpoint};
use super::nodes::{self, Node, Nodes, Own, Resend, Routing, Sent, Source, Taken};
use crate::config::Config;
use crate::error::{Error, Result};

/// A sentinel client's topology: the shared state and the monitor thread.
pub(crate) type Sentinel = nodes::MultiNode<Shared>;

/// The watchdog's connection, following the master.
pub(crate) type Dedicated = nodes::Dedicated<Shared>;

/// What the routing code, the monitor, the watchdog and the listener share.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The data nodes, with their TLS mode, login and database.
    nodes: Nodes,
    master_name: String,
    /// The sentinels, with their own login.
    sentinels: Vec<Endpoint>,
    master: RwLock<Arc<Node>>,
    /// One kept connection per sentinel (by index), for the questions the monitor and
    /// the replica check ask. Each is used under its lock by one thread at a time; a
    /// connection whose command failed is dropped and opened again on next use.
    sentinel_conns: Vec<discover::KeptConn>,
    /// Bumped whenever the master changes; subscribers compare it to move channels.
    generation: AtomicU64,
    /// The most replicas any sentinel listed for the current master when last asked
    /// (see [`known_replicas`](Self::known_replicas)).
    known_replicas: AtomicU64,
}

impl Shared {
    /// The current master.
    pub(crate) fn master(&self) -> Arc<Node> {
        Arc::clone(&self.master.read())
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The replicas the sentinels list for the current master, as last asked: what a
    /// client that has not yet counted them itself starts from. A client whose first
    /// look at the master comes after a failover began sees the promoted replica gone
    /// already, and would otherwise take the replicas left for all there ever were.
    /// Relaxed: a stale figure only makes the replica check ask the sentinels once more
    /// (too high) or once less (too low, as before this figure existed).
    pub(crate) fn known_replicas(&self) -> u64 {
        self.known_replicas.load(Ordering::Relaxed)
    }

    /// Asks the monitor to read the master from the sentinels now.
    pub(crate) fn kick(&self) {
        self.nodes.kick();
    }

    /// A node failed (refused a connection, or a connection to it broke): its idle
    /// connections are likely dead too, and the master may be about to move.
    pub(crate) fn node_failed(&self, addr: &str) {
        self.nodes.node_failed(addr);
    }

    /// True while `addr` is the master.
    pub(crate) fn is_master(&self, addr: &str) -> bool {
        self.master.read().addr() == addr
    }

    /// The node at `addr`.
    pub(crate) fn node_at(&self, addr: &str) -> Result<Arc<Node>> {
        self.nodes.node(addr)
    }
}

impl Routing for Shared {
    fn nodes(&self) -> &Nodes {
        &self.nodes
    }

    /// Runs `f` on the master, sending it again only where the answer says it did not
    /// run (see the module docs). Every key lives on the master.
    fn route<T>(
        &self,
        _key: &str,
        budget: Duration,
        source: &mut dyn Source,
        f: &mut dyn FnMut(&mut redis::Connection) -> RedisResult<T>,
    ) -> RedisResult<T> {
        let mut resend = Resend::within(budget);
        loop {
            let node = self.master();
            let conn = match self.nodes.take(source, &node) {
                Taken::Conn(conn) => conn,
                Taken::Busy(e) => return Err(e),
                Taken::Failed(e) => {
                    resend.pause_or(&self.nodes, e)?;
                    continue;
                }
            };
            let err = match self.nodes.send(source, &node, conn, &mut *f) {
                Sent::Done(value) => return Ok(value),
                Sent::Lost(e) => return Err(e),
                Sent::Refused(err, conn) => {
                    match err.kind() {
                        ErrorKind::Server(ServerErrorKind::ReadOnly) => {
                            // A replica now: every connection to it is useless for
                            // writes, this one included. A script fails at its first
                            // write, before it changed anything.
                            drop(conn);
                            node.pool.drop_idle();
                            self.kick();
                        }
                        ErrorKind::Server(
                            ServerErrorKind::MasterDown | ServerErrorKind::BusyLoading,
                        ) => {
                            source.give(&node, conn);
                            self.kick();
                        }
                        _ => {
                            source.give(&node, conn);
                            return Err(err);
                        }
                    }
                    err
                }
            };
            resend.pause_or(&self.nodes, err)?;
        }
    }

    /// [`route`](Self::route) without back-offs, sending `f` at most once.
    fn run_on_owner<T>(
        &self,
        key: &str,
        source: &mut dyn Source,
        f: impl FnOnce(&mut redis::Connection) -> RedisResult<T>,
    ) -> RedisResult<T> {
        // With no retry budget the command is sent at most once.
        let mut once = Some(f);
        self.route(key, Duration::ZERO, source, &mut |c| match once.take() {
            Some(f) => f(c),
            None => Err(std::io::Error::other("renewal already sent").into()),
        })
    }

    fn owner_of(&self, _key: &str) -> RedisResult<Arc<Node>> {
        Ok(self.master())
    }
}

impl Sentinel {
    /// Finds the master through the sentinels, logs in to it once (so that a wrong
    /// password reports its real cause) and starts the monitor.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for a bad address, a sentinel address that is a plain server,
    /// or a master name no sentinel knows; [`Error::Connect`] naming every sentinel
    /// when none could be reached, or naming the master when it refuses the login;
    /// [`Error::Redis`] when the sentinels named no live master within the retry
    /// budget.
    pub(crate) fn open(config: &Config, conn_name: &str) -> Result<Self> {
        let Some(master_name) = config.sentinel.master_name.clone() else {
            return Err(Error::Config("sentinel mode needs a master name".into()));
        };
        let sentinels: Vec<Endpoint> = config
            .sentinel
            .sentinel_addresses
            .iter()
            .map(|url| {
                Endpoint::parse(url, config).map(|e| {
                    e.with_credentials(
                        config.sentinel.sentinel_username.as_deref(),
                        config.sentinel.sentinel_password.as_deref(),
                    )
                })
            })
            .collect::<Result<_>>()?;
        let Some(first) = sentinels.first() else {
            return Err(Error::Config("no sentinel addresses".into()));
        };
        let template = first.clone().with_login(
            config.username.as_deref(),
            config.password.as_deref(),
            config.database(),
        );
        let sentinel_conns = sentinels
            .iter()
            .map(|_| discover::KeptConn::default())
            .collect();
        // The master slot needs a node before the first answer; the first sentinel's
        // address stands in and is replaced before anything is routed.
        let placeholder = Connector::to(first, config.connection_timeout, config.response_timeout)?;
        let (nodes, kicked) = Nodes::new(template, config, conn_name);
        let shared = Arc::new(Shared {
            nodes,
            master_name,
            sentinels,
            master: RwLock::new(Arc::new(Node::new(placeholder, 0)?)),
            sentinel_conns,
            generation: AtomicU64::new(0),
            known_replicas: AtomicU64::new(0),
        });
        let addr = discover::first_master(&shared)?;
        let node = shared.nodes.node(&addr)?;
        // Log in once and PING, so a refused login or a missing password is reported as
        // such when the client is created.
        let shown = format!("master {:?} at {addr}", shared.master_name);
        let conn = node.pool.connector().open_checked(&shown)?;
        node.pool.give(conn);
        *shared.master.write() = node;
        let interval = config.sentinel.scan_interval;
        Self::start(shared, "redmutex-sentinel", move |shared| {
            monitor::monitor(shared, &kicked, interval);
        })
    }

    /// The watchdog's own connection to the master, with these timeouts.
    pub(crate) fn dedicated(&self, connect: Duration, response: Duration) -> Dedicated {
        self.dedicated_with(Own::last_only(connect, response))
    }
}
