//! Redis Cluster: the slot map, routing by key slot, and redirects, over the multi-node
//! base ([`nodes`]). Learning the cluster at start is [`discover`]'s, and
//! keeping the map current the scanner's ([`scan`]).
//!
//! # Never twice
//!
//! redis-rs's own cluster connection sends a command again after an I/O error or a read
//! timeout, so a script whose reply was lost can run twice (a reentrant hold counted
//! twice). It is not used. Commands go out on plain connections to the slot's master;
//! the base decides what a failed connection means (see [`nodes`]), and
//! this module reads the cluster's refusals:
//!
//! | answer                                          | ran? | then                              |
//! |-------------------------------------------------|------|-----------------------------------|
//! | `MOVED`                                         | no   | note the new owner, send there    |
//! | `ASK`                                           | no   | `ASKING` + the command at the target, same connection |
//! | `TRYAGAIN`, `CLUSTERDOWN`, `MASTERDOWN`, `LOADING`, `READONLY` | no | back off, send again |
//! | connect refused or timed out                    | no   | read the map, back off, send again |
//! | I/O error or timeout after sending              | maybe | **never sent again**: the error goes to the caller |
//!
//! Redis checks the keys of a script before running any of it, so every redirect
//! answer means nothing ran. Back-offs start at 10 ms, double, and stop after the
//! client's retry budget (`retry_attempts × retry_max_delay`, 8 s by default: a killed
//! master's replica is promoted in 4–5 s with a 2 s node timeout).
//!
//! # Failover
//!
//! A failed node makes its idle connections suspect: they are closed, and the scanner
//! is asked to read the map. When a new map names other masters, the nodes that lost
//! their slots are condemned: their idle connections are closed and no connection to
//! them is pooled again.

mod discover;
mod scan;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::RwLock;
use redis::{ErrorKind, RedisError, RedisResult, ServerErrorKind};

use super::nodes::{self, Node, Nodes, Own, Resend, Routing, Sent, Source, Taken};
use super::pool::Leased;
use super::publish::Publish;
use super::slots::{SlotMap, key_slot};
use crate::error::{Error, Result, is_connection_error};

/// Redirects one command may follow before it gives up (a map changing under it).
const MAX_REDIRECTS: u32 = 16;

/// A cluster client's topology: the shared state and the scanner thread.
pub(crate) type Cluster = nodes::MultiNode<Shared>;

/// The watchdog's connections to the masters.
pub(crate) type Dedicated = nodes::Dedicated<Shared>;

/// What the routing code, the scanner, the watchdog and the listener share.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The nodes, reached like the first seed.
    nodes: Nodes,
    seeds: Vec<String>,
    nat: Vec<(String, String)>,
    map: RwLock<Arc<SlotMap>>,
    /// Bumped whenever the map changes; subscribers compare it to re-home channels.
    generation: AtomicU64,
    /// How unlock messages are published and heard here.
    publish: Publish,
    /// The seed knows script flags (`#!lua flags=`), Redis 7.0+: see
    /// [`Batching::PerNode`](super::Batching::PerNode).
    pub(crate) script_flags: bool,
}

/// What a refusal means for the command that got it.
enum Next {
    /// Send it again at once: to the slot's owner in the (updated) map, or with
    /// `ASKING` to the node named.
    Redirect(Option<Arc<Node>>),
    /// Back off, then send it again.
    Pause,
    /// The answer is the caller's.
    Fail,
}

impl Shared {
    /// The dial address of an address the cluster announced.
    fn dial(&self, announced: &str) -> String {
        self.nat
            .iter()
            .find(|(from, _)| from == announced)
            .map_or_else(|| announced.to_owned(), |(_, to)| to.clone())
    }

    /// The node at `addr`, created on first use.
    fn node(&self, addr: &str) -> RedisResult<Arc<Node>> {
        self.nodes
            .node(addr)
            .map_err(|e| RedisError::from((ErrorKind::Client, "bad node address", e.to_string())))
    }

    pub(crate) fn map(&self) -> Arc<SlotMap> {
        Arc::clone(&self.map.read())
    }

