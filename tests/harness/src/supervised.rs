//! `redis-server` processes that cannot outlive the test process.
//!
//! The topology harnesses (cluster, sentinel) keep their servers in statics, and statics
//! are never dropped, so `Drop` cannot be what stops them. Each server instead runs under
//! a tiny `sh` supervisor whose stdin is a pipe from the test process. When that pipe
//! closes — on normal exit, on a panic that ends the process, on `abort()`, on SIGKILL of
//! the test binary — the kernel closes the write end, `read` returns, and the supervisor
//! SIGKILLs the server and deletes its directory. The supervisor ignores SIGINT/SIGTERM/
//! SIGHUP and runs in its own process group, so a Ctrl-C on the terminal cannot kill it
//! before it has done its job.
//!
//! Ports are picked below the kernel's ephemeral range: a port of a server killed for a
//! test is then never taken by some outgoing connection before the server is restarted
//! on it (a cluster node must come back on its old port to rejoin).

use std::collections::HashSet;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The supervisor. Arguments: `<dir> <root> <program> <args...>`. It prints the server's
/// pid, waits for a line or EOF on stdin, kills the server, and unless the line was
/// `keep` removes `<dir>`, `<root>/files` (see [`files_dir`]) and, if then empty, `<root>`.
const SUPERVISOR: &str = r#"
trap '' INT TERM HUP PIPE
dir=$1; root=$2; shift 2
"$@" </dev/null >/dev/null 2>&1 &
pid=$!
echo "$pid"
read cmd
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
if [ "$cmd" != keep ]; then
    rm -rf "$dir" "$root/files"
    rmdir "$root" 2>/dev/null
fi
exit 0
"#;

/// How long a server may take to answer PING after it was spawned.
const START_TIMEOUT: Duration = Duration::from_secs(10);

static SEQ: AtomicU64 = AtomicU64::new(0);

/// A directory for one harness instance (its servers each get a subdirectory). It is
/// removed by the last supervisor that cleans up inside it.
pub fn harness_dir(kind: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "redmutex-{kind}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

/// A directory inside a harness root for files that are not a server's (client configs);
/// removed with the servers.
pub fn files_dir(root: &Path) -> PathBuf {
    let dir = root.join("files");
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

/// Every port handed out by this process.
static GIVEN: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// A TCP port on 127.0.0.1 that was free a moment ago, below the ephemeral range and not
/// handed out before by this process.
pub fn free_port() -> u16 {
    static RNG: AtomicU64 = AtomicU64::new(0);
    let (low, high) = port_window();
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    let given = given.get_or_insert_with(HashSet::new);
    let mut x = RNG.load(Ordering::Relaxed);
    if x == 0 {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        x = nanos ^ (u64::from(std::process::id()) << 32) | 1;
    }
    for _ in 0..10_000 {
        // xorshift64: enough to spread parallel test processes over the window.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let port = low + (x % u64::from(high - low)) as u16;
        if given.contains(&port) {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.insert(port);
            RNG.store(x, Ordering::Relaxed);
            return port;
        }
    }
    panic!("no free port in 127.0.0.1:{low}..{high}");
}

/// A port whose neighbour 10000 above is free too, for a cluster node of a server
/// without `--cluster-port` (Redis 6.2 puts its bus there). Both stay below the window's
/// top where the window is wide enough (the default one); in a narrow one (a child
/// process's) the bus may fall in the ephemeral range, which only a restart could meet.
pub fn free_port_with_bus() -> u16 {
    let (low, high) = port_window();
    let top = if u32::from(low) + 10_000 < u32::from(high) {
        high
    } else {
        u16::MAX
    };
    for _ in 0..1000 {
        let port = free_port();
        let Some(bus) = port.checked_add(10_000) else {
            continue;
        };
        if bus < top && TcpListener::bind(("127.0.0.1", bus)).is_ok() {
            let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
            if given.get_or_insert_with(HashSet::new).insert(bus) {
                return port;
            }
        }
    }
    panic!("no free port pair (port, port + 10000) below {top}");
}

/// The environment variable that overrides the port window (`<low>-<high>`).
pub const PORTS_ENV: &str = "REDMUTEX_TOPOLOGY_PORTS";

/// Ports below the kernel's ephemeral range (`ip_local_port_range`), above 10000, unless
/// [`PORTS_ENV`] says otherwise. The top eighth is left out of the default window: the
/// harness's own teardown tests give it to their child processes, so a child can never
/// take the port of a node the parent killed and is about to restart.
pub fn port_window() -> (u16, u16) {
    if let Ok(spec) = std::env::var(PORTS_ENV) {
        let parsed = spec
            .split_once('-')
            .and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)));
        match parsed {
            Some((low, high)) if low < high => return (low, high),
            _ => panic!("{PORTS_ENV}={spec:?}: expected <low>-<high>"),
        }
    }
    let (low, high) = full_window();
    (low, high - (high - low) / 8)
}

/// The window reserved for the harness's own child processes (see [`port_window`]).
pub fn child_port_window() -> (u16, u16) {
    let (low, high) = full_window();
    (high - (high - low) / 8, high)
}

