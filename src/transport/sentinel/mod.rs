//! Redis Sentinel: the master found through the sentinels, and followed when they move it.
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
//! As in the cluster: a command goes out on a plain connection to the master; it is sent
//! again only when the answer proves it did not run (`READONLY`, `MASTERDOWN`, `LOADING`,
//! a refused connection), after a back-off, within the client's retry budget. An I/O
//! error or a timeout after sending goes to the caller.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError, bounded};
use parking_lot::{Mutex, RwLock};
use redis::{ErrorKind, RedisError, RedisResult, ServerErrorKind};

use super::checkout::{Checkout, GiveBack};
use super::connector::{Connector, Endpoint};
use super::pool::{Elastic, Leased, NotTaken, Pooled};
use crate::config::Config;
use crate::error::{Error, Result, is_connection_error};
use crate::replica_sync::Standing;

/// The sentinel event that announces a new master.
const SWITCH_MASTER: &str = "+switch-master";
/// How long the monitor reads its event subscription before it looks at kicks and the
/// clock again.
const TICK: Duration = Duration::from_millis(100);
/// First back-off after a "did not run, try again" answer.
const FIRST_PAUSE: Duration = Duration::from_millis(10);
/// Longest single back-off.
const MAX_PAUSE: Duration = Duration::from_millis(500);

/// A data node: its connections.
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
}

impl GiveBack for Node {
    fn give(&self, conn: Leased) {
        self.pool.give(conn);
    }
}

/// What one sentinel said about the master.
enum Answer {
    /// The master it names, and how fresh its word is.
    Master(Report),
    /// The sentinel monitors no master of that name.
    Unknown,
    /// The address is a Redis server, but not a sentinel.
    NotSentinel(String),
    /// Down, unreachable, or an answer that made no sense.
    Unreachable(RedisError),
}

/// A kept connection to one sentinel, opened on first use.
#[derive(Default)]
struct KeptConn(Mutex<Option<redis::Connection>>);

impl std::fmt::Debug for KeptConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptConn").finish_non_exhaustive()
    }
}

/// One sentinel's view of the master.
#[derive(Debug, Clone)]
struct Report {
    /// The master it names (`SENTINEL GET-MASTER-ADDR-BY-NAME`): during a failover it
    /// leads, already the promoted replica once that says `master`.
    named: String,
    /// Its configuration epoch for the master (`SENTINEL MASTER`): a failover raises it,
    /// so of two sentinels naming different masters the higher epoch knows better.
    epoch: u64,
    /// The address its master record is about: the old master until the switch.
    record: String,
    /// It is running a failover of that record's master now.
    failing_over: bool,
    /// The replicas it knows for the master.
    replicas: u64,
}

/// Why no master could be found.
#[derive(Debug)]
struct NotFound {
    /// Every reachable sentinel said it knows no such master.
    unknown_everywhere: bool,
    /// A sentinel address that is a plain server (its description).
    not_sentinel: Option<String>,
    /// One line per sentinel.
    details: Vec<String>,
    /// The first sentinel's connection error, when none could be asked.
    unreachable: Option<RedisError>,
    /// A named master that refused the login (its address and answer).
    refused: Option<(String, RedisError)>,
}

/// Why a named master could not be confirmed.
enum Unconfirmed {
    /// Down, unreachable, or not (yet) a master: another sentinel or a retry may help.
    Unusable(String),
    /// The master refused the login: no retry helps.
    Refused(RedisError),
}

/// What the routing code, the monitor, the watchdog and the listener share.
#[derive(Debug)]
pub(crate) struct Shared {
    master_name: String,
    /// The sentinels, with their own login.
    sentinels: Vec<Endpoint>,
    /// The data nodes' TLS mode, login and database.
    template: Endpoint,
    connect_timeout: Duration,
    response_timeout: Duration,
    max_idle: usize,
    /// `CLIENT SETNAME` of every connection.
    conn_name: String,
    master: RwLock<Arc<Node>>,
    nodes: Mutex<HashMap<String, Arc<Node>>>,
    /// One kept connection per sentinel (by index), for the questions the monitor and
    /// the replica check ask. Each is used under its lock by one thread at a time; a
    /// connection whose command failed is dropped and opened again on next use.
    sentinel_conns: Vec<KeptConn>,
    /// Bumped whenever the master changes; subscribers compare it to move channels.
    generation: AtomicU64,
    kick: Sender<()>,
    stop: AtomicBool,
    /// How long a command that did not run is sent again.
    budget: Duration,
}

