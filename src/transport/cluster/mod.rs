//! Redis Cluster: the slot map, routing by key slot, redirects, and the scanner thread
//! that keeps the map current.
//!
//! # Never twice
//!
//! redis-rs's own cluster connection sends a command again after an I/O error or a read
//! timeout, so a script whose reply was lost can run twice (a reentrant hold counted
//! twice). It is not used. Commands go out on plain connections to the slot's master,
//! and this module decides what may be sent again:
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

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded};
use parking_lot::{Mutex, RwLock};
use redis::{ErrorKind, RedisError, RedisResult, ServerErrorKind};

use super::checkout::Checkout;
use super::connector::{Connector, Endpoint};
use super::pool::{Elastic, Leased, NotTaken, Pooled};
use super::slots::{SlotMap, key_slot};
use super::{BOTH_PUBLISH, Kinds, PLAIN_PUBLISH, SHARDED_PUBLISH};
use crate::config::{Config, ShardedSubscriptionMode};
use crate::error::{Error, Result, is_connection_error};

/// Redirects one command may follow before it gives up (a map changing under it).
const MAX_REDIRECTS: u32 = 16;
/// Shortest gap between two reads of the slot map.
const MIN_SCAN_GAP: Duration = Duration::from_millis(20);
/// First back-off after a "did not run, try again" answer.
const FIRST_PAUSE: Duration = Duration::from_millis(10);
/// Longest single back-off.
const MAX_PAUSE: Duration = Duration::from_millis(500);

/// One master (or a node we asked for the map): its connections.
#[derive(Debug)]
pub(crate) struct Node {
    pool: Elastic,
    /// The same node in RESP3, for subscriber connections.
    pubsub: Connector,
}

impl Node {
    pub(crate) fn addr(&self) -> &str {
        self.pool.connector().addr()
    }

    pub(crate) fn pubsub_connector(&self) -> &Connector {
        &self.pubsub
    }

    /// Gives back a checked-out connection whose reply stream is in step.
    pub(crate) fn give(&self, conn: Leased) {
        self.pool.give(conn);
    }
}