fn full_window() -> (u16, u16) {
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    if ephemeral_low > 12_000 {
        (10_000, ephemeral_low - 1)
    } else {
        (ephemeral_low.max(1024), 65_000)
    }
}

/// Process state letter from `/proc/<pid>/stat` (`R`, `S`, `T`, `Z`, ...), `None` when
/// there is no such process.
pub fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// True while `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    !matches!(proc_state(pid), None | Some('Z') | Some('X'))
}

/// Sends `signal` (e.g. `KILL`, `STOP`, `CONT`) to `pid` with kill(1).
pub fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap_or_else(|e| panic!("cannot run kill: {e}"));
    assert!(status.success(), "kill -{signal} {pid} failed: {status}");
}

/// A plain connection to 127.0.0.1:`port` with 10 s read/write timeouts.
pub fn connect(port: u16) -> redis::RedisResult<redis::Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let conn = client.get_connection_with_timeout(Duration::from_secs(2))?;
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    conn.set_write_timeout(Some(Duration::from_secs(10)))?;
    Ok(conn)
}

/// `INFO <section>` as key/value pairs.
pub fn info(
    conn: &mut redis::Connection,
    section: &str,
) -> redis::RedisResult<Vec<(String, String)>> {
    let text: String = redis::cmd("INFO").arg(section).query(conn)?;
    Ok(text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect())
}

/// One field of `INFO <section>`.
pub fn info_field(conn: &mut redis::Connection, section: &str, field: &str) -> Option<String> {
    info(conn, section)
        .ok()?
        .into_iter()
        .find_map(|(k, v)| (k == field).then_some(v))
}

/// Polls `f` until it returns `Ok`, at most `limit`; panics with `what` and the last
/// reason `f` gave. For server state that has no event to wait on.
pub fn wait_for<T>(limit: Duration, what: &str, f: impl FnMut() -> Result<T, String>) -> T {
    wait_for_or(limit, what, f, String::new)
}

