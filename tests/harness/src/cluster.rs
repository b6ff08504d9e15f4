//! A local Redis Cluster on 127.0.0.1 for topology tests.
//!
//! [`shared`] starts 3 masters with one replica each, once per test binary, on first use;
//! [`broken`] is a separate 3-master cluster (no replicas) with slots
//! [`BROKEN_UNCOVERED`] assigned to nobody ([`broken_strict`] the same with full coverage
//! required, so the whole cluster is down). Both live until the test process exits (their
//! servers are supervised, see `supervised.rs`). [`Cluster::start`] makes a private one
//! that dies with the value.
//!
//! Roles move (failovers), so nodes are never addressed by a fixed role: ask
//! [`Cluster::nodes`], [`Cluster::master_for_key`], [`Cluster::replica_of`] for the current
//! truth, which is read from the servers themselves (`CLUSTER NODES` on every node, and
//! only once all of them agree).
//!
//! Tests that change the topology (kill, failover, migration, SIGSTOP) must not run at the
//! same time as tests that assume it is stable: mark them `#[serial(cluster)]` (readers
//! `#[parallel(cluster)]`) and hold a [`Cluster::disrupt`] guard, which heals the cluster
//! (restarts killed nodes, resumes stopped ones, finishes half-done migrations, waits for
//! health) when taken and when dropped, even when the test panics.

use std::ffi::OsString;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use super::supervised::{self, RedisProcess, connect, info, wait_for, wait_for_or};

/// Number of hash slots.
pub const SLOTS: u16 = 16384;

/// The slots nobody serves in [`broken`].
pub const BROKEN_UNCOVERED: RangeInclusive<u16> = 100..=199;

/// Bound for a failover or migration to be seen by every node.
const CHANGE_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound for the cluster to become healthy (creation, rejoin after a restart).
const HEALTH_TIMEOUT: Duration = Duration::from_secs(60);

// ------------------------------------------------------------------------- hash slots

/// CRC16/XMODEM (poly 0x1021, init 0), the checksum Redis Cluster uses for key slots.
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The hash slot of `key`: CRC16 of the hash tag (the bytes between the first `{` and
/// the first `}` after it, when there is at least one) or of the whole key, mod 16384.
pub fn key_slot(key: impl AsRef<[u8]>) -> u16 {
    let key = key.as_ref();
    let hashed = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    crc16(hashed) % SLOTS
}

/// A key `<prefix><n>` (smallest `n`) that hashes to `slot`.
pub fn key_for_slot(slot: u16, prefix: &str) -> String {
    assert!(slot < SLOTS, "slot {slot} out of range");
    (0u64..)
        .map(|n| format!("{prefix}{n}"))
        .find(|k| key_slot(k) == slot)
        .expect("some key hashes to every slot")
}

// ------------------------------------------------------------------------ public view

/// A node's role as the cluster sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// A master (with or without slots).
    Master,
    /// A replica of the master with this node id.
    Replica {
        /// Node id of its master.
        master_id: String,
    },
}

/// One node as the cluster currently sees it (a snapshot: roles change on failover).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterNode {
    /// The harness's own index for the process (stable across roles and restarts).
    pub index: usize,
    /// Cluster node id (stable across restarts: it lives in `nodes.conf`).
    pub id: String,
    /// Client port on 127.0.0.1.
    pub port: u16,
    /// Current role.
    pub role: Role,
    /// Slot ranges served (masters only).
    pub slots: Vec<RangeInclusive<u16>>,
    /// Flagged `fail` by the cluster (it is down).
    pub failed: bool,
}

impl ClusterNode {
    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A raw connection to this node (no cluster routing).
    pub fn conn(&self) -> redis::Connection {
        connect(self.port).unwrap_or_else(|e| panic!("cannot connect to node {}: {e}", self.port))
    }

    /// True for a master.
    pub fn is_master(&self) -> bool {
        self.role == Role::Master
    }

    /// True when `slot` is in one of this node's ranges.
    pub fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|r| r.contains(&slot))
    }
}

/// Kinds of `CLUSTER FAILOVER`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failover {
    /// Coordinated with the master (no write is lost).
    Default,
    /// `FORCE`: without the master's agreement, with an election.
    Force,
    /// `TAKEOVER`: without agreement and without election.
    Takeover,
}

// ---------------------------------------------------------------------- parsed state

/// One line of `CLUSTER NODES`, normalised for comparison between nodes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Entry {
    id: String,
    port: u16,
    master: bool,
    master_id: Option<String>,
    slots: Vec<(u16, u16)>,
    failed: bool,
    /// `fail?`, `handshake`, `noaddr`: a node in flux. Not part of the comparison.
    unsettled: Vec<String>,
}

/// One node's `CLUSTER NODES`.
#[derive(Clone, Debug)]
struct View {
    entries: Vec<Entry>,
    /// `[slot->-id]` on the reporting node.
    migrating: Vec<(u16, String)>,
    /// `[slot-<-id]` on the reporting node.
    importing: Vec<(u16, String)>,
}

