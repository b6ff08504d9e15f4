//! A local Sentinel set on 127.0.0.1 for topology tests: one master, two replicas and
//! three sentinels watching master [`MASTER_NAME`] with quorum 2.
//!
//! [`shared`] starts it once per test binary on first use; it lives until the process
//! exits (servers are supervised, see `supervised.rs`). [`SentinelSet::start`] makes a
//! private one that dies with the value.
//!
//! The master moves (failovers), so ask [`SentinelSet::master`] (what every sentinel
//! agrees on, confirmed by the node's own `INFO replication`) instead of remembering it.
//! Disruptive tests: `#[serial(sentinel)]` plus a [`SentinelSet::disrupt`] guard, as for
//! the cluster.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use super::supervised::{self, RedisProcess, connect, info, wait_for, wait_for_or};

/// The monitored master's name.
pub const MASTER_NAME: &str = "mymaster";

/// Bound for a failover to be seen by every sentinel.
const CHANGE_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound for the set to become healthy (start, replicas re-linked after a failover).
const HEALTH_TIMEOUT: Duration = Duration::from_secs(60);

/// What to start.
#[derive(Clone, Debug)]
pub struct SentinelSpec {
    /// Replicas besides the master.
    pub replicas: usize,
    /// Sentinels.
    pub sentinels: usize,
    /// Quorum for objective down.
    pub quorum: usize,
    /// `down-after-milliseconds`.
    pub down_after_ms: u64,
    /// `failover-timeout`.
    pub failover_timeout_ms: u64,
    /// Credentials on the data nodes and the sentinels; `None`: no passwords anywhere.
    pub auth: Option<SentinelAuth>,
    /// The data nodes' `repl-diskless-sync-delay` in seconds; `None`: the server's default
    /// (5 s in Redis 7), which a full resync after a failover then waits out.
    pub repl_diskless_sync_delay: Option<u32>,
}

/// The credentials of a password-protected set: an ACL user on the data nodes (the
/// replicas and the sentinels log in as that user too) and a password on the sentinels.
/// The data nodes' `default` user stays passwordless for the harness's own checks, but
/// may neither write nor run scripts, so a client that fails to log in as the ACL user
/// cannot take a lock.
#[derive(Clone, Debug)]
pub struct SentinelAuth {
    /// The data nodes' ACL user.
    pub user: String,
    /// Its password.
    pub password: String,
    /// The sentinels' `requirepass` (and what they give each other).
    pub sentinel_password: String,
}

impl Default for SentinelSpec {
    fn default() -> Self {
        Self {
            replicas: 2,
            sentinels: 3,
            quorum: 2,
            // Above one second, Sentinel's ping and reconnect period, with room to spare.
            // After `+switch-master` a sentinel resets its master record (the pending-ping
            // clock starts at the reset) but reconnects to the promoted node only when a
            // second has passed since its last reconnect attempt to the killed one, and it
            // checks for down in the same timer tick. With 1000 ms that tick often lands
            // just past the limit: the new master is "down" before it was even asked, the
            // other sentinels' "down" answers about the old master (kept for 5 s) make it
            // objectively down at once, and a second failover demotes the master a test
            // (or the heal) has just been given.
            down_after_ms: 2000,
            failover_timeout_ms: 5000,
            auth: None,
            // Replicas resync at once after a failover.
            repl_diskless_sync_delay: Some(0),
        }
    }
}

/// A data node's role, from its own `INFO replication`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// `role:master`.
    Master,
    /// `role:slave` of the master on this port.
    Replica {
        /// The master's port.
        master_port: u16,
    },
}

/// A data node (not a sentinel), as it is now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataNode {
    /// The harness's index for the process (stable across roles and restarts).
    pub index: usize,
    /// Port on 127.0.0.1.
    pub port: u16,
    /// Role reported by the node; `None` when it is down or not answering.
    pub role: Option<Role>,
}