/// [`wait_for`] whose panic message ends with `context()` (e.g. server log tails).
pub fn wait_for_or<T>(
    limit: Duration,
    what: &str,
    mut f: impl FnMut() -> Result<T, String>,
    context: impl FnOnce() -> String,
) -> T {
    let end = Instant::now() + limit;
    loop {
        match f() {
            Ok(v) => return v,
            Err(why) => {
                if Instant::now() >= end {
                    panic!(
                        "timed out after {limit:?} waiting for {what}: {why}\n{}",
                        context()
                    );
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

struct Running {
    supervisor: Child,
    stdin: ChildStdin,
    pid: u32,
}

/// One supervised server: its port, directory and arguments survive kills, so it can be
/// restarted in place.
pub struct RedisProcess {
    port: u16,
    dir: PathBuf,
    root: PathBuf,
    /// The selected server's binary (`REDMUTEX_SERVER`, see `redmutex::admin::servers`).
    program: PathBuf,
    args: Vec<OsString>,
    /// The `default` user's password (`requirepass`), for the readiness check.
    password: Option<String>,
    running: Option<Running>,
}

impl std::fmt::Debug for RedisProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisProcess")
            .field("port", &self.port)
            .field("pid", &self.pid())
            .finish_non_exhaustive()
    }
}

impl RedisProcess {
    /// Starts the selected server (`REDMUTEX_SERVER`) with `args` (which must include
    /// `--port`, and which lose the options that server lacks) in
    /// `dir` (created inside `root`) and waits until it answers PING with its own pid.
    pub fn start(
        root: &Path,
        dir: PathBuf,
        port: u16,
        args: Vec<OsString>,
    ) -> Result<Self, String> {
        Self::start_with_password(root, dir, port, args, None)
    }

    /// Like [`start`](Self::start), for a server whose `default` user has `password`
    /// (`requirepass`): the readiness check logs in with it.
    pub fn start_with_password(
        root: &Path,
        dir: PathBuf,
        port: u16,
        args: Vec<OsString>,
        password: Option<String>,
    ) -> Result<Self, String> {
        std::fs::create_dir_all(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        let server = redmutex::admin::servers::selected()?;
        let mut p = Self {
            port,
            dir,
            root: root.to_owned(),
            program: server.server.clone(),
            args: server.adapt_args(&args),
            password,
            running: None,
        };
        p.spawn()?;
        Ok(p)
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's directory (log file `redis.log`, cluster `nodes.conf`, ...).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The server's pid, `None` after [`kill`](Self::kill).
    pub fn pid(&self) -> Option<u32> {
        self.running.as_ref().map(|r| r.pid)
    }

    /// The supervisor's pid, `None` after [`kill`](Self::kill).
    pub fn supervisor_pid(&self) -> Option<u32> {
        self.running.as_ref().map(|r| r.supervisor.id())
    }

    /// True when the server runs and is not SIGSTOPped.
    pub fn is_up(&self) -> bool {
        self.pid()
            .is_some_and(|pid| alive(pid) && proc_state(pid) != Some('T'))
    }

    /// The last lines of the server's log, for panic messages.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let from = lines.len().saturating_sub(15);
        format!(
            "--- {}:{} log tail ---\n{}",
            self.program.display(),
            self.port,
            lines[from..].join("\n")
        )
    }

    fn spawn(&mut self) -> Result<(), String> {
        let mut supervisor = Command::new("sh")
            .arg("-c")
            .arg(SUPERVISOR)
            .arg("sh")
            .arg(&self.dir)
            .arg(&self.root)
            .arg(&self.program)
            .args(&self.args)
            .current_dir(&self.dir)
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot spawn sh: {e}"))?;
        let stdin = supervisor.stdin.take().expect("piped stdin");
        let mut first = String::new();
        BufReader::new(supervisor.stdout.take().expect("piped stdout"))
            .read_line(&mut first)
            .map_err(|e| format!("reading the supervisor's pid line: {e}"))?;
        let pid: u32 = first
            .trim()
            .parse()
            .map_err(|_| format!("supervisor printed {first:?} instead of a pid"))?;
        self.running = Some(Running {
            supervisor,
            stdin,
            pid,
        });
        let end = Instant::now() + START_TIMEOUT;
        loop {
            if !alive(pid) {
                let tail = self.log_tail();
                self.reap(true);
                return Err(format!(
                    "redis-server on port {} exited at start\n{tail}",
                    self.port
                ));
            }
            // Check the pid too: the port might belong to somebody else's server.
            if let Ok(mut conn) = connect(self.port)
                && self
                    .password
                    .as_ref()
                    .is_none_or(|pw| redis::cmd("AUTH").arg(pw).exec(&mut conn).is_ok())
                && info_field(&mut conn, "server", "process_id").as_deref()
                    == Some(pid.to_string().as_str())
            {
                return Ok(());
            }
            if Instant::now() >= end {
                let tail = self.log_tail();
                self.reap(true);
                return Err(format!(
                    "redis-server on port {} did not answer within {START_TIMEOUT:?}\n{tail}",
                    self.port
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGKILLs the server (a crash: no shutdown, no save) and waits until it is gone.
    /// Its directory stays, for [`restart`](Self::restart). No-op when already killed.
    pub fn kill(&mut self) {
        if let Some(pid) = self.pid() {
            if alive(pid) {
                signal(pid, "KILL");
            }
            self.reap(true);
        }
    }

    /// Tells the supervisor to kill the server and exit; `keep` keeps the directory.
    fn reap(&mut self, keep: bool) {
        if let Some(mut r) = self.running.take() {
            // Ordering: the server is SIGKILLed (by us or by the supervisor) before the
            // supervisor's `wait` returns, so when `wait()` below returns the port is free.
            let _ = r.stdin.write_all(if keep { b"keep\n" } else { b"\n" });
            drop(r.stdin);
            let _ = r.supervisor.wait();
        }
    }

    /// Starts the server again on the same port and directory (after [`kill`](Self::kill)),
    /// with `extra` arguments appended to the original ones for this run only.
    pub fn restart_with(&mut self, extra: &[OsString]) {
        assert!(
            self.running.is_none(),
            "restart of a server on {} that still runs",
            self.port
        );
        let base = self.args.clone();
        self.args.extend(extra.iter().cloned());
        let mut last = String::new();
        // The port can only be taken by another test process's server in the meantime;
        // a few attempts ride out a server that is just exiting.
        for _ in 0..20 {
            match self.spawn() {
                Ok(()) => {
                    self.args = base;
                    return;
                }
                Err(e) => last = e,
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.args = base;
        panic!("could not restart redis-server on {}: {last}", self.port);
    }

    /// [`restart_with`](Self::restart_with) without extra arguments.
    pub fn restart(&mut self) {
        self.restart_with(&[]);
    }

    /// SIGSTOPs the server (it keeps its sockets but answers nothing) and waits until the
    /// kernel reports it stopped.
    pub fn stop(&mut self) {
        let pid = self.pid().expect("stop: server is not running");
        signal(pid, "STOP");
        wait_for(
            Duration::from_secs(5),
            "SIGSTOP to take effect",
            || match proc_state(pid) {
                Some('T') => Ok(()),
                s => Err(format!("state {s:?}")),
            },
        );
    }

    /// SIGCONTs a stopped server and waits until it runs again.
    pub fn cont(&mut self) {
        let pid = self.pid().expect("cont: server is not running");
        signal(pid, "CONT");
        wait_for(
            Duration::from_secs(5),
            "SIGCONT to take effect",
            || match proc_state(pid) {
                Some('T') => Err("still stopped".to_owned()),
                _ => Ok(()),
            },
        );
    }

    /// True when the server was SIGSTOPped.
    pub fn is_stopped(&self) -> bool {
        self.pid().is_some_and(|pid| proc_state(pid) == Some('T'))
    }
}

impl Drop for RedisProcess {
    fn drop(&mut self) {
        if self.running.is_some() {
            // The supervisor removes the directory (and the root once it is empty).
            self.reap(false);
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
            let _ = std::fs::remove_dir_all(self.root.join("files"));
            let _ = std::fs::remove_dir(&self.root);
        }
    }
}