/// Where a routed command takes its connection from.
trait Source {
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
    /// The node at `addr`, created on first use.
    fn node(&self, addr: &str) -> Result<Arc<Node>> {
        let mut nodes = self.nodes.lock();
        if let Some(node) = nodes.get(addr) {
            return Ok(Arc::clone(node));
        }
        let endpoint = self.template.at(addr)?;
        let connector = Connector::to(&endpoint, self.connect_timeout, self.response_timeout)?
            .named(&self.conn_name);
        let node = Arc::new(Node {
            pubsub: connector.resp3()?,
            pool: Elastic::new(connector, self.max_idle),
        });
        nodes.insert(addr.to_owned(), Arc::clone(&node));
        Ok(node)
    }

    /// The current master.
    pub(crate) fn master(&self) -> Arc<Node> {
        Arc::clone(&self.master.read())
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Asks the monitor to read the master from the sentinels now.
    pub(crate) fn kick(&self) {
        let _ = self.kick.try_send(());
    }

    /// A node failed (refused a connection, or a connection to it broke): its idle
    /// connections are likely dead too, and the master may be about to move.
    pub(crate) fn node_failed(&self, addr: &str) {
        if let Some(node) = self.nodes.lock().get(addr) {
            node.pool.drop_idle();
        }
        self.kick();
    }

    /// True while `addr` is the master.
    pub(crate) fn is_master(&self, addr: &str) -> bool {
        self.master.read().addr() == addr
    }

    /// The node at `addr`.
    pub(crate) fn node_at(&self, addr: &str) -> Result<Arc<Node>> {
        self.node(addr)
    }

    /// Makes `addr` the master: condemns the old master's pool and bumps the
    /// generation.
    fn install(&self, addr: &str) -> Result<()> {
        let node = self.node(addr)?;
        let old = {
            let mut master = self.master.write();
            if master.addr() == addr {
                return Ok(());
            }
            std::mem::replace(&mut *master, Arc::clone(&node))
        };
        // The new master is named before the old one is condemned, so a command that
        // finds the old pool condemned always finds the new master named: it cannot
        // take a fresh connection to the old master after this point.
        node.pool.reprieve();
        old.pool.condemn();
        self.generation.fetch_add(1, Ordering::AcqRel);
        log::info!(
            "redmutex: sentinel master {:?} moved from {} to {addr}",
            self.master_name,
            old.addr()
        );
        Ok(())
    }

    /// What sentinel `i` says the master is, on its kept connection.
    fn ask(&self, i: usize) -> Answer {
        let sentinel = &self.sentinels[i];
        let mut kept = self.sentinel_conns[i].0.lock();
        let conn = match kept.take() {
            Some(conn) => conn,
            None => {
                let connector = match self.sentinel_connector(sentinel) {
                    Ok(c) => c,
                    Err(e) => {
                        return Answer::Unreachable(RedisError::from((
                            ErrorKind::Client,
                            "bad sentinel address",
                            e.to_string(),
                        )));
                    }
                };
                match connector.connect() {
                    Ok(c) => c,
                    Err(e) => return Answer::Unreachable(e),
                }
            }
        };
        let mut conn = conn;
        let answer = self.ask_on(&mut conn, sentinel);
        // A connection whose reply stream may be out of step is not kept.
        if !matches!(answer, Answer::Unreachable(_)) {
            *kept = Some(conn);
        }
        answer
    }

    fn ask_on(&self, conn: &mut redis::Connection, sentinel: &Endpoint) -> Answer {
        let reply: RedisResult<Option<(String, u16)>> = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(&self.master_name)
            .query(conn);
        let named = match reply {
            Ok(Some((host, port))) => super::slots::join_host_port(&host, port),
            Ok(None) => return Answer::Unknown,
            Err(e)
                if e.to_string()
                    .to_ascii_lowercase()
                    .contains("unknown command") =>
            {
                return Answer::NotSentinel(format!(
                    "{} is a Redis server, not a sentinel (it does not know the SENTINEL command)",
                    sentinel.addr()
                ));
            }
            Err(e) => return Answer::Unreachable(e),
        };
        let record: RedisResult<Vec<String>> = redis::cmd("SENTINEL")
            .arg("MASTER")
            .arg(&self.master_name)
            .query(conn);
        let fields = match record {
            Ok(flat) => flat,
            Err(e) if is_connection_error(&e) => return Answer::Unreachable(e),
            // A sentinel user allowed GET-MASTER-ADDR-BY-NAME only: its word counts, with
            // no epoch to rank it by.
            Err(_) => Vec::new(),
        };
        let field = |name: &str| {
            fields
                .chunks(2)
                .find_map(|kv| (kv.len() == 2 && kv[0] == name).then_some(kv[1].as_str()))
        };
        let record = match (field("ip"), field("port").and_then(|p| p.parse().ok())) {
            (Some(host), Some(port)) => super::slots::join_host_port(host, port),
            _ => named.clone(),
        };
        Answer::Master(Report {
            epoch: field("config-epoch")
                .and_then(|e| e.parse().ok())
                .unwrap_or(0),
            failing_over: field("flags").is_some_and(|f| f.contains("failover_in_progress")),
            replicas: field("num-slaves")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0),
            record,
            named,
        })
    }