impl View {
    fn parse(text: &str) -> Result<Self, String> {
        let mut entries = Vec::new();
        let mut migrating = Vec::new();
        let mut importing = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 8 {
                return Err(format!("short CLUSTER NODES line {line:?}"));
            }
            let addr = f[1].split(['@', ',']).next().unwrap_or_default();
            let port = addr
                .rsplit_once(':')
                .and_then(|(_, p)| p.parse().ok())
                .ok_or_else(|| format!("bad address in {line:?}"))?;
            let flags: Vec<&str> = f[2].split(',').collect();
            let myself = flags.contains(&"myself");
            let mut slots = Vec::new();
            for s in &f[8..] {
                if let Some(inner) = s.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
                    if let Some((slot, to)) = inner.split_once("->-") {
                        if myself {
                            migrating
                                .push((slot.parse().map_err(|_| line.to_owned())?, to.to_owned()));
                        }
                    } else if let Some((slot, from)) = inner.split_once("-<-")
                        && myself
                    {
                        importing
                            .push((slot.parse().map_err(|_| line.to_owned())?, from.to_owned()));
                    }
                    continue;
                }
                let (a, b) = s.split_once('-').unwrap_or((s, s));
                let a = a
                    .parse()
                    .map_err(|_| format!("bad slot {s:?} in {line:?}"))?;
                let b = b
                    .parse()
                    .map_err(|_| format!("bad slot {s:?} in {line:?}"))?;
                slots.push((a, b));
            }
            slots.sort_unstable();
            entries.push(Entry {
                id: f[0].to_owned(),
                port,
                master: flags.contains(&"master"),
                master_id: (f[3] != "-").then(|| f[3].to_owned()),
                slots,
                failed: flags.contains(&"fail"),
                unsettled: flags
                    .iter()
                    .filter(|fl| matches!(**fl, "fail?" | "handshake" | "noaddr"))
                    .map(|fl| (*fl).to_owned())
                    .collect(),
            });
        }
        entries.sort();
        Ok(Self {
            entries,
            migrating,
            importing,
        })
    }

    /// The part all nodes must agree on.
    fn comparable(&self) -> Vec<Entry> {
        self.entries
            .iter()
            .map(|e| Entry {
                unsettled: Vec::new(),
                ..e.clone()
            })
            .collect()
    }

    fn entry(&self, id: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.id == id)
    }

    fn owner(&self, slot: u16) -> Option<&Entry> {
        self.entries
            .iter()
            .find(|e| e.master && e.slots.iter().any(|&(a, b)| (a..=b).contains(&slot)))
    }
}

fn query<T: redis::FromRedisValue>(port: u16, cmd: &redis::Cmd) -> Result<T, String> {
    let mut conn = connect(port).map_err(|e| format!("connect {port}: {e}"))?;
    cmd.query(&mut conn).map_err(|e| format!("{port}: {e}"))
}

fn view_of(port: u16) -> Result<View, String> {
    let text: String = query(port, redis::cmd("CLUSTER").arg("NODES"))?;
    View::parse(&text)
}

fn cluster_info(port: u16) -> Result<Vec<(String, String)>, String> {
    let text: String = query(port, redis::cmd("CLUSTER").arg("INFO"))?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect())
}

fn field<'a>(pairs: &'a [(String, String)], key: &str) -> &'a str {
    pairs
        .iter()
        .find_map(|(k, v)| (k == key).then_some(v.as_str()))
        .unwrap_or("")
}

// --------------------------------------------------------------------------- cluster

/// What to start.
#[derive(Clone, Debug)]
pub struct ClusterSpec {
    /// Masters (at least 3, as `redis-cli --cluster create` demands).
    pub masters: usize,
    /// Replicas per master.
    pub replicas: usize,
    /// `cluster-node-timeout` in ms: how long a node may be silent before it counts as
    /// failing. A SIGKILLed master is replaced about 1.5–2.5 s after this (3.7–4.5 s
    /// with the default 2000 ms on 2 cores).
    pub node_timeout_ms: u64,
    /// Slots to leave unassigned after creation (`CLUSTER DELSLOTSRANGE` on every node).
    pub uncovered: Option<RangeInclusive<u16>>,
    /// `cluster-require-full-coverage`.
    pub require_full_coverage: bool,
    /// Serve TLS too (a TLS port per node, the cluster bus and replication over TLS)
    /// with these files; the plain ports stay open for the harness.
    pub tls: Option<ClusterTls>,
}

/// Certificate files for a cluster that speaks TLS (PEM paths).
#[derive(Clone, Debug)]
pub struct ClusterTls {
    /// The nodes' certificate.
    pub cert: PathBuf,
    /// The nodes' private key.
    pub key: PathBuf,
    /// The CA that signed the certificate.
    pub ca: PathBuf,
}