    /// The master of `slot`, or `CLUSTERDOWN` when the map has none.
    fn owner(&self, slot: u16) -> RedisResult<Arc<Node>> {
        let map = self.map();
        let Some(addr) = map.master(slot) else {
            return Err(RedisError::from((
                ErrorKind::Server(ServerErrorKind::ClusterDown),
                "no master serves the slot",
                format!("slot {slot}"),
            )));
        };
        self.node(addr)
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The master index of `key`'s slot in the current map (`u64::MAX` for none):
    /// keys of one group live on one node while the generation stays the same, since
    /// every new map bumps it.
    pub(crate) fn group(&self, key: &str) -> u64 {
        self.map()
            .master_index(key_slot(key.as_bytes()))
            .map_or(u64::MAX, u64::from)
    }

    pub(crate) fn publish(&self) -> Publish {
        self.publish
    }

    /// Asks the scanner to read the map now.
    pub(crate) fn kick(&self) {
        self.nodes.kick();
    }

    /// A node failed (refused a connection, or a connection to it broke): its idle
    /// connections are likely dead too, and the map may be about to change.
    pub(crate) fn node_failed(&self, addr: &str) {
        self.nodes.node_failed(addr);
    }

    /// True while `addr` serves slots.
    pub(crate) fn is_master(&self, addr: &str) -> bool {
        self.map().is_master(addr)
    }

    /// The master whose subscriptions hear `channel` (the owner of its slot).
    pub(crate) fn home(&self, channel: &str) -> Result<Arc<Node>> {
        self.owner(key_slot(channel.as_bytes()))
            .map_err(|e| Error::from_redis("", e))
    }

    /// The node at `addr`.
    pub(crate) fn node_at(&self, addr: &str) -> Result<Arc<Node>> {
        self.node(addr).map_err(|e| Error::from_redis("", e))
    }

    /// Applies a `MOVED` answer: the slot's new owner, at once (the full map follows
    /// from the scanner). Returns the new owner's dial address.
    pub(crate) fn moved(&self, err: &RedisError) -> Option<String> {
        let (announced, slot) = err.redirect_node()?;
        let addr = self.dial(announced);
        {
            let mut map = self.map.write();
            if map.master(slot) != Some(addr.as_str())
                && let Ok(next) = map.with_slot(slot, &addr)
            {
                *map = Arc::new(next);
                self.generation.fetch_add(1, Ordering::AcqRel);
            }
        }
        self.kick();
        Some(addr)
    }

    /// Sends `ASKING` on `conn` before a command for a slot being imported by `node`.
    /// On an error nothing else was sent; the connection went back, or was closed when
    /// it failed.
    fn asking(
        &self,
        source: &mut dyn Source,
        node: &Node,
        mut conn: Leased,
    ) -> RedisResult<Leased> {
        match redis::cmd("ASKING").query::<()>(&mut conn) {
            Ok(()) => Ok(conn),
            Err(e) => {
                if is_connection_error(&e) {
                    self.node_failed(node.addr());
                } else {
                    source.give(node, conn);
                }
                Err(e)
            }
        }
    }

    /// What the refusal `err` means (see the module docs); a `MOVED` is applied to the
    /// map on the way. An error for an `ASK` target that cannot be dialled.
    fn read_refusal(&self, err: &RedisError) -> RedisResult<Next> {
        Ok(match err.kind() {
            ErrorKind::Server(ServerErrorKind::Moved) => match self.moved(err) {
                Some(_) => Next::Redirect(None),
                None => Next::Fail,
            },
            ErrorKind::Server(ServerErrorKind::Ask) => match err.redirect_node() {
                Some((announced, _)) => Next::Redirect(Some(self.node(&self.dial(announced))?)),
                None => Next::Fail,
            },
            ErrorKind::Server(
                ServerErrorKind::TryAgain
                | ServerErrorKind::ClusterDown
                | ServerErrorKind::MasterDown
                | ServerErrorKind::BusyLoading
                | ServerErrorKind::ReadOnly,
            ) => Next::Pause,
            _ => Next::Fail,
        })
    }
}

impl Routing for Shared {
    fn nodes(&self) -> &Nodes {
        &self.nodes
    }