    /// Connections to one sentinel.
    fn sentinel_connector(&self, sentinel: &Endpoint) -> Result<Connector> {
        Ok(
            Connector::to(sentinel, self.connect_timeout, self.response_timeout)?
                .named(&self.conn_name),
        )
    }

    /// Whether the node at `addr` says `master` to `ROLE`.
    fn confirm(&self, addr: &str) -> std::result::Result<(), Unconfirmed> {
        let unusable = |e: &dyn std::fmt::Display| Unconfirmed::Unusable(format!("{addr}: {e}"));
        let node = self.node(addr).map_err(|e| unusable(&e))?;
        let mut conn = node.pool.connector().connect().map_err(|e| {
            if is_connection_error(&e) {
                unusable(&e)
            } else {
                Unconfirmed::Refused(e)
            }
        })?;
        let role: redis::Value = redis::cmd("ROLE")
            .query(&mut conn)
            .map_err(|e| unusable(&e))?;
        let first = match &role {
            redis::Value::Array(parts) => parts.first(),
            _ => None,
        };
        match first {
            Some(redis::Value::BulkString(b)) if b.as_slice() == b"master" => {
                node.pool.give(conn);
                Ok(())
            }
            other => Err(Unconfirmed::Unusable(format!(
                "{addr}, which is not a master (ROLE says {other:?})"
            ))),
        }
    }

    /// Asks every sentinel, and returns the first master in their ranking (see
    /// [`ranked`]) that confirms its role. `known` is a master that needs no new `ROLE`
    /// check when it ranks first.
    ///
    /// Every sentinel is asked, not the first that answers: during a failover a
    /// sentinel that has not heard of it yet names the old master, which still says
    /// `master` to `ROLE` until the sentinels reconfigure it, seconds later.
    fn find_master(&self, known: Option<&str>) -> std::result::Result<String, Box<NotFound>> {
        let mut failure = Box::new(NotFound {
            unknown_everywhere: true,
            not_sentinel: None,
            details: Vec::new(),
            unreachable: None,
            refused: None,
        });
        let mut reached = false;
        let mut reports = Vec::new();
        for (i, sentinel) in self.sentinels.iter().enumerate() {
            let at = sentinel.addr();
            match self.ask(i) {
                Answer::Master(report) => {
                    reached = true;
                    failure.unknown_everywhere = false;
                    reports.push((at, report));
                }
                Answer::Unknown => {
                    reached = true;
                    failure.details.push(format!(
                        "sentinel {at} knows no master named {:?}",
                        self.master_name
                    ));
                }
                Answer::NotSentinel(e) => {
                    failure.not_sentinel.get_or_insert(e.clone());
                    failure.details.push(e);
                }
                Answer::Unreachable(e) => {
                    failure.details.push(format!("sentinel {at}: {e}"));
                    failure.unreachable.get_or_insert(e);
                }
            }
        }
        for (addr, named_by) in ranked(&reports) {
            if known == Some(addr.as_str()) {
                return Ok(addr);
            }
            match self.confirm(&addr) {
                Ok(()) => return Ok(addr),
                Err(Unconfirmed::Unusable(e)) => {
                    failure
                        .details
                        .push(format!("sentinel {named_by} names {e}"));
                }
                Err(Unconfirmed::Refused(e)) => {
                    failure
                        .details
                        .push(format!("{addr} refused the login: {e}"));
                    failure.refused = Some((addr, e));
                    break;
                }
            }
        }
        failure.unknown_everywhere &= reached;
        if reached {
            failure.unreachable = None;
        }
        Err(failure)
    }