impl Default for ClusterSpec {
    fn default() -> Self {
        Self {
            masters: 3,
            replicas: 1,
            node_timeout_ms: 2000,
            uncovered: None,
            require_full_coverage: true,
            tls: None,
        }
    }
}

/// A running cluster (see the module docs).
pub struct Cluster {
    spec: ClusterSpec,
    root: PathBuf,
    procs: Mutex<Vec<RedisProcess>>,
    /// Each node's TLS port, by harness index (empty without TLS).
    tls_ports: Vec<u16>,
    disrupting: Mutex<()>,
    yaml: OnceLock<PathBuf>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("ports", &self.ports())
            .finish_non_exhaustive()
    }
}

/// The shared 3 + 3 cluster of this test binary, started on first use.
pub fn shared() -> &'static Cluster {
    static SHARED: OnceLock<Cluster> = OnceLock::new();
    SHARED.get_or_init(|| Cluster::start(ClusterSpec::default()))
}

/// The shared broken cluster of this test binary: 3 masters, no replicas, slots
/// [`BROKEN_UNCOVERED`] unassigned, `cluster-require-full-coverage no`: keys in the
/// hole get `CLUSTERDOWN Hash slot not served`, the other slots work.
pub fn broken() -> &'static Cluster {
    static BROKEN: OnceLock<Cluster> = OnceLock::new();
    BROKEN.get_or_init(|| Cluster::start(broken_spec(false)))
}

/// Like [`broken`] with `cluster-require-full-coverage yes`: `cluster_state:fail`, every
/// key gets `CLUSTERDOWN`. (A separate instance: `CONFIG SET` of that option at run time
/// does not change `cluster_state` until some cluster event makes the nodes re-evaluate
/// it.)
pub fn broken_strict() -> &'static Cluster {
    static BROKEN: OnceLock<Cluster> = OnceLock::new();
    BROKEN.get_or_init(|| Cluster::start(broken_spec(true)))
}

fn broken_spec(require_full_coverage: bool) -> ClusterSpec {
    ClusterSpec {
        replicas: 0,
        uncovered: Some(BROKEN_UNCOVERED),
        require_full_coverage,
        ..ClusterSpec::default()
    }
}

impl Cluster {
    /// Starts the servers, creates the cluster with `redis-cli --cluster create` and
    /// waits until it is healthy.
    pub fn start(spec: ClusterSpec) -> Self {
        assert!(spec.masters >= 3, "redis-cli needs at least 3 masters");
        let root = supervised::harness_dir("cluster");
        let n = spec.masters * (1 + spec.replicas);
        let mut procs = Vec::with_capacity(n);
        let mut tls_ports = Vec::new();
        for i in 0..n {
            let (proc, tls_port) = start_node(&root, i, &spec);
            procs.push(proc);
            tls_ports.extend(tls_port);
        }
        let cluster = Self {
            spec,
            root,
            procs: Mutex::new(procs),
            tls_ports,
            disrupting: Mutex::new(()),
            yaml: OnceLock::new(),
        };
        cluster.create();
        cluster
    }