    /// Runs `f` on the master of `key`'s slot, following redirects and sending it again
    /// only where the answer says it did not run (see the module docs).
    fn route<T>(
        &self,
        key: &str,
        budget: Duration,
        source: &mut dyn Source,
        f: &mut dyn FnMut(&mut redis::Connection) -> RedisResult<T>,
    ) -> RedisResult<T> {
        let slot = key_slot(key.as_bytes());
        let mut resend = Resend::within(budget);
        // The target of an `ASK`, for the next send only.
        let mut asking: Option<Arc<Node>> = None;
        let mut redirects = 0;
        loop {
            let ask = asking.take();
            let node = match &ask {
                Some(target) => Arc::clone(target),
                None => match self.owner(slot) {
                    Ok(node) => node,
                    Err(e) => {
                        self.kick();
                        resend.pause_or(&self.nodes, e)?;
                        continue;
                    }
                },
            };
            let mut conn = match self.nodes.take(source, &node) {
                Taken::Conn(conn) => conn,
                Taken::Busy(e) => return Err(e),
                Taken::Failed(e) => {
                    resend.pause_or(&self.nodes, e)?;
                    continue;
                }
            };
            if ask.is_some() {
                // ASKING holds for the next command on this connection only, which is
                // the one we send next. If it fails, only ASKING was lost; the command
                // itself was not sent.
                conn = match self.asking(source, &node, conn) {
                    Ok(conn) => conn,
                    Err(e) => {
                        resend.pause_or(&self.nodes, e)?;
                        continue;
                    }
                };
            }
            let err = match self.nodes.send(source, &node, conn, &mut *f) {
                Sent::Done(value) => return Ok(value),
                Sent::Lost(e) => return Err(e),
                Sent::Refused(e, conn) => {
                    // Every refusal the cluster sends leaves the connection in step.
                    source.give(&node, conn);
                    e
                }
            };
            match self.read_refusal(&err)? {
                Next::Redirect(to) => asking = to,
                Next::Pause => {
                    self.kick();
                    resend.pause_or(&self.nodes, err)?;
                    continue;
                }
                Next::Fail => return Err(err),
            }
            redirects += 1;
            if redirects > MAX_REDIRECTS {
                // A redirect loop: nodes that disagree about a slot for a moment (the
                // source still MIGRATING while the target no longer imports it, or two
                // masters each naming the other) until the cluster bus settles. Back off
                // as for TRYAGAIN, within the budget, instead of failing a request that
                // goes through a moment later; every redirect was a refusal, so nothing ran.
                self.kick();
                resend.pause_or(&self.nodes, err)?;
                redirects = 0;
            }
        }
    }

    /// Runs `f` once on the master of `key`'s slot, as the map says now, without
    /// following redirects: for scripts that name no keys (the watchdog's per-node
    /// renewal), which no node redirects.
    fn run_on_owner<T>(
        &self,
        key: &str,
        source: &mut dyn Source,
        f: impl FnOnce(&mut redis::Connection) -> RedisResult<T>,
    ) -> RedisResult<T> {
        let node = self.owner(key_slot(key.as_bytes()))?;
        let conn = match self.nodes.take(source, &node) {
            Taken::Conn(conn) => conn,
            Taken::Busy(e) | Taken::Failed(e) => return Err(e),
        };
        match self.nodes.send(source, &node, conn, f) {
            Sent::Done(value) => Ok(value),
            Sent::Lost(e) => Err(e),
            Sent::Refused(e, conn) => {
                source.give(&node, conn);
                Err(e)
            }
        }
    }

    fn owner_of(&self, key: &str) -> RedisResult<Arc<Node>> {
        self.owner(key_slot(key.as_bytes()))
    }
}

impl Cluster {
    /// The watchdog's own connections, one per master, with these timeouts.
    pub(crate) fn dedicated(&self, connect: Duration, response: Duration) -> Dedicated {
        self.dedicated_with(Own::per_node(connect, response))
    }
}

impl Dedicated {
    /// The master index of `key`'s slot in the current map: keys of one group live on
    /// one node.
    pub(crate) fn group(&self, key: &str) -> u64 {
        self.shared().group(key)
    }
}