impl DataNode {
    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A raw connection to this node.
    pub fn conn(&self) -> redis::Connection {
        connect(self.port).unwrap_or_else(|e| panic!("cannot connect to {}: {e}", self.port))
    }
}

/// A running Sentinel set (see the module docs).
pub struct SentinelSet {
    spec: SentinelSpec,
    root: PathBuf,
    data: Mutex<Vec<RedisProcess>>,
    sentinels: Mutex<Vec<RedisProcess>>,
    disrupting: Mutex<()>,
    yaml: OnceLock<PathBuf>,
}

impl std::fmt::Debug for SentinelSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentinelSet")
            .field("data", &self.data_ports())
            .field("sentinels", &self.sentinel_ports())
            .finish_non_exhaustive()
    }
}

/// The shared set of this test binary, started on first use.
pub fn shared() -> &'static SentinelSet {
    static SHARED: OnceLock<SentinelSet> = OnceLock::new();
    SHARED.get_or_init(|| SentinelSet::start(SentinelSpec::default()))
}

fn pairs(flat: Vec<String>) -> Vec<(String, String)> {
    flat.chunks(2)
        .filter(|c| c.len() == 2)
        .map(|c| (c[0].clone(), c[1].clone()))
        .collect()
}

fn get<'a>(pairs: &'a [(String, String)], key: &str) -> &'a str {
    pairs
        .iter()
        .find_map(|(k, v)| (k == key).then_some(v.as_str()))
        .unwrap_or("")
}

fn role_of(port: u16) -> Result<Role, String> {
    let mut conn = connect(port).map_err(|e| format!("{port}: {e}"))?;
    let rep = info(&mut conn, "replication").map_err(|e| format!("{port}: {e}"))?;
    match get(&rep, "role") {
        "master" => Ok(Role::Master),
        "slave" => Ok(Role::Replica {
            master_port: get(&rep, "master_port")
                .parse()
                .map_err(|_| format!("{port}: master_port {:?}", get(&rep, "master_port")))?,
        }),
        other => Err(format!("{port}: role {other:?}")),
    }
}

fn data_args(port: u16, dir: &Path, spec: &SentinelSpec) -> Vec<OsString> {
    let auth = spec.auth.as_ref();
    let auth_args: Vec<String> = auth
        .map(|a| {
            // Each rule its own argument: one argument is one word of the option.
            let user = format!("--user {} on >{} ~* &* +@all", a.user, a.password);
            let default = "--user default on nopass ~* &* +@all -@write -@scripting";
            let mut args: Vec<String> = [user.as_str(), default]
                .iter()
                .flat_map(|rule| rule.split(' ').map(String::from))
                .collect();
            args.extend([
                "--masteruser".into(),
                a.user.clone(),
                "--masterauth".into(),
                a.password.clone(),
            ]);
            args
        })
        .unwrap_or_default();
    [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--repl-diskless-sync",
        "yes",
        "--enable-debug-command",
        "local",
        "--logfile",
        "redis.log",
        "--daemonize",
        "no",
    ]
    .iter()
    .map(OsString::from)
    .chain(
        spec.repl_diskless_sync_delay
            .map(|d| ["--repl-diskless-sync-delay".to_owned(), d.to_string()])
            .into_iter()
            .flatten()
            .map(OsString::from),
    )
    .chain(auth_args.into_iter().map(OsString::from))
    .chain([OsString::from("--dir"), dir.as_os_str().to_owned()])
    .collect()
}

fn replicaof(master_port: u16) -> Vec<OsString> {
    ["--replicaof", "127.0.0.1", &master_port.to_string()]
        .iter()
        .map(OsString::from)
        .collect()
}