    fn create(&self) {
        let ports = self.ports();
        let cli_path = &redmutex::admin::servers::selected_or_panic().cli;
        let mut cli = Command::new(cli_path);
        // Over TLS the nodes meet on their TLS ports, where their cluster bus listens.
        let meet = match &self.spec.tls {
            None => ports.clone(),
            Some(tls) => {
                cli.arg("--tls").arg("--cacert").arg(&tls.ca);
                self.tls_ports.clone()
            }
        };
        let out = cli
            .arg("--cluster")
            .arg("create")
            .args(meet.iter().map(|p| format!("127.0.0.1:{p}")))
            .arg("--cluster-replicas")
            .arg(self.spec.replicas.to_string())
            .arg("--cluster-yes")
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", cli_path.display()));
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && text.contains("All 16384 slots covered"),
            "redis-cli --cluster create failed ({}):\n{text}",
            out.status
        );
        if let Some(range) = self.spec.uncovered.clone() {
            // Every node must forget the owner, or gossip would keep the slots assigned.
            wait_for(HEALTH_TIMEOUT, "all nodes to know each other", || {
                for &p in &ports {
                    let known = cluster_info(p)?;
                    if field(&known, "cluster_known_nodes") != ports.len().to_string() {
                        return Err(format!(
                            "{p} knows {}",
                            field(&known, "cluster_known_nodes")
                        ));
                    }
                }
                Ok(())
            });
            for &p in &ports {
                // DELSLOTSRANGE is 7.0+; DELSLOTS with every slot does the same on 6.2.
                let mut del = redis::cmd("CLUSTER");
                if crate::server().has_7_0_options() {
                    del.arg("DELSLOTSRANGE")
                        .arg(*range.start())
                        .arg(*range.end());
                } else {
                    del.arg("DELSLOTS").arg(range.clone().collect::<Vec<u16>>());
                }
                let _: () = query(p, &del).unwrap_or_else(|e| panic!("CLUSTER DELSLOTS: {e}"));
            }
        }
        self.wait_healthy();
    }

    /// Client ports of all nodes, by harness index.
    pub fn ports(&self) -> Vec<u16> {
        self.procs().iter().map(RedisProcess::port).collect()
    }

    /// Every node's TLS port (empty without TLS).
    pub fn tls_ports(&self) -> Vec<u16> {
        self.tls_ports.clone()
    }

    /// `rediss://127.0.0.1:<tls port>` of every node (empty without TLS).
    pub fn tls_urls(&self) -> Vec<String> {
        self.tls_ports
            .iter()
            .map(|p| format!("rediss://127.0.0.1:{p}/"))
            .collect()
    }

    /// `redis://127.0.0.1:<port>` of every node (seeds for a cluster client).
    pub fn urls(&self) -> Vec<String> {
        self.ports()
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect()
    }

    /// The spec it was started with.
    pub fn spec(&self) -> &ClusterSpec {
        &self.spec
    }

    /// The directory holding the nodes' directories.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn procs(&self) -> MutexGuard<'_, Vec<RedisProcess>> {
        self.procs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// (server pid, supervisor pid) of every running node.
    pub fn pids(&self) -> Vec<(u32, u32)> {
        self.procs()
            .iter()
            .filter_map(|p| Some((p.pid()?, p.supervisor_pid()?)))
            .collect()
    }

    /// The server pid of `node`, `None` when it was killed.
    pub fn pid(&self, node: &ClusterNode) -> Option<u32> {
        self.procs()[node.index].pid()
    }

    /// Ports of nodes whose process runs and is not stopped.
    fn up_ports(&self) -> Vec<u16> {
        self.procs()
            .iter()
            .filter(|p| p.is_up())
            .map(RedisProcess::port)
            .collect()
    }

    fn index_of(&self, port: u16) -> usize {
        self.procs()
            .iter()
            .position(|p| p.port() == port)
            .unwrap_or_else(|| panic!("port {port} is not a node of this cluster"))
    }

    fn to_public(&self, views: &View) -> Vec<ClusterNode> {
        views
            .entries
            .iter()
            .map(|e| ClusterNode {
                index: self.index_of(e.port),
                id: e.id.clone(),
                port: e.port,
                role: match (&e.master_id, e.master) {
                    (Some(m), false) => Role::Replica {
                        master_id: m.clone(),
                    },
                    _ => Role::Master,
                },
                slots: e.slots.iter().map(|&(a, b)| a..=b).collect(),
                failed: e.failed,
            })
            .collect()
    }

    /// Every running node's view, once they all agree (ignoring `fail?` flags).
    fn agreed_view(&self, what: &str) -> View {
        wait_for(CHANGE_TIMEOUT, what, || {
            let ports = self.up_ports();
            let mut first: Option<(u16, View)> = None;
            for p in ports {
                let v = view_of(p)?;
                match &first {
                    None => first = Some((p, v)),
                    Some((p0, v0)) if v0.comparable() != v.comparable() => {
                        return Err(format!(
                            "{p0} and {p} disagree:\n{:?}\n{:?}",
                            v0.comparable(),
                            v.comparable()
                        ));
                    }
                    Some(_) => {}
                }
            }
            first
                .map(|(_, v)| v)
                .ok_or_else(|| "no node is up".to_owned())
        })
    }

    /// All nodes, as every running node agrees they are (waits for agreement).
    pub fn nodes(&self) -> Vec<ClusterNode> {
        let view = self.agreed_view("the nodes to agree on the topology");
        self.to_public(&view)
    }

    /// `node`'s own view of the cluster right now (no agreement needed).
    pub fn nodes_seen_by(&self, node: &ClusterNode) -> Vec<ClusterNode> {
        let view = view_of(node.port).unwrap_or_else(|e| panic!("CLUSTER NODES: {e}"));
        self.to_public(&view)
    }

    /// Masters that serve slots, in slot order.
    pub fn masters(&self) -> Vec<ClusterNode> {
        let mut m: Vec<_> = self
            .nodes()
            .into_iter()
            .filter(|n| n.is_master() && !n.slots.is_empty() && !n.failed)
            .collect();
        m.sort_by_key(|n| n.slots.first().map(|r| *r.start()));
        m
    }

    /// All replicas.
    pub fn replicas(&self) -> Vec<ClusterNode> {
        self.nodes()
            .into_iter()
            .filter(|n| !n.is_master())
            .collect()
    }

    /// The master serving `slot`. Panics when the slot is unassigned.
    pub fn master_for_slot(&self, slot: u16) -> ClusterNode {
        self.nodes()
            .into_iter()
            .find(|n| n.is_master() && n.serves(slot))
            .unwrap_or_else(|| panic!("no master serves slot {slot}"))
    }

    /// The master serving `key`'s slot.
    pub fn master_for_key(&self, key: impl AsRef<[u8]>) -> ClusterNode {
        self.master_for_slot(key_slot(key))
    }

    /// The (first) replica of `master`, as the cluster sees it now.
    pub fn replica_of(&self, master: &ClusterNode) -> ClusterNode {
        self.nodes()
            .into_iter()
            .find(|n| {
                matches!(&n.role, Role::Replica { master_id } if *master_id == master.id)
                    && !n.failed
            })
            .unwrap_or_else(|| panic!("master {} has no live replica", master.port))
    }

    /// The node with this id.
    pub fn node_by_id(&self, id: &str) -> ClusterNode {
        self.nodes()
            .into_iter()
            .find(|n| n.id == id)
            .unwrap_or_else(|| panic!("no node {id}"))
    }

    /// A raw connection to 127.0.0.1:`port`.
    pub fn conn(&self, port: u16) -> redis::Connection {
        connect(port).unwrap_or_else(|e| panic!("cannot connect to node {port}: {e}"))
    }

    // ----------------------------------------------------------------- faults

    /// SIGKILLs `node` and waits until its process is gone (no cluster wait).
    pub fn kill(&self, node: &ClusterNode) {
        self.procs()[node.index].kill();
    }

    /// SIGKILLs `master`, then waits until its replica is promoted: every surviving node
    /// sees the replica as master of the old master's slots and `cluster_state:ok`.
    /// Returns the new master. The old node stays down until [`restart`](Self::restart).
    pub fn kill_master(&self, master: &ClusterNode) -> ClusterNode {
        assert!(
            master.is_master(),
            "kill_master: {} is not a master",
            master.port
        );
        let replica = self.replica_of(master);
        self.kill(master);
        self.wait_promoted(&replica, master, false)
    }

    /// `CLUSTER FAILOVER [FORCE|TAKEOVER]` on `replica`; waits until every node agrees
    /// that it is master of its old master's slots and the old master is its replica.
    /// Returns the new master.
    pub fn failover(&self, replica: &ClusterNode, kind: Failover) -> ClusterNode {
        let Role::Replica { master_id } = &replica.role else {
            panic!("failover: {} is not a replica", replica.port);
        };
        let master = self.node_by_id(master_id);
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("FAILOVER");
        match kind {
            Failover::Default => {}
            Failover::Force => {
                cmd.arg("FORCE");
            }
            Failover::Takeover => {
                cmd.arg("TAKEOVER");
            }
        }
        let _: () = query(replica.port, &cmd).unwrap_or_else(|e| panic!("CLUSTER FAILOVER: {e}"));
        self.wait_promoted(replica, &master, true)
    }

    fn wait_promoted(
        &self,
        replica: &ClusterNode,
        old: &ClusterNode,
        old_follows: bool,
    ) -> ClusterNode {
        let what = format!(
            "replica {} to take over slots {:?} from {}",
            replica.port, old.slots, old.port
        );
        let wanted: Vec<(u16, u16)> = old.slots.iter().map(|r| (*r.start(), *r.end())).collect();
        wait_for(CHANGE_TIMEOUT, &what, || {
            for p in self.up_ports() {
                let v = view_of(p)?;
                let e = v
                    .entry(&replica.id)
                    .ok_or(format!("{p} does not know it"))?;
                if !e.master || e.slots != wanted {
                    return Err(format!("{p} sees it as {e:?}"));
                }
                if old_follows {
                    let o = v
                        .entry(&old.id)
                        .ok_or(format!("{p} forgot the old master"))?;
                    if o.master || o.master_id.as_deref() != Some(replica.id.as_str()) {
                        return Err(format!("{p} sees the old master as {o:?}"));
                    }
                }
                let ci = cluster_info(p)?;
                if field(&ci, "cluster_state") != "ok" {
                    return Err(format!(
                        "{p}: cluster_state {}",
                        field(&ci, "cluster_state")
                    ));
                }
            }
            Ok(())
        });
        self.node_by_id(&replica.id)
    }

    /// Starts a killed node again on its port with its `nodes.conf`; it rejoins (a
    /// replaced master as a replica of its successor). Does not wait for health.
    pub fn restart(&self, node: &ClusterNode) {
        self.procs()[node.index].restart();
    }

    /// SIGSTOPs `node` (it stops answering; after `node_timeout_ms` the cluster flags it).
    pub fn stop(&self, node: &ClusterNode) {
        self.procs()[node.index].stop();
    }

    /// SIGCONTs a stopped node.
    pub fn cont(&self, node: &ClusterNode) {
        self.procs()[node.index].cont();
    }

    // -------------------------------------------------------------- migration

    /// Moves `slot` with its keys to master `to` (IMPORTING/MIGRATING, MIGRATE, SETSLOT
    /// NODE) and waits until every node agrees.
    pub fn migrate_slot(&self, slot: u16, to: &ClusterNode) {
        let m = self.begin_migration(slot, to);
        m.move_keys();
        m.finish();
    }

    /// Puts `slot` into the migrating state towards `to` (target IMPORTING, then source
    /// MIGRATING) and returns a handle to move keys and finish. Until then the source
    /// answers `-ASK` for keys it no longer has.
    pub fn begin_migration(&self, slot: u16, to: &ClusterNode) -> Migration<'_> {
        let from = self.master_for_slot(slot);
        assert_ne!(from.id, to.id, "slot {slot} is already on {}", to.port);
        assert!(
            to.is_master(),
            "migration target {} is not a master",
            to.port
        );
        setslot(to.port, slot, "IMPORTING", &from.id);
        setslot(from.port, slot, "MIGRATING", &to.id);
        Migration {
            cluster: self,
            slot,
            from,
            to: to.clone(),
        }
    }

    // ----------------------------------------------------------------- health

    /// Why the cluster is not healthy, or `Ok`. Healthy: every node runs and answers,
    /// `cluster_state` as coverage implies, all nodes known, agree on the topology, none
    /// flagged, no slot migrating, every master has its replicas, every replica's link is
    /// up and synced.
    pub fn check_health(&self) -> Result<(), String> {
        let procs: Vec<(u16, bool)> = self.procs().iter().map(|p| (p.port(), p.is_up())).collect();
        if let Some((p, _)) = procs.iter().find(|(_, up)| !up) {
            return Err(format!("node {p} is killed or stopped"));
        }
        let n = procs.len();
        let uncovered = self
            .spec
            .uncovered
            .as_ref()
            .map_or(0, |r| usize::from(r.end() - r.start()) + 1);
        let assigned = usize::from(SLOTS) - uncovered;
        let want_state = if uncovered > 0 && self.spec.require_full_coverage {
            "fail"
        } else {
            "ok"
        };
        let mut reference: Option<View> = None;
        for &(p, _) in &procs {
            let ci = cluster_info(p)?;
            for (k, want) in [
                ("cluster_state", want_state.to_owned()),
                ("cluster_known_nodes", n.to_string()),
                ("cluster_slots_assigned", assigned.to_string()),
                ("cluster_slots_ok", assigned.to_string()),
                ("cluster_size", self.spec.masters.to_string()),
            ] {
                if field(&ci, k) != want {
                    return Err(format!("{p}: {k}:{} (want {want})", field(&ci, k)));
                }
            }
            let v = view_of(p)?;
            if let Some(e) = v
                .entries
                .iter()
                .find(|e| e.failed || !e.unsettled.is_empty())
            {
                return Err(format!(
                    "{p} flags {} as {:?} failed={}",
                    e.port, e.unsettled, e.failed
                ));
            }
            if !v.migrating.is_empty() || !v.importing.is_empty() {
                return Err(format!(
                    "{p}: migrating {:?} importing {:?}",
                    v.migrating, v.importing
                ));
            }
            match &reference {
                None => reference = Some(v),
                Some(r) if r.comparable() != v.comparable() => {
                    return Err(format!("{p} disagrees with {}", procs[0].0));
                }
                Some(_) => {}
            }
        }
        let view = reference.ok_or("no nodes")?;
        let masters: Vec<&Entry> = view.entries.iter().filter(|e| e.master).collect();
        if masters.len() != self.spec.masters || masters.iter().any(|m| m.slots.is_empty()) {
            return Err(format!("masters with slots: {masters:?}"));
        }
        for m in &masters {
            let replicas: Vec<&Entry> = view
                .entries
                .iter()
                .filter(|e| e.master_id.as_deref() == Some(m.id.as_str()))
                .collect();
            if replicas.len() != self.spec.replicas {
                return Err(format!("master {} has replicas {replicas:?}", m.port));
            }
            let mut conn = connect(m.port).map_err(|e| e.to_string())?;
            let rep = info(&mut conn, "replication").map_err(|e| e.to_string())?;
            let online = rep
                .iter()
                .filter(|(k, v)| k.starts_with("slave") && v.contains("state=online"))
                .count();
            if online != self.spec.replicas {
                return Err(format!("master {}: {online} replicas online", m.port));
            }
            for r in replicas {
                let mut conn = connect(r.port).map_err(|e| e.to_string())?;
                let rep = info(&mut conn, "replication").map_err(|e| e.to_string())?;
                if field(&rep, "master_link_status") != "up"
                    || field(&rep, "master_sync_in_progress") != "0"
                    || field(&rep, "master_port") != m.port.to_string()
                {
                    return Err(format!("replica {}: {rep:?}", r.port));
                }
            }
        }
        Ok(())
    }

    /// Waits until [`check_health`](Self::check_health) passes.
    pub fn wait_healthy(&self) {
        wait_for_or(
            HEALTH_TIMEOUT,
            "a healthy cluster",
            || self.check_health(),
            || self.log_tails(),
        );
    }

    /// The last log lines of every server, for panic messages.
    pub fn log_tails(&self) -> String {
        let tails: Vec<String> = self.procs().iter().map(RedisProcess::log_tail).collect();
        tails.join("\n")
    }

    /// Resumes stopped nodes, restarts killed ones, completes half-done migrations
    /// towards their importing node, and waits until the cluster is healthy.
    pub fn heal(&self) {
        {
            let mut procs = self.procs();
            for p in procs.iter_mut() {
                if p.is_stopped() {
                    p.cont();
                } else if !p.is_up() {
                    p.kill();
                    p.restart();
                }
            }
        }
        // Migrations first (MIGRATE needs the target still IMPORTING), then whatever
        // importing state is left without a migrating side.
        for port in self.up_ports() {
            let Ok(v) = view_of(port) else { continue };
            // Valkey 8 replicates a slot's migrating and importing state to the masters'
            // replicas, which show it too; only a master can MIGRATE or SETSLOT, and
            // finishing on the master clears its replicas.
            let Some(me) = v.entries.iter().find(|e| e.port == port && e.master) else {
                continue;
            };
            let from = self.node_by_id(&me.id);
            for (slot, to) in &v.migrating {
                let m = Migration {
                    cluster: self,
                    slot: *slot,
                    from: from.clone(),
                    to: self.node_by_id(to),
                };
                m.move_keys();
                m.finish();
            }
        }
        for port in self.up_ports() {
            let Ok(v) = view_of(port) else { continue };
            if !v.entries.iter().any(|e| e.port == port && e.master) {
                continue;
            }
            for (slot, _) in v.importing {
                setslot_stable(port, slot);
            }
        }
        self.wait_healthy();
    }

    /// Heals now and when the returned guard drops (even during a panic); serialises
    /// disruptive tests of this process on this cluster.
    pub fn disrupt(&self) -> Disruption<'_> {
        let guard = self.disrupting.lock().unwrap_or_else(|e| e.into_inner());
        self.heal();
        Disruption {
            cluster: self,
            _guard: guard,
        }
    }

    // ----------------------------------------------------------------- Redisson

    /// A Redisson YAML config (`clusterServersConfig`) naming every node; reads and
    /// subscriptions on masters. Same text in Redisson 3.23.5 and 4.7.0.
    pub fn redisson_yaml_text(&self) -> String {
        let mut s = String::from("clusterServersConfig:\n  nodeAddresses:\n");
        for url in self.urls() {
            s.push_str(&format!("  - \"{url}\"\n"));
        }
        s.push_str(
            "  scanInterval: 1000\n  readMode: \"MASTER\"\n  subscriptionMode: \"MASTER\"\n",
        );
        // Redisson's default retries (3 or 4, 1.5 s apart) last about as long as a SIGKILL
        // failover here plus its 1 s scan: a Java waiter could run out of them while the
        // dead master still refused connections, and fail the scenario for a reason that
        // is Redisson's setting, not the failover. Production configs ride out failovers
        // the same way.
        s.push_str("  retryAttempts: 8\n");
        s
    }

    /// [`redisson_yaml_text`](Self::redisson_yaml_text) written to a file in the
    /// cluster's directory (once).
    pub fn redisson_yaml(&self) -> PathBuf {
        self.yaml
            .get_or_init(|| {
                let path = supervised::files_dir(&self.root).join("redisson-cluster.yaml");
                std::fs::write(&path, self.redisson_yaml_text())
                    .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
                path
            })
            .clone()
    }
}