/// What the routing code, the scanner, the watchdog and the listener share.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The first seed: TLS mode, root certificate and credentials of every node.
    template: Endpoint,
    seeds: Vec<String>,
    nat: Vec<(String, String)>,
    connect_timeout: Duration,
    response_timeout: Duration,
    /// The most pooled connections per node ([`Config::pool_max_size`]).
    pool_size: usize,
    /// The `CLIENT SETNAME` of every connection.
    name: String,
    map: RwLock<Arc<SlotMap>>,
    nodes: Mutex<HashMap<String, Arc<Node>>>,
    /// Bumped whenever the map changes; subscribers compare it to re-home channels.
    generation: AtomicU64,
    kick: Sender<()>,
    stop: AtomicBool,
    /// How long a command that did not run is sent again.
    budget: Duration,
    kinds: Kinds,
    publish: &'static str,
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
        let mut nodes = self.nodes.lock();
        if let Some(node) = nodes.get(addr) {
            return Ok(Arc::clone(node));
        }
        let bad =
            |e: Error| RedisError::from((ErrorKind::Client, "bad node address", e.to_string()));
        let endpoint = self.template.at(addr).map_err(bad)?;
        let connector = Connector::to(&endpoint, self.connect_timeout, self.response_timeout)
            .map_err(bad)?
            .named(&self.name);
        let node = Arc::new(Node {
            pubsub: connector.resp3().map_err(bad)?,
            pool: Elastic::new(connector, self.pool_size),
        });
        nodes.insert(addr.to_owned(), Arc::clone(&node));
        Ok(node)
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

    pub(crate) fn kinds(&self) -> Kinds {
        self.kinds
    }

    pub(crate) fn publish_command(&self) -> &'static str {
        self.publish
    }

    /// Asks the scanner to read the map now.
    pub(crate) fn kick(&self) {
        let _ = self.kick.try_send(());
    }

    /// A node failed (refused a connection, or a connection to it broke): its idle
    /// connections are likely dead too, and the map may be about to change.
    pub(crate) fn node_failed(&self, addr: &str) {
        if let Some(node) = self.nodes.lock().get(addr) {
            node.pool.drop_idle();
        }
        self.kick();
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

    /// Installs `fresh` (uncovered slots keep their old owner) and condemns the nodes
    /// it no longer names as masters.
    fn install(&self, fresh: SlotMap) {
        let changed = {
            let mut map = self.map.write();
            let Ok(next) = map.patched_with(fresh) else {
                return;
            };
            if **map == next {
                false
            } else {
                log::info!("redmutex: cluster slot map changed: {next:?}");
                *map = Arc::new(next);
                self.generation.fetch_add(1, Ordering::AcqRel);
                true
            }
        };
        if changed {
            let map = self.map();
            for (addr, node) in self.nodes.lock().iter() {
                if map.is_master(addr) {
                    node.pool.reprieve();
                } else {
                    node.pool.condemn();
                }
            }
        }
    }

    /// Reads `CLUSTER SLOTS` from the first node that answers: the current masters,
    /// then the seeds. The answer replaces the map. The scanner reads on connections of
    /// its own (`own`): a pooled one would make it queue behind the application's
    /// threads, and wait a connection timeout for a turn on a master that stopped
    /// answering, which is when the map is needed most.
    fn refresh(&self, own: &mut Own) -> std::result::Result<(), String> {
        let mut candidates: Vec<String> = self.map().masters().map(str::to_owned).collect();
        for seed in &self.seeds {
            if !candidates.contains(seed) {
                candidates.push(seed.clone());
            }
        }
        let mut errors = Vec::new();
        for addr in candidates {
            match self.read_map(&addr, own) {
                Ok(map) => {
                    // One connection is enough: the one that answered.
                    own.conns.retain(|at, _| *at == addr);
                    self.install(map);
                    return Ok(());
                }
                Err(e) => errors.push(format!("{addr}: {e}")),
            }
        }
        Err(errors.join("; "))
    }

    fn read_map(&self, addr: &str, own: &mut Own) -> std::result::Result<SlotMap, String> {
        let node = self.node(addr).map_err(|e| e.to_string())?;
        let mut conn = own.take(&node).map_err(|e| e.to_string())?;
        let reply = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query::<redis::Value>(&mut conn)
            .map_err(|e| e.to_string())?;
        own.give(&node, conn);
        SlotMap::parse(&reply, addr, |a| self.dial(&a))
    }

    /// Sleeps before sending a command again that did not run; false when the budget
    /// is spent (or the client stops).
    fn pause(&self, started: Instant, budget: Duration, pauses: &mut u32) -> bool {
        let pause = FIRST_PAUSE
            .saturating_mul(1 << (*pauses).min(16))
            .min(MAX_PAUSE);
        if self.stop.load(Ordering::Acquire) || started.elapsed() + pause > budget {
            return false;
        }
        std::thread::sleep(pause);
        *pauses += 1;
        true
    }

    /// Runs `f` on the master of `key`'s slot, following redirects and sending it again
    /// only where the answer says it did not run (see the module docs). Connections
    /// come from `source`; `budget` bounds the back-offs.
    pub(crate) fn route<T>(
        &self,
        key: &str,
        budget: Duration,
        source: &mut dyn Source,
        f: &mut dyn FnMut(&mut redis::Connection) -> RedisResult<T>,
    ) -> RedisResult<T> {
        let slot = key_slot(key.as_bytes());
        let started = Instant::now();
        let mut asking: Option<Arc<Node>> = None;
        let mut redirects = 0;
        let mut pauses = 0;
        loop {
            let node = match asking.clone() {
                Some(target) => target,
                None => match self.owner(slot) {
                    Ok(node) => node,
                    Err(e) => {
                        self.kick();
                        if self.pause(started, budget, &mut pauses) {
                            continue;
                        }
                        return Err(e);
                    }
                },
            };
            let mut conn = match source.take(&node) {
                Ok(conn) => conn,
                // Every pooled connection to the node stayed busy: nothing was sent,
                // and the node is not known to have failed.
                Err(e) if source.timed_out() => return Err(e),
                Err(e) => {
                    // Not even connected: nothing was sent.
                    self.node_failed(node.addr());
                    asking = None;
                    if self.pause(started, budget, &mut pauses) {
                        continue;
                    }
                    return Err(e);
                }
            };
            if asking.is_some() {
                // ASKING holds for the next command on this connection only, which is
                // the one we send next.
                if let Err(e) = redis::cmd("ASKING").query::<()>(&mut conn) {
                    if is_connection_error(&e) {
                        self.node_failed(node.addr());
                    } else {
                        source.give(&node, conn);
                    }
                    // Only ASKING was lost; the command itself was not sent.
                    asking = None;
                    if self.pause(started, budget, &mut pauses) {
                        continue;
                    }
                    return Err(e);
                }
            }
            let err = match f(&mut conn) {
                Ok(value) => {
                    source.give(&node, conn);
                    return Ok(value);
                }
                Err(e) => e,
            };
            if is_connection_error(&err) {
                // The command may have run and its reply be what went missing: it is
                // never sent again. The node's other idle connections are suspect.
                self.node_failed(node.addr());
                return Err(err);
            }
            // A server error leaves the connection's reply stream in step.
            source.give(&node, conn);
            asking = None;
            match err.kind() {
                ErrorKind::Server(ServerErrorKind::Moved) => {
                    if self.moved(&err).is_none() {
                        return Err(err);
                    }
                }
                ErrorKind::Server(ServerErrorKind::Ask) => {
                    let Some((announced, _)) = err.redirect_node() else {
                        return Err(err);
                    };
                    asking = Some(self.node(&self.dial(announced))?);
                }
                ErrorKind::Server(
                    ServerErrorKind::TryAgain
                    | ServerErrorKind::ClusterDown
                    | ServerErrorKind::MasterDown
                    | ServerErrorKind::BusyLoading
                    | ServerErrorKind::ReadOnly,
                ) => {
                    self.kick();
                    if !self.pause(started, budget, &mut pauses) {
                        return Err(err);
                    }
                    continue;
                }
                _ => return Err(err),
            }
            redirects += 1;
            if redirects > MAX_REDIRECTS {
                // A redirect loop: nodes that disagree about a slot for a moment (the
                // source still MIGRATING while the target no longer imports it, or two
                // masters each naming the other) until the cluster bus settles. Back off
                // as for TRYAGAIN, within the budget, instead of failing a request that
                // goes through a moment later; every redirect was a refusal, so nothing ran.
                self.kick();
                if !self.pause(started, budget, &mut pauses) {
                    return Err(err);
                }
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
        let mut conn = source.take(&node).inspect_err(|_| {
            self.node_failed(node.addr());
        })?;
        let result = f(&mut conn);
        match &result {
            Err(e) if is_connection_error(e) => self.node_failed(node.addr()),
            _ => source.give(&node, conn),
        }
        result
    }

    /// A connection to the master of `key`'s slot as the map names it now, for a caller
    /// that drives it by hand: with `wait` `None` only an idle one (`Ok(None)` when there
    /// is none), else an idle or a new one, waiting at most `wait` for a turn. Redirects
    /// are the caller's to handle: a request sent on it after a migration gets `MOVED`
    /// back as its error reply.
    ///
    /// # Errors
    ///
    /// [`Error::PoolTimeout`] when no turn came within `wait`; the connect error (for
    /// the object `key` names) when the master cannot be reached.
    pub(crate) fn checkout(
        &self,
        key: &str,
        wait: Option<Duration>,
    ) -> Result<Option<(Leased, Arc<Node>)>> {
        let node = self
            .owner(key_slot(key.as_bytes()))
            .map_err(|e| Error::from_redis(key, e))?;
        let conn = match wait {
            None => node.pool.take_idle(),
            Some(wait) => Some(node.pool.take_within(wait).map_err(|not| match not {
                NotTaken::Timeout(e) => e,
                NotTaken::Connect(e) => {
                    self.node_failed(node.addr());
                    Error::from_redis(key, e)
                }
            })?),
        };
        Ok(conn.map(|conn| (conn, node)))
    }

    /// A best-effort `PUBLISH` on `addr`, for the listener's control channel.
    pub(crate) fn publish_on(&self, addr: &str, channel: &str, message: &str) -> Result<()> {
        let node = self.node_at(addr)?;
        let mut conn = node.pool.take()?;
        let sent = redis::cmd("PUBLISH")
            .arg(channel)
            .arg(message)
            .query::<i64>(&mut conn);
        match sent {
            Ok(_) => {
                node.pool.give(conn);
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// A cluster client's topology: the shared state and the scanner thread.
#[derive(Debug)]
pub(crate) struct Cluster {
    shared: Arc<Shared>,
    scanner: Mutex<Option<JoinHandle<()>>>,
}

impl Cluster {
    /// Learns the cluster from the first seed that answers `CLUSTER SLOTS`, checks it,
    /// picks the pub/sub kind, opens a connection per master and starts the scanner.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for a bad address, a seed that is a single server, or slots no
    /// master serves (with `check_slots_coverage`); [`Error::Permission`] or
    /// [`Error::Redis`] when the login is refused; [`Error::Redis`] naming every seed
    /// when none could be reached.
    pub(crate) fn open(config: &Config, name: &str) -> Result<Self> {
        let seeds: Vec<Endpoint> = config
            .cluster
            .node_addresses
            .iter()
            .map(|url| Endpoint::from_url(url, config))
            .collect::<Result<_>>()?;
        let Some(template) = seeds.first().cloned() else {
            return Err(Error::Config("no cluster node addresses".into()));
        };
        let nat = config.cluster.nat_map.clone();
        let dial = |announced: String| {
            nat.iter()
                .find(|(from, _)| *from == announced)
                .map_or(announced, |(_, to)| to.clone())
        };
        let mut failures = Vec::new();
        let mut learned = None;
        for seed in &seeds {
            let connector =
                Connector::to(seed, config.connection_timeout, config.response_timeout)?
                    .named(name);
            match discover(&connector, config, &dial) {
                Ok(found) => {
                    learned = Some(found);
                    break;
                }
                Err(Discovery::Unreachable(e)) => {
                    log::warn!("redmutex: cluster seed {} unreachable: {e}", seed.addr());
                    failures.push(e);
                }
                Err(Discovery::Fatal(e)) => return Err(e),
            }
        }
        let Some((map, sharded)) = learned else {
            // The first seed's own error keeps its kind, so the message's hint fits
            // (refused, timed out, TLS); the others are in the log.
            let seeds: Vec<String> = config
                .cluster
                .node_addresses
                .iter()
                .map(|url| crate::address::redact(url))
                .collect();
            let source = failures.into_iter().next().unwrap_or_else(|| {
                RedisError::from((ErrorKind::Io, "no cluster node could be reached"))
            });
            return Err(Error::Connect {
                address: seeds.join(", "),
                source,
            });
        };
        let uncovered = map.uncovered();
        if config.cluster.check_slots_coverage && !uncovered.is_empty() {
            let ranges: Vec<String> = uncovered
                .iter()
                .map(|r| format!("{}-{}", r.start(), r.end()))
                .collect();
            return Err(Error::Config(format!(
                "the cluster does not serve every hash slot (no master for slots {}); \
                 fix the cluster or set check_slots_coverage(false)",
                ranges.join(", ")
            )));
        }
        let (kinds, publish) = match (config.cluster.sharded_subscription_mode, sharded) {
            (ShardedSubscriptionMode::Off, _) | (ShardedSubscriptionMode::Auto, false) => (
                Kinds {
                    plain: true,
                    sharded: false,
                },
                PLAIN_PUBLISH,
            ),
            (ShardedSubscriptionMode::On, _) => (
                Kinds {
                    plain: false,
                    sharded: true,
                },
                SHARDED_PUBLISH,
            ),
            (ShardedSubscriptionMode::Auto, true) => (
                Kinds {
                    plain: true,
                    sharded: true,
                },
                SHARDED_PUBLISH,
            ),
        };
        // A fleet mixing peers that listen either way (`publish_both`): one more publish
        // per release, so that none of them waits for a lease to end.
        let publish = if config.cluster.publish_both && publish == SHARDED_PUBLISH {
            BOTH_PUBLISH
        } else {
            publish
        };
        let (kick, kicked) = bounded(1);
        let shared = Arc::new(Shared {
            seeds: seeds.iter().map(Endpoint::addr).collect(),
            template,
            nat: config.cluster.nat_map.clone(),
            connect_timeout: config.connection_timeout,
            response_timeout: config.response_timeout,
            pool_size: config.pool_max_size as usize,
            name: name.to_owned(),
            map: RwLock::new(Arc::new(map)),
            nodes: Mutex::new(HashMap::new()),
            generation: AtomicU64::new(0),
            kick,
            stop: AtomicBool::new(false),
            budget: config.retry_max_delay.saturating_mul(config.retry_attempts),
            kinds,
            publish,
        });
        if config.pool_min_idle.unwrap_or(0) > 0 {
            // One warm connection per master; a master that is down now is not an
            // error yet (its replica may be about to take over).
            let masters: Vec<String> = shared.map().masters().map(str::to_owned).collect();
            for addr in masters {
                let warmed = shared.node(&addr).map_err(Error::from).and_then(|n| {
                    let conn = n.pool.take()?;
                    n.pool.give(conn);
                    Ok(())
                });
                match warmed {
                    Ok(()) => {}
                    Err(e) => log::warn!("redmutex: cluster master {addr} not reachable: {e}"),
                }
            }
        }
        let thread_shared = Arc::clone(&shared);
        let interval = config.cluster.scan_interval;
        let scanner = std::thread::Builder::new()
            .name("redmutex-cluster".into())
            .spawn(move || scan(&thread_shared, &kicked, interval))?;
        Ok(Self {
            shared,
            scanner: Mutex::new(Some(scanner)),
        })
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Runs `f` on a pooled connection to the master of `key`'s slot.
    pub(crate) fn run<T>(
        &self,
        key: &str,
        mut f: impl FnMut(&mut redis::Connection) -> RedisResult<T>,
    ) -> Result<T> {
        let budget = self.shared.budget;
        let mut pooled = Pooled::default();
        self.shared
            .route(key, budget, &mut pooled, &mut f)
            .map_err(|e| pooled.error(key, e))
    }

    /// A connection to the master of `key`'s slot, driven by the caller; see
    /// [`Shared::checkout`].
    pub(crate) fn checkout(&self, key: &str, wait: Option<Duration>) -> Result<Option<Checkout>> {
        let response = self.shared.response_timeout;
        self.shared
            .checkout(key, wait)
            .map(|found| found.map(|(conn, node)| Checkout::of_node(conn, node, response)))
    }

    /// The watchdog's own connections, one per master, with these timeouts.
    pub(crate) fn dedicated(&self, connect: Duration, response: Duration) -> Dedicated {
        Dedicated {
            shared: Arc::clone(&self.shared),
            own: Own {
                conns: HashMap::new(),
                connect,
                response,
            },
        }
    }

    /// Stops the scanner and waits for it. Idempotent.
    pub(crate) fn shutdown(&self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.kick();
        if let Some(thread) = self.scanner.lock().take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Why a seed could not tell us the cluster.
enum Discovery {
    /// Down or unreachable: try the next seed.
    Unreachable(RedisError),
    /// An answer that no other seed will change (not a cluster, login refused).
    Fatal(Error),
}

/// Asks one seed for the slot map and whether sharded pub/sub works
/// (`PUBSUB SHARDNUMSUB`, Redisson's probe).
fn discover(
    connector: &Connector,
    config: &Config,
    dial: &dyn Fn(String) -> String,
) -> std::result::Result<(SlotMap, bool), Discovery> {
    let classify = |e: RedisError| {
        if is_connection_error(&e) {
            Discovery::Unreachable(e)
        } else {
            Discovery::Fatal(Error::from_redis("", e))
        }
    };
    // A login the seed refuses is a failed first connection, as on a single server;
    // the PING after it finds a missing password, which the login alone does not.
    let mut conn = connector
        .open_checked(connector.addr())
        .map_err(|e| match e {
            Error::Connect { source, .. } if is_connection_error(&source) => {
                Discovery::Unreachable(source)
            }
            other => Discovery::Fatal(other),
        })?;
    let reply = match redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query::<redis::Value>(&mut conn)
    {
        Ok(reply) => reply,
        Err(e) if e.to_string().contains("cluster support disabled") => {
            return Err(Discovery::Fatal(Error::Config(format!(
                "{} is a single Redis server, not a cluster node (cluster support is \
                 disabled there); use Config::address for a single server",
                connector.addr()
            ))));
        }
        Err(e) => return Err(classify(e)),
    };
    let map = SlotMap::parse(&reply, connector.addr(), dial).map_err(|e| {
        Discovery::Fatal(Error::Config(format!(
            "{} answered CLUSTER SLOTS with something else than a slot map: {e}",
            connector.addr()
        )))
    })?;
    let sharded = config.cluster.sharded_subscription_mode == ShardedSubscriptionMode::Auto
        && redis::cmd("PUBSUB")
            .arg("SHARDNUMSUB")
            .arg("0")
            .query::<redis::Value>(&mut conn)
            .is_ok();
    Ok((map, sharded))
}

/// The scanner: reads the map every `interval`, and soon after a kick (a `MOVED`, a
/// failed node).
fn scan(shared: &Shared, kicked: &Receiver<()>, interval: Duration) {
    let mut own = Own {
        conns: HashMap::new(),
        connect: shared.connect_timeout,
        response: shared.response_timeout,
    };
    let mut last = Instant::now();
    // A disconnected kick channel means the client is gone.
    while let Ok(()) | Err(RecvTimeoutError::Timeout) = kicked.recv_timeout(interval) {
        if shared.stop.load(Ordering::Acquire) {
            break;
        }
        // Many failing commands kick at once; one read serves them all.
        let since = last.elapsed();
        if since < MIN_SCAN_GAP {
            std::thread::sleep(MIN_SCAN_GAP - since);
        }
        last = Instant::now();
        if let Err(e) = shared.refresh(&mut own) {
            log::warn!("redmutex: could not read the cluster slot map: {e}");
        }
    }
}

/// A background thread's connections, one per node, outside the pools.
struct Own {
    conns: HashMap<String, Leased>,
    connect: Duration,
    response: Duration,
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
        match self.conns.remove(node.addr()) {
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

/// The watchdog's connections to the masters.
#[derive(Debug)]
pub(crate) struct Dedicated {
    shared: Arc<Shared>,
    own: Own,
}

impl Dedicated {
    /// The master index of `key`'s slot in the current map: keys of one group live on
    /// one node.
    pub(crate) fn group(&self, key: &str) -> u64 {
        self.shared.group(key)
    }

    /// Runs `f` with `key` routed to its master, following redirects but never waiting
    /// (the watchdog retries a failed renewal itself, a quarter period later).
    pub(crate) fn run<T>(
        &mut self,
        key: &str,
        mut f: impl FnMut(&mut redis::Connection) -> RedisResult<T>,
    ) -> RedisResult<T> {
        self.shared
            .route(key, Duration::ZERO, &mut self.own, &mut f)
    }

    /// Runs `f` once on the master that the map names for `key`, without redirects: for
    /// the per-node renewal, which names no keys.
    pub(crate) fn run_on_owner<T>(
        &mut self,
        key: &str,
        f: impl FnOnce(&mut redis::Connection) -> RedisResult<T>,
    ) -> RedisResult<T> {
        self.shared.run_on_owner(key, &mut self.own, f)
    }

    /// Drops every connection (their replies made no sense).
    pub(crate) fn reset(&mut self) {
        self.own.conns.clear();
    }
}