impl SentinelSet {
    /// Starts the master, its replicas and the sentinels, and waits until healthy.
    pub fn start(spec: SentinelSpec) -> Self {
        let root = supervised::harness_dir("sentinel");
        let mut data = Vec::new();
        for i in 0..=spec.replicas {
            let role = data.first().map(|m: &RedisProcess| replicaof(m.port()));
            data.push(start_with_retry(&format!("data node {i}"), |port| {
                let dir = root.join(format!("data-{i}"));
                let mut args = data_args(port, &dir, &spec);
                args.extend(role.clone().unwrap_or_default());
                RedisProcess::start(&root, dir, port, args)
            }));
        }
        let master_port = data[0].port();
        let mut sentinels = Vec::new();
        for i in 0..spec.sentinels {
            sentinels.push(start_with_retry(&format!("sentinel {i}"), |port| {
                let dir = root.join(format!("sentinel-{i}"));
                std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
                let conf = dir.join("sentinel.conf");
                let text = format!(
                    "port {port}\nbind 127.0.0.1\ndaemonize no\nlogfile \"redis.log\"\n\
                     dir \"{dir}\"\n\
                     sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} {quorum}\n\
                     sentinel down-after-milliseconds {MASTER_NAME} {down}\n\
                     sentinel failover-timeout {MASTER_NAME} {fo}\n\
                     sentinel parallel-syncs {MASTER_NAME} {par}\n",
                    dir = dir.display(),
                    quorum = spec.quorum,
                    down = spec.down_after_ms,
                    fo = spec.failover_timeout_ms,
                    par = spec.replicas.max(1),
                );
                let text = match &spec.auth {
                    None => text,
                    Some(a) => format!(
                        "{text}requirepass \"{sp}\"\n\
                         sentinel sentinel-pass \"{sp}\"\n\
                         sentinel auth-user {MASTER_NAME} {user}\n\
                         sentinel auth-pass {MASTER_NAME} \"{pw}\"\n",
                        sp = a.sentinel_password,
                        user = a.user,
                        pw = a.password,
                    ),
                };
                std::fs::write(&conf, text).map_err(|e| e.to_string())?;
                RedisProcess::start_with_password(
                    &root,
                    dir,
                    port,
                    vec![conf.into_os_string(), OsString::from("--sentinel")],
                    spec.auth.as_ref().map(|a| a.sentinel_password.clone()),
                )
            }));
        }
        let set = Self {
            spec,
            root,
            data: Mutex::new(data),
            sentinels: Mutex::new(sentinels),
            disrupting: Mutex::new(()),
            yaml: OnceLock::new(),
        };
        set.wait_healthy();
        set
    }

    fn data(&self) -> MutexGuard<'_, Vec<RedisProcess>> {
        self.data.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn sentinel_procs(&self) -> MutexGuard<'_, Vec<RedisProcess>> {
        self.sentinels.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The spec it was started with.
    pub fn spec(&self) -> &SentinelSpec {
        &self.spec
    }

    /// The directory holding the nodes' directories.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Ports of the data nodes, by harness index.
    pub fn data_ports(&self) -> Vec<u16> {
        self.data().iter().map(RedisProcess::port).collect()
    }