/// Starts node `i`; with TLS also its TLS port.
fn start_node(root: &Path, i: usize, spec: &ClusterSpec) -> (RedisProcess, Option<u16>) {
    let mut last = String::new();
    for _ in 0..5 {
        // Redis 6.2 has no --cluster-port: its bus is always the port + 10000.
        let own_bus = crate::server().has_7_0_options();
        let port = if own_bus {
            supervised::free_port()
        } else {
            supervised::free_port_with_bus()
        };
        let bus_args: Vec<OsString> = if own_bus {
            vec![
                "--cluster-port".into(),
                supervised::free_port().to_string().into(),
            ]
        } else {
            Vec::new()
        };
        let dir = root.join(format!("node-{i}"));
        let tls_port = spec.tls.as_ref().map(|_| supervised::free_port());
        let tls_args: Vec<OsString> = match (&spec.tls, tls_port) {
            (Some(tls), Some(tls_port)) => [
                OsString::from("--tls-port"),
                tls_port.to_string().into(),
                "--tls-cert-file".into(),
                tls.cert.clone().into_os_string(),
                "--tls-key-file".into(),
                tls.key.clone().into_os_string(),
                "--tls-ca-cert-file".into(),
                tls.ca.clone().into_os_string(),
                "--tls-auth-clients".into(),
                "no".into(),
                "--tls-cluster".into(),
                "yes".into(),
                "--tls-replication".into(),
                "yes".into(),
            ]
            .into(),
            _ => Vec::new(),
        };
        let args: Vec<OsString> = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            &spec.node_timeout_ms.to_string(),
            // A replica always tries to take over, however stale (tests kill masters).
            "--cluster-replica-validity-factor",
            "0",
            // No replica moves on its own, no emptied master turns into a replica.
            "--cluster-allow-replica-migration",
            "no",
            "--cluster-require-full-coverage",
            if spec.require_full_coverage {
                "yes"
            } else {
                "no"
            },
            "--save",
            "",
            "--appendonly",
            "no",
            // Replicas resync at once after a failover (the default waits 5 s).
            "--repl-diskless-sync",
            "yes",
            "--repl-diskless-sync-delay",
            "0",
            "--enable-debug-command",
            "local",
            "--logfile",
            "redis.log",
            "--daemonize",
            "no",
        ]
        .iter()
        .map(OsString::from)
        .chain(bus_args)
        .chain(tls_args)
        .chain([OsString::from("--dir"), dir.clone().into_os_string()])
        .collect();
        match RedisProcess::start(root, dir, port, args) {
            Ok(p) => return (p, tls_port),
            Err(e) => last = e,
        }
    }
    panic!("cannot start cluster node {i}: {last}");
}