    /// Whether the sentinels are replacing the master, for an acquire sent in
    /// `generation` (see `replica_sync`). Asked only when the master counts no replicas
    /// or not all of them acknowledged; a master being replaced also makes the monitor
    /// ask for the new one at once, so the acquire's next try goes there.
    ///
    /// Evidence that it is being replaced: the master moved since the acquire was sent;
    /// a sentinel names another master with a configuration epoch no lower than that of
    /// any sentinel naming ours (a failover raises the epoch, so a sentinel that has not
    /// heard of it yet does not outvote one that has); or a sentinel is failing our
    /// master over right now (before the promoted replica says `master`, only its
    /// record's flags tell).
    pub(crate) fn standing(&self, generation: u64) -> Standing {
        if self.generation() != generation {
            return self.demoted(0, "the master moved while the acquire ran".into());
        }
        let current = self.master().addr().to_owned();
        let reports: Vec<(String, Report)> = (0..self.sentinels.len())
            .filter_map(|i| match self.ask(i) {
                Answer::Master(r) => Some((self.sentinels[i].addr(), r)),
                _ => None,
            })
            .collect();
        if reports.is_empty() {
            return Standing::Unknown;
        }
        let ours = reports
            .iter()
            .filter(|(_, r)| r.named == current)
            .map(|(_, r)| r.epoch)
            .max();
        let known = reports
            .iter()
            .filter(|(_, r)| r.record == current)
            .map(|(_, r)| r.replicas)
            .max()
            .unwrap_or(0);
        for (at, r) in &reports {
            if r.named != current && ours.is_none_or(|e| r.epoch >= e) {
                let why = format!(
                    "sentinel {at} names {} as the master (config epoch {}), not {current}",
                    r.named, r.epoch
                );
                return self.demoted(known, why);
            }
            if r.record == current && r.failing_over {
                let why = format!("sentinel {at} is failing {current} over");
                return self.demoted(known, why);
            }
        }
        Standing::Settled
    }

    fn demoted(&self, replicas: u64, why: String) -> Standing {
        self.kick();
        Standing::Demoted { replicas, why }
    }