    /// Ports of the sentinels.
    pub fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinel_procs()
            .iter()
            .map(RedisProcess::port)
            .collect()
    }

    /// `redis://127.0.0.1:<port>` of every sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinel_ports()
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect()
    }

    /// A connection to the sentinel on `port`, logged in when the set has a sentinel
    /// password.
    fn connect_sentinel(&self, port: u16) -> redis::RedisResult<redis::Connection> {
        let mut conn = connect(port)?;
        if let Some(a) = &self.spec.auth {
            redis::cmd("AUTH")
                .arg(&a.sentinel_password)
                .exec(&mut conn)?;
        }
        Ok(conn)
    }

    /// A raw connection to sentinel `i`.
    pub fn sentinel_conn(&self, i: usize) -> redis::Connection {
        let port = self.sentinel_ports()[i];
        self.connect_sentinel(port)
            .unwrap_or_else(|e| panic!("cannot connect to sentinel {port}: {e}"))
    }

    /// (server pid, supervisor pid) of every running process, sentinels included.
    pub fn pids(&self) -> Vec<(u32, u32)> {
        let data = self.data();
        let sentinels = self.sentinel_procs();
        data.iter()
            .chain(sentinels.iter())
            .filter_map(|p| Some((p.pid()?, p.supervisor_pid()?)))
            .collect()
    }

    /// The server pid of `node`, `None` when it was killed.
    pub fn pid(&self, node: &DataNode) -> Option<u32> {
        self.data()[node.index].pid()
    }

    /// Every data node with the role it reports now.
    pub fn data_nodes(&self) -> Vec<DataNode> {
        let procs: Vec<(u16, bool)> = self.data().iter().map(|p| (p.port(), p.is_up())).collect();
        procs
            .into_iter()
            .enumerate()
            .map(|(index, (port, up))| DataNode {
                index,
                port,
                // A node that runs answers; ride out a connection hiccup.
                role: up.then(|| {
                    wait_for(Duration::from_secs(5), &format!("ROLE of {port}"), || {
                        role_of(port)
                    })
                }),
            })
            .collect()
    }

    /// The master address sentinel `i` reports (`SENTINEL GET-MASTER-ADDR-BY-NAME`).
    pub fn master_seen_by(&self, i: usize) -> Result<(String, u16), String> {
        let port = self.sentinel_ports()[i];
        let mut conn = self
            .connect_sentinel(port)
            .map_err(|e| format!("sentinel {port}: {e}"))?;
        let addr: Option<(String, String)> = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(MASTER_NAME)
            .query(&mut conn)
            .map_err(|e| format!("sentinel {port}: {e}"))?;
        let (host, p) =
            addr.ok_or_else(|| format!("sentinel {port} does not know {MASTER_NAME}"))?;
        let p = p
            .parse()
            .map_err(|_| format!("sentinel {port}: port {p:?}"))?;
        Ok((host, p))
    }

    /// The port every running sentinel names as master, if they agree and that node says
    /// `role:master`.
    fn agreed_master(&self) -> Result<u16, String> {
        let mut seen = None;
        for (i, up) in self.sentinels_up().into_iter().enumerate() {
            if !up {
                continue;
            }
            let (_, p) = self.master_seen_by(i)?;
            match seen {
                None => seen = Some(p),
                Some(s) if s != p => return Err(format!("sentinels name {s} and {p}")),
                Some(_) => {}
            }
        }
        let port = seen.ok_or("no sentinel is up")?;
        match role_of(port)? {
            Role::Master => Ok(port),
            r => Err(format!("sentinels name {port}, which says {r:?}")),
        }
    }

    fn sentinels_up(&self) -> Vec<bool> {
        self.sentinel_procs()
            .iter()
            .map(RedisProcess::is_up)
            .collect()
    }

    fn node_at(&self, port: u16) -> DataNode {
        self.data_nodes()
            .into_iter()
            .find(|n| n.port == port)
            .unwrap_or_else(|| panic!("sentinels name {port}, which is not a data node here"))
    }

    /// The current master: what all sentinels agree on and the node itself confirms
    /// (waits for that).
    pub fn master(&self) -> DataNode {
        let port = wait_for(CHANGE_TIMEOUT, "the sentinels to agree on a master", || {
            self.agreed_master()
        });
        self.node_at(port)
    }

    /// Data nodes that are not the current master and are up.
    pub fn replicas(&self) -> Vec<DataNode> {
        let master = self.master();
        self.data_nodes()
            .into_iter()
            .filter(|n| n.port != master.port && n.role.is_some())
            .collect()
    }

    // ----------------------------------------------------------------- faults

    /// `SENTINEL FAILOVER` on the first sentinel; waits until every sentinel names a new
    /// master and that node says `role:master`. Returns it. The old master and the other
    /// replica re-link later: [`wait_healthy`](Self::wait_healthy).
    pub fn failover(&self) -> DataNode {
        self.failover_via(0)
    }

    /// [`failover`](Self::failover) led by sentinel `i`: the others learn of it only from
    /// its hello messages, so until then they name the old master.
    pub fn failover_via(&self, i: usize) -> DataNode {
        let old = self.master();
        let port = self.sentinel_ports()[i];
        let mut conn = self
            .connect_sentinel(port)
            .unwrap_or_else(|e| panic!("sentinel {port}: {e}"));
        let _: () = redis::cmd("SENTINEL")
            .arg("FAILOVER")
            .arg(MASTER_NAME)
            .query(&mut conn)
            .unwrap_or_else(|e| panic!("SENTINEL FAILOVER: {e}"));
        self.wait_new_master(old.port)
    }

    /// SIGKILLs the current master and waits until the sentinels promote a replica
    /// (all of them name it, it says `role:master`). Returns the new master. The old one
    /// stays down until [`restart`](Self::restart).
    pub fn kill_master(&self) -> DataNode {
        let old = self.master();
        self.kill(&old);
        self.wait_new_master(old.port)
    }

    fn wait_new_master(&self, old: u16) -> DataNode {
        let what = format!("the sentinels to promote a replica in place of {old}");
        let port = wait_for(CHANGE_TIMEOUT, &what, || match self.agreed_master() {
            Ok(p) if p == old => Err(format!("still {old}")),
            other => other,
        });
        self.node_at(port)
    }

    /// SIGKILLs a data node (no wait for the sentinels).
    pub fn kill(&self, node: &DataNode) {
        self.data()[node.index].kill();
    }

    /// Starts a killed data node again, as a replica of the current master (it would
    /// otherwise come back as an empty master until a sentinel reconfigures it).
    pub fn restart(&self, node: &DataNode) {
        let master = self.master();
        assert_ne!(
            master.index, node.index,
            "restart: node {} is the master",
            node.port
        );
        self.data()[node.index].restart_with(&replicaof(master.port));
    }

    /// SIGSTOPs a data node (for WAIT tests: a stopped replica acks nothing).
    pub fn stop(&self, node: &DataNode) {
        self.data()[node.index].stop();
    }

    /// SIGCONTs a stopped data node.
    pub fn cont(&self, node: &DataNode) {
        self.data()[node.index].cont();
    }

    /// SIGKILLs sentinel `i`.
    pub fn kill_sentinel(&self, i: usize) {
        self.sentinel_procs()[i].kill();
    }

    /// Restarts a killed sentinel from its (rewritten) config file.
    pub fn restart_sentinel(&self, i: usize) {
        self.sentinel_procs()[i].restart();
    }

    // ----------------------------------------------------------------- health

    /// Why the set is not healthy, or `Ok`. Healthy: every process runs; every sentinel
    /// names the same master, which says `role:master` with all replicas online; each
    /// sentinel sees the master unflagged, all replicas linked, and the other sentinels;
    /// each replica's link is up and synced.
    pub fn check_health(&self) -> Result<(), String> {
        if let Some(p) = self.data().iter().find(|p| !p.is_up()) {
            return Err(format!("data node {} is killed or stopped", p.port()));
        }
        if let Some(p) = self.sentinel_procs().iter().find(|p| !p.is_up()) {
            return Err(format!("sentinel {} is killed or stopped", p.port()));
        }
        let master = self.agreed_master()?;
        let replicas = self.spec.replicas;
        let mut conn = connect(master).map_err(|e| e.to_string())?;
        let rep = info(&mut conn, "replication").map_err(|e| e.to_string())?;
        let online = rep
            .iter()
            .filter(|(k, v)| k.starts_with("slave") && v.contains("state=online"))
            .count();
        if online != replicas {
            return Err(format!("master {master}: {online} replicas online"));
        }
        for port in self.data_ports().into_iter().filter(|&p| p != master) {
            let mut conn = connect(port).map_err(|e| e.to_string())?;
            let rep = info(&mut conn, "replication").map_err(|e| e.to_string())?;
            if get(&rep, "master_port") != master.to_string()
                || get(&rep, "master_link_status") != "up"
                || get(&rep, "master_sync_in_progress") != "0"
            {
                return Err(format!("replica {port}: {rep:?}"));
            }
        }
        for port in self.sentinel_ports() {
            self.sentinel_view(port, master)?;
        }
        Ok(())
    }

    /// Why the sentinel on `port` does not see the set as healthy with `master` as its
    /// master, or `Ok`: it sees the master unflagged, every replica linked to it, and
    /// the other sentinels.
    fn sentinel_view(&self, port: u16, master: u16) -> Result<(), String> {
        let replicas = self.spec.replicas;
        let mut conn = self
            .connect_sentinel(port)
            .map_err(|e| format!("sentinel {port}: {e}"))?;
        let m: Vec<String> = redis::cmd("SENTINEL")
            .arg("MASTER")
            .arg(MASTER_NAME)
            .query(&mut conn)
            .map_err(|e| format!("sentinel {port}: {e}"))?;
        let m = pairs(m);
        let others = (self.spec.sentinels - 1).to_string();
        if get(&m, "flags") != "master"
            || get(&m, "port") != master.to_string()
            || get(&m, "num-slaves") != replicas.to_string()
            || get(&m, "num-other-sentinels") != others
        {
            return Err(format!("sentinel {port} sees the master as {m:?}"));
        }
        let rs: Vec<Vec<String>> = redis::cmd("SENTINEL")
            .arg("REPLICAS")
            .arg(MASTER_NAME)
            .query(&mut conn)
            .map_err(|e| format!("sentinel {port}: {e}"))?;
        for r in rs.into_iter().map(pairs) {
            if get(&r, "flags") != "slave"
                || get(&r, "master-link-status") != "ok"
                || get(&r, "master-port") != master.to_string()
            {
                return Err(format!("sentinel {port} sees a replica as {r:?}"));
            }
        }
        Ok(())
    }

    /// Waits until [`check_health`](Self::check_health) passes.
    pub fn wait_healthy(&self) {
        wait_for_or(
            HEALTH_TIMEOUT,
            "a healthy sentinel set",
            || self.check_health(),
            || self.log_tails(),
        );
    }

    /// The last log lines of every server, for panic messages.
    pub fn log_tails(&self) -> String {
        let mut tails: Vec<String> = self.data().iter().map(RedisProcess::log_tail).collect();
        tails.extend(self.sentinel_procs().iter().map(RedisProcess::log_tail));
        tails.join("\n")
    }

    /// `SENTINEL MASTER` of sentinel `i`, as key/value pairs.
    fn master_record(&self, i: usize) -> Result<Vec<(String, String)>, String> {
        let port = self.sentinel_ports()[i];
        let mut conn = self
            .connect_sentinel(port)
            .map_err(|e| format!("sentinel {port}: {e}"))?;
        let m: Vec<String> = redis::cmd("SENTINEL")
            .arg("MASTER")
            .arg(MASTER_NAME)
            .query(&mut conn)
            .map_err(|e| format!("sentinel {port}: {e}"))?;
        Ok(pairs(m))
    }

    /// The [agreed master](Self::agreed_master), but only while no running sentinel has a
    /// failover in progress: the state healing may act on. During a failover the nodes'
    /// roles are the leader's to change, and a `REPLICAOF` from the harness then races
    /// its `REPLICAOF`s.
    fn settled_master(&self) -> Result<u16, String> {
        let port = self.agreed_master()?;
        for (i, up) in self.sentinels_up().into_iter().enumerate() {
            if !up {
                continue;
            }
            let m = self.master_record(i)?;
            if get(&m, "flags").contains("failover_in_progress") {
                return Err(format!(
                    "sentinel {i} has a failover in progress: {}",
                    get(&m, "failover-state")
                ));
            }
        }
        Ok(port)
    }

    /// Resumes stopped processes, restarts killed sentinels, waits for a settled master,
    /// restarts killed data nodes as its replicas, points data nodes that still follow
    /// (or are) an old master at the current one, and waits until healthy.
    ///
    /// After a failover the sentinels fix a demoted master only about 10 s later and
    /// refresh their replica lists only every 10 s (`INFO` period), so a healed set
    /// would otherwise take ~20 s. When the set is not healthy after the nudge, healing
    /// runs `SENTINEL RESET` on each sentinel whose view is wrong, one at a time (see
    /// `reset_stale_sentinels`).
    ///
    /// Should the sentinels move the master while healing waits for the replicas, the
    /// healing starts over from the new master instead of waiting for replicas to link
    /// to one that is no longer the master (they never would).
    pub fn heal(&self) {
        for p in self
            .data()
            .iter_mut()
            .chain(self.sentinel_procs().iter_mut())
        {
            if p.is_stopped() {
                p.cont();
            }
        }
        for p in self.sentinel_procs().iter_mut() {
            if !p.is_up() {
                p.kill();
                p.restart();
            }
        }
        let end = Instant::now() + HEALTH_TIMEOUT;
        let left = || end.saturating_duration_since(Instant::now());
        loop {
            // With the master dead the sentinels promote a replica on their own.
            let master = wait_for_or(
                left(),
                "a live master and no failover in progress, while healing",
                || self.settled_master(),
                || self.log_tails(),
            );
            if self.nudge(master) {
                break;
            }
            // Replicas must be linked before the reset, or the sentinels forget them.
            let linked = wait_for_or(
                left(),
                "replicas linked before SENTINEL RESET",
                || {
                    let now = self.settled_master()?;
                    if now != master {
                        return Ok(false);
                    }
                    self.replicas_linked(master).map(|()| true)
                },
                || self.log_tails(),
            );
            if linked && self.reset_stale_sentinels(master, end) {
                break;
            }
        }
        self.wait_healthy();
    }

    /// Restarts killed data nodes as replicas of `master` and points the others at it;
    /// true when that made the set healthy within 2 s (no reset needed).
    fn nudge(&self, master: u16) -> bool {
        for p in self.data().iter_mut() {
            if !p.is_up() && p.port() != master {
                p.kill();
                p.restart_with(&replicaof(master));
            }
        }
        for port in self.data_ports().into_iter().filter(|&p| p != master) {
            if role_of(port)
                != Ok(Role::Replica {
                    master_port: master,
                })
            {
                let mut conn = connect(port).unwrap_or_else(|e| panic!("heal: {port}: {e}"));
                let _: () = redis::cmd("REPLICAOF")
                    .arg("127.0.0.1")
                    .arg(master)
                    .query(&mut conn)
                    .unwrap_or_else(|e| panic!("heal: REPLICAOF on {port}: {e}"));
            }
        }
        let soon = Instant::now() + Duration::from_secs(2);
        loop {
            if self.check_health().is_ok() {
                return true;
            }
            if Instant::now() >= soon {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Every data node but `master` is its replica with the link up.
    fn replicas_linked(&self, master: u16) -> Result<(), String> {
        for port in self.data_ports().into_iter().filter(|&p| p != master) {
            let mut conn = connect(port).map_err(|e| format!("{port}: {e}"))?;
            let rep = info(&mut conn, "replication").map_err(|e| format!("{port}: {e}"))?;
            if get(&rep, "master_port") != master.to_string()
                || get(&rep, "master_link_status") != "up"
            {
                return Err(format!(
                    "replica {port} not linked to {master}: role {}, master_port {}, link {}",
                    get(&rep, "role"),
                    get(&rep, "master_port"),
                    get(&rep, "master_link_status")
                ));
            }
        }
        Ok(())
    }

    /// `SENTINEL RESET` on each sentinel whose view of the set is wrong, one at a time,
    /// each waited for until it sees the whole set again (by `end`) before the next.
    ///
    /// A reset sentinel forgets the replicas and the other sentinels and learns them
    /// again: the replicas from the master's `INFO`, the sentinels from their hello
    /// messages. Reset together, every sentinel forgot every other at once, relearned
    /// them only from each other's hellos, and the set did not always converge within
    /// the health bound; reset one at a time, the others still know the whole set and
    /// the reset one relearns it from them, while sentinels that see the set correctly
    /// are left alone. Returns false when the master moved meanwhile (the caller starts
    /// over).
    fn reset_stale_sentinels(&self, master: u16, end: Instant) -> bool {
        for port in self.sentinel_ports() {
            if self.sentinel_view(port, master).is_ok() {
                continue;
            }
            let mut conn = self
                .connect_sentinel(port)
                .unwrap_or_else(|e| panic!("heal: sentinel {port}: {e}"));
            let _: i64 = redis::cmd("SENTINEL")
                .arg("RESET")
                .arg(MASTER_NAME)
                .query(&mut conn)
                .unwrap_or_else(|e| panic!("heal: SENTINEL RESET on {port}: {e}"));
            let relearned = wait_for_or(
                end.saturating_duration_since(Instant::now()),
                &format!("sentinel {port} to see the whole set again after its reset"),
                || {
                    if self.settled_master()? != master {
                        return Ok(false);
                    }
                    self.sentinel_view(port, master).map(|()| true)
                },
                || self.log_tails(),
            );
            if !relearned {
                return false;
            }
        }
        true
    }

    /// Heals now and when the returned guard drops (even during a panic); serialises
    /// disruptive tests of this process on this set.
    pub fn disrupt(&self) -> Disruption<'_> {
        let guard = self.disrupting.lock().unwrap_or_else(|e| e.into_inner());
        self.heal();
        Disruption {
            set: self,
            _guard: guard,
        }
    }

    // ----------------------------------------------------------------- Redisson

    /// A Redisson YAML config (`sentinelServersConfig`) naming every sentinel; reads and
    /// subscriptions on the master; the credentials when the set has them. Same text in
    /// Redisson 3.23.5 and 4.7.0.
    pub fn redisson_yaml_text(&self) -> String {
        let mut s = format!(
            "sentinelServersConfig:\n  masterName: \"{MASTER_NAME}\"\n  sentinelAddresses:\n"
        );
        for url in self.sentinel_urls() {
            s.push_str(&format!("  - \"{url}\"\n"));
        }
        s.push_str(
            "  scanInterval: 1000\n  readMode: \"MASTER\"\n  subscriptionMode: \"MASTER\"\n",
        );
        if let Some(a) = &self.spec.auth {
            s.push_str(&format!(
                "  username: \"{}\"\n  password: \"{}\"\n  sentinelPassword: \"{}\"\n",
                a.user, a.password, a.sentinel_password
            ));
        }
        s
    }

    /// [`redisson_yaml_text`](Self::redisson_yaml_text) written to a file in the set's
    /// directory (once).
    pub fn redisson_yaml(&self) -> PathBuf {
        self.yaml
            .get_or_init(|| {
                let path = supervised::files_dir(&self.root).join("redisson-sentinel.yaml");
                std::fs::write(&path, self.redisson_yaml_text())
                    .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
                path
            })
            .clone()
    }
}

fn start_with_retry(
    what: &str,
    mut start: impl FnMut(u16) -> Result<RedisProcess, String>,
) -> RedisProcess {
    let mut last = String::new();
    for _ in 0..5 {
        match start(supervised::free_port()) {
            Ok(p) => return p,
            Err(e) => last = e,
        }
    }
    panic!("cannot start {what}: {last}");
}

/// Heals the set when dropped (see [`SentinelSet::disrupt`]).
pub struct Disruption<'a> {
    set: &'a SentinelSet,
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
            let healed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.set.heal()));
            if healed.is_err() {
                eprintln!("sentinel: healing after a failed test failed too");
            }
        } else {
            self.set.heal();
        }
    }
}