fn setslot(port: u16, slot: u16, state: &str, id: &str) {
    let _: () = query(
        port,
        redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg(state)
            .arg(id),
    )
    .unwrap_or_else(|e| panic!("CLUSTER SETSLOT {slot} {state} {id}: {e}"));
}

fn setslot_stable(port: u16, slot: u16) {
    let _: () = query(
        port,
        redis::cmd("CLUSTER").arg("SETSLOT").arg(slot).arg("STABLE"),
    )
    .unwrap_or_else(|e| panic!("CLUSTER SETSLOT {slot} STABLE: {e}"));
}

/// A slot being moved between two masters (see [`Cluster::begin_migration`]).
#[derive(Debug)]
pub struct Migration<'a> {
    cluster: &'a Cluster,
    /// The slot.
    pub slot: u16,
    /// The master it comes from.
    pub from: ClusterNode,
    /// The master it goes to.
    pub to: ClusterNode,
}

impl Migration<'_> {
    /// MIGRATEs the given keys (all in the slot) from the source to the target.
    pub fn move_key_list(&self, keys: &[String]) {
        if keys.is_empty() {
            return;
        }
        let _: redis::Value = query(
            self.from.port,
            redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(self.to.port)
                .arg("")
                .arg(0)
                .arg(5000)
                .arg("KEYS")
                .arg(keys),
        )
        .unwrap_or_else(|e| panic!("MIGRATE {keys:?}: {e}"));
    }

    /// MIGRATEs every key still in the slot on the source.
    pub fn move_keys(&self) {
        loop {
            let keys: Vec<String> = query(
                self.from.port,
                redis::cmd("CLUSTER")
                    .arg("GETKEYSINSLOT")
                    .arg(self.slot)
                    .arg(100),
            )
            .unwrap_or_else(|e| panic!("CLUSTER GETKEYSINSLOT: {e}"));
            if keys.is_empty() {
                return;
            }
            self.move_key_list(&keys);
        }
    }

    /// `SETSLOT <slot> NODE <target>` on the target, the source and the other masters,
    /// then waits until every node agrees the target owns the slot.
    pub fn finish(self) {
        let masters: Vec<u16> = self
            .cluster
            .nodes()
            .into_iter()
            .filter(|n| n.is_master() && !n.failed)
            .map(|n| n.port)
            .collect();
        let mut order = vec![self.to.port, self.from.port];
        for p in masters {
            if !order.contains(&p) {
                order.push(p);
            }
        }
        for p in order {
            setslot(p, self.slot, "NODE", &self.to.id);
        }
        let what = format!("slot {} to move to {}", self.slot, self.to.port);
        wait_for(CHANGE_TIMEOUT, &what, || {
            for p in self.cluster.up_ports() {
                let v = view_of(p)?;
                match v.owner(self.slot) {
                    Some(e) if e.id == self.to.id => {}
                    other => return Err(format!("{p} says the owner is {other:?}")),
                }
                if v.migrating
                    .iter()
                    .chain(&v.importing)
                    .any(|(s, _)| *s == self.slot)
                {
                    return Err(format!("{p} still migrating/importing"));
                }
            }
            Ok(())
        });
    }
}

/// Heals the cluster when dropped (see [`Cluster::disrupt`]).
pub struct Disruption<'a> {
    cluster: &'a Cluster,
    _guard: MutexGuard<'a, ()>,
}

impl std::fmt::Debug for Disruption<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Disruption").finish_non_exhaustive()
    }
}

impl Drop for Disruption<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // A second panic here would abort the process and hide the first.
            let healed =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.cluster.heal()));
            if healed.is_err() {
                eprintln!("cluster: healing after a failed test failed too");
            }
        } else {
            self.cluster.heal();
        }
    }
}