    /// Reads the master from the sentinels and installs it if it moved.
    fn refresh(&self) {
        let current = self.master().addr().to_owned();
        match self.find_master(Some(&current)) {
            Ok(addr) if addr != current => {
                if let Err(e) = self.install(&addr) {
                    log::warn!("redmutex: cannot use the new sentinel master {addr}: {e}");
                }
            }
            Ok(_) => {}
            Err(e) => log::warn!(
                "redmutex: the sentinels named no usable master: {}",
                e.details.join("; ")
            ),
        }
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

    /// Runs `f` on the master, sending it again only where the answer says it did not
    /// run (see the module docs).
    fn route<T>(
        &self,
        budget: Duration,
        source: &mut dyn Source,
        f: &mut dyn FnMut(&mut redis::Connection) -> RedisResult<T>,
    ) -> RedisResult<T> {
        let started = Instant::now();
        let mut pauses = 0;
        loop {
            let node = self.master();
            let mut conn = match source.take(&node) {
                Ok(conn) => conn,
                // Every pooled connection to the master stayed busy: nothing was sent,
                // and the master is not known to have failed.
                Err(e) if source.timed_out() => return Err(e),
                Err(e) => {
                    // Not even connected: nothing was sent.
                    self.node_failed(node.addr());
                    if self.pause(started, budget, &mut pauses) {
                        continue;
                    }
                    return Err(e);
                }
            };
            let err = match f(&mut conn) {
                Ok(value) => {
                    source.give(&node, conn);
                    return Ok(value);
                }
                Err(e) => e,
            };
            if is_connection_error(&err) {
                // The command may have run and its reply be what went missing: it is
                // never sent again.
                self.node_failed(node.addr());
                return Err(err);
            }
            match err.kind() {
                ErrorKind::Server(ServerErrorKind::ReadOnly) => {
                    // A replica now: every connection to it is useless for writes. A
                    // script fails at its first write, before it changed anything.
                    node.pool.drop_idle();
                    self.kick();
                }
                ErrorKind::Server(ServerErrorKind::MasterDown | ServerErrorKind::BusyLoading) => {
                    source.give(&node, conn);
                    self.kick();
                }
                _ => {
                    source.give(&node, conn);
                    return Err(err);
                }
            }
            if !self.pause(started, budget, &mut pauses) {
                return Err(err);
            }
        }
    }

    /// A best-effort `PUBLISH` on `addr`, for the listener's control channel.
    pub(crate) fn publish_on(&self, addr: &str, channel: &str, message: &str) -> Result<()> {
        let node = self.node_at(addr)?;
        let mut conn = node.pool.take()?;
        redis::cmd("PUBLISH")
            .arg(channel)
            .arg(message)
            .query::<i64>(&mut conn)?;
        node.pool.give(conn);
        Ok(())
    }
}

/// The masters the sentinels name, best first, each with the first sentinel naming
/// it: by the highest configuration epoch among the sentinels naming it (a failover
/// raises the epoch, so the newest word wins), then by how many sentinels name it, then
/// in the order of the sentinel list.
fn ranked(reports: &[(String, Report)]) -> Vec<(String, String)> {
    // (master, first sentinel naming it, best epoch, votes), in first-seen order.
    let mut masters: Vec<(String, String, u64, usize)> = Vec::new();
    for (at, r) in reports {
        match masters.iter_mut().find(|m| m.0 == r.named) {
            Some(m) => {
                m.2 = m.2.max(r.epoch);
                m.3 += 1;
            }
            None => masters.push((r.named.clone(), at.clone(), r.epoch, 1)),
        }
    }
    // A stable sort keeps the list order among equals.
    masters.sort_by(|a, b| b.2.cmp(&a.2).then(b.3.cmp(&a.3)));
    masters.into_iter().map(|m| (m.0, m.1)).collect()
}

/// A sentinel client's topology: the shared state and the monitor thread.
#[derive(Debug)]
pub(crate) struct Sentinel {
    shared: Arc<Shared>,
    monitor: Mutex<Option<JoinHandle<()>>>,
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
        let (kick, kicked) = bounded(1);
        let sentinel_conns = sentinels.iter().map(|_| KeptConn::default()).collect();
        // The master slot needs a node before the first answer; the first sentinel's
        // address stands in and is replaced before anything is routed.
        let placeholder = Connector::to(first, config.connection_timeout, config.response_timeout)?;
        let shared = Arc::new(Shared {
            master_name,
            sentinels,
            template,
            connect_timeout: config.connection_timeout,
            response_timeout: config.response_timeout,
            max_idle: config.pool_max_size as usize,
            conn_name: conn_name.to_owned(),
            master: RwLock::new(Arc::new(Node {
                pubsub: placeholder.resp3()?,
                pool: Elastic::new(placeholder, 0),
            })),
            nodes: Mutex::new(HashMap::new()),
            sentinel_conns,
            generation: AtomicU64::new(0),
            kick,
            stop: AtomicBool::new(false),
            budget: config.retry_max_delay.saturating_mul(config.retry_attempts),
        });
        let addr = first_master(&shared)?;
        let node = shared.node(&addr)?;
        // Log in once and PING, so a refused login or a missing password is reported as
        // such when the client is created.
        let shown = format!("master {:?} at {addr}", shared.master_name);
        let conn = node.pool.connector().open_checked(&shown)?;
        node.pool.give(conn);
        *shared.master.write() = node;
        let thread_shared = Arc::clone(&shared);
        let interval = config.sentinel.scan_interval;
        let monitor = std::thread::Builder::new()
            .name("redmutex-sentinel".into())
            .spawn(move || monitor(&thread_shared, &kicked, interval))?;
        Ok(Self {
            shared,
            monitor: Mutex::new(Some(monitor)),
        })
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Runs `f` on a pooled connection to the master.
    pub(crate) fn run<T>(
        &self,
        key: &str,
        mut f: impl FnMut(&mut redis::Connection) -> RedisResult<T>,
    ) -> Result<T> {
        let budget = self.shared.budget;
        let mut pooled = Pooled::default();
        self.shared
            .route(budget, &mut pooled, &mut f)
            .map_err(|e| pooled.error(key, e))
    }

    /// A connection to the master, driven by the caller (see [`Checkout`]): an idle
    /// one only when `wait` is `None`, else an idle or a new one, waiting at most `wait`
    /// for a turn ([`Error::PoolTimeout`] after that).
    pub(crate) fn checkout(&self, key: &str, wait: Option<Duration>) -> Result<Option<Checkout>> {
        let node = self.shared.master();
        let conn = match wait {
            None => node.pool.take_idle(),
            Some(wait) => Some(node.pool.take_within(wait).map_err(|not| match not {
                NotTaken::Timeout(e) => e,
                NotTaken::Connect(e) => {
                    self.shared.node_failed(node.addr());
                    Error::from_redis(key, e)
                }
            })?),
        };
        let response = self.shared.response_timeout;
        Ok(conn.map(|conn| Checkout::of_node(conn, node, response)))
    }

    /// The watchdog's own connection to the master, with these timeouts.
    pub(crate) fn dedicated(&self, connect: Duration, response: Duration) -> Dedicated {
        Dedicated {
            shared: Arc::clone(&self.shared),
            own: Own {
                conn: None,
                connect,
                response,
            },
        }
    }

    /// Stops the monitor and waits for it. Idempotent.
    pub(crate) fn shutdown(&self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.kick();
        if let Some(thread) = self.monitor.lock().take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The master at start: the sentinels are asked until one names a confirmed master,
/// within the retry budget when they name one that is not (yet) confirmed (a failover
/// in progress). Answers that no retry changes fail at once.
fn first_master(shared: &Shared) -> Result<String> {
    let started = Instant::now();
    let mut pauses = 0;
    loop {
        let failure = match shared.find_master(None) {
            Ok(addr) => return Ok(addr),
            Err(failure) => failure,
        };
        if let Some(e) = failure.not_sentinel {
            return Err(Error::Config(e));
        }
        if failure.unknown_everywhere {
            return Err(Error::Config(format!(
                "no sentinel monitors a master named {:?} ({})",
                shared.master_name,
                failure.details.join("; ")
            )));
        }
        if let Some((addr, source)) = failure.refused {
            // A refused login, a database the master does not have, or another refusal.
            let shown = format!("master {:?} at {addr}", shared.master_name);
            return Err(shared
                .node(&addr)?
                .pool
                .connector()
                .first_failure(&shown, source));
        }
        if let Some(source) = failure.unreachable {
            let sentinels: Vec<String> = shared.sentinels.iter().map(Endpoint::addr).collect();
            let address = format!("sentinels {}", sentinels.join(", "));
            // Every sentinel logs in with the same credentials (sentinelUsername,
            // sentinelPassword), so one refusal is the answer for all of them.
            if crate::address::is_login_refusal(&source) {
                return Err(Error::Auth {
                    address,
                    user: shared.sentinels[0].user().to_owned(),
                    source: Box::new(source),
                });
            }
            return Err(Error::Connect { address, source });
        }
        if !shared.pause(started, shared.budget, &mut pauses) {
            return Err(Error::Redis(RedisError::from((
                ErrorKind::Io,
                "the sentinels named no live master",
                failure.details.join("; "),
            ))));
        }
    }
}

/// The monitor thread: listens for `+switch-master` on one sentinel, and asks the
/// sentinels every `interval` and soon after a kick.
fn monitor(shared: &Shared, kicked: &Receiver<()>, interval: Duration) {
    let mut events: Option<redis::Connection> = None;
    let mut last = Instant::now();
    loop {
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        if events.is_none() {
            events = subscribe_events(shared);
        }
        let mut check = false;
        match events.as_mut() {
            Some(conn) => match next_event(conn) {
                Ok(Some(payload)) => {
                    // "<name> <old ip> <old port> <new ip> <new port>"
                    if payload.split(' ').next() == Some(shared.master_name.as_str()) {
                        log::debug!("redmutex: sentinel event {SWITCH_MASTER} {payload}");
                        check = true;
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    // The sentinel may be the one that went away; another is tried,
                    // and the master asked for at once in case an event was missed.
                    log::debug!("redmutex: sentinel event connection lost: {e}");
                    events = None;
                    check = true;
                }
            },
            None => match kicked.recv_timeout(TICK) {
                Ok(()) => check = true,
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
            },
        }
        match kicked.try_recv() {
            Ok(()) => check = true,
            Err(TryRecvError::Empty) => {}
            Err(TryRecvError::Disconnected) => return,
        }
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        if check || last.elapsed() >= interval {
            last = Instant::now();
            shared.refresh();
        }
    }
}

/// A connection to the first sentinel that accepts a `+switch-master` subscription.
fn subscribe_events(shared: &Shared) -> Option<redis::Connection> {
    for sentinel in &shared.sentinels {
        let connected = shared
            .sentinel_connector(sentinel)
            .map_err(|e| e.to_string())
            .and_then(|c| c.connect().map_err(|e| e.to_string()));
        let mut conn = match connected {
            Ok(conn) => conn,
            Err(e) => {
                log::debug!("redmutex: sentinel {}: {e}", sentinel.addr());
                continue;
            }
        };
        let mut pubsub = conn.as_pubsub();
        let subscribed = pubsub.subscribe(SWITCH_MASTER);
        // Dropping a `PubSub` unsubscribes (redis-rs's `exit_pubsub`); the connection
        // keeps the subscription instead.
        std::mem::forget(pubsub);
        match subscribed.and_then(|()| conn.set_read_timeout(Some(TICK))) {
            Ok(()) => return Some(conn),
            Err(e) => log::debug!("redmutex: sentinel {}: {e}", sentinel.addr()),
        }
    }
    None
}

/// The payload of the next `+switch-master` event, or `None` after [`TICK`] without one.
fn next_event(conn: &mut redis::Connection) -> RedisResult<Option<String>> {
    let mut pubsub = conn.as_pubsub();
    let got = pubsub.get_message();
    std::mem::forget(pubsub);
    match got {
        Ok(msg) => Ok(msg.get_payload::<String>().ok()),
        Err(e) if e.is_timeout() => Ok(None),
        Err(e) => Err(e),
    }
}

/// The watchdog's connection to the master, outside the pool.
struct Own {
    conn: Option<(String, Leased)>,
    connect: Duration,
    response: Duration,
}

impl Source for Own {
    fn take(&mut self, node: &Node) -> RedisResult<Leased> {
        match self.conn.take() {
            Some((addr, conn)) if addr == node.addr() && redis::ConnectionLike::is_open(&conn) => {
                Ok(conn)
            }
            _ => node
                .pool
                .connector()
                .with_timeouts(self.connect, self.response)
                .connect()
                .map(Leased::from),
        }
    }

    fn give(&mut self, node: &Node, conn: Leased) {
        self.conn = Some((node.addr().to_owned(), conn));
    }
}

/// The watchdog's connection, following the master.
pub(crate) struct Dedicated {
    shared: Arc<Shared>,
    own: Own,
}

impl std::fmt::Debug for Dedicated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dedicated")
            .field("connected", &self.own.conn.as_ref().map(|(a, _)| a))
            .finish_non_exhaustive()
    }
}

impl Dedicated {
    /// Runs `f` on the master, never waiting (the watchdog retries a failed renewal
    /// itself, a quarter period later).
    pub(crate) fn run<T>(
        &mut self,
        mut f: impl FnMut(&mut redis::Connection) -> RedisResult<T>,
    ) -> RedisResult<T> {
        self.shared.route(Duration::ZERO, &mut self.own, &mut f)
    }

    /// Drops the connection (its replies made no sense).
    pub(crate) fn reset(&mut self) {
        self.own.conn = None;
    }
}
