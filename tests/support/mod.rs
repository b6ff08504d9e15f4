//! Test support: real `redis-server` processes on free loopback ports, and small helpers.
//!
//! Every test starts its own server (about 20 ms), so tests never share keys, flushes or
//! restarts, and the server dies with the `TestServer` value.
#![allow(dead_code, unreachable_pub)]

pub mod cluster;
pub mod proxy;
pub mod sentinel;
pub mod supervised;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redmutex::{Client, Config, ConfigBuilder};

/// A `redis-server` child process listening on 127.0.0.1.
pub struct TestServer {
    child: Child,
    pub port: u16,
    pub dir: PathBuf,
    args: Vec<String>,
}

static SEQ: AtomicU64 = AtomicU64::new(0);

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl TestServer {
    /// A server with no persistence.
    pub fn start() -> Self {
        Self::with_args(&[])
    }

    /// A server with extra `redis-server` arguments (e.g. `--enable-debug-command local`).
    pub fn with_args(extra: &[&str]) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "redmutex-test-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        // A port picked by the OS can be taken again before redis binds it: retry.
        for _ in 0..20 {
            let port = free_port();
            if let Some(child) = spawn(port, &dir, &args) {
                return Self {
                    child,
                    port,
                    dir,
                    args,
                };
            }
        }
        panic!("could not start redis-server");
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A plain redis-rs connection for raw commands.
    pub fn conn(&self) -> redis::Connection {
        let conn = redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        conn
    }

    /// A redmutex client with the defaults.
    pub fn client(&self) -> Client {
        self.client_with(|b| b)
    }

    /// A redmutex client with settings changed by `f`.
    pub fn client_with(&self, f: impl FnOnce(ConfigBuilder) -> ConfigBuilder) -> Client {
        Client::new(f(Config::builder().address(self.url())).build()).unwrap()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the server (SIGKILL) and starts it again on the same port and directory.
    pub fn restart(&mut self) {
        self.kill();
        for _ in 0..100 {
            if let Some(child) = spawn(self.port, &self.dir, &self.args) {
                self.child = child;
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("could not restart redis-server on {}", self.port);
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts redis-server and waits for its "Ready to accept connections" line.
fn spawn(port: u16, dir: &std::path::Path, extra: &[String]) -> Option<Child> {
    let mut child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .arg("--dir")
        .arg(dir)
        .args(["--logfile", "", "--loglevel", "notice", "--daemonize", "no"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server must be on PATH (apt-get install redis-server)");
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let ready = loop {
        match lines.next() {
            Some(Ok(line)) if line.contains("Ready to accept connections") => break true,
            Some(Ok(_)) => continue,
            _ => break false,
        }
    };
    if !ready {
        let _ = child.kill();
        let _ = child.wait();
        return None;
    }
    // Keep draining the log so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Some(child)
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A lock name no other test uses.
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}:{}:{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// Waits until `cond` holds, checking whenever it can; panics after `limit`. For state
/// that lives in Redis or another process and has no event to wait on.
pub fn eventually(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Names of this process's threads.
pub fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|s| s.trim().to_owned())
        .collect()
}

/// Subscribers of `channel` as Redis counts them.
pub fn numsub(conn: &mut redis::Connection, channel: &str) -> i64 {
    let v: (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query(conn)
        .unwrap();
    v.1
}

/// After a fault test, with every redmutex client dropped: no channel stays subscribed,
/// no unlock latch is left, no connection but the caller's is open, and no redmutex
/// thread is running in this process. Only valid in `#[serial]` tests.
pub fn assert_no_leftovers(raw: &mut redis::Connection) {
    eventually(Duration::from_secs(10), "no subscribed channels", || {
        let channels: Vec<String> = redis::cmd("PUBSUB").arg("CHANNELS").query(raw).unwrap();
        channels.is_empty()
    });
    eventually(Duration::from_secs(10), "no unlock latches", || {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("redisson_unlock_latch:*")
            .query(raw)
            .unwrap();
        keys.is_empty()
    });
    eventually(
        Duration::from_secs(10),
        "only the test's own connection",
        || {
            let list: String = redis::cmd("CLIENT").arg("LIST").query(raw).unwrap();
            list.lines().filter(|l| !l.is_empty()).count() == 1
        },
    );
    eventually(Duration::from_secs(10), "no redmutex threads", || {
        !thread_names().iter().any(|n| n.starts_with("redmutex-"))
    });
}

/// A `redmutex hold` child process (see src/bin/redmutex/hold.rs).
pub struct Holder {
    pub child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Holder {
    pub fn spawn(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_redmutex"))
            .arg("hold")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self { child, lines }
    }

    /// The next line the holder prints that starts with `prefix`.
    pub fn expect(&self, prefix: &str) -> String {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("holder never said {prefix:?}"));
            if line.starts_with(prefix) {
                return line;
            }
        }
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(ok.success());
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Messages published on `channel` while `f` runs, plus those that arrive until it has
/// been quiet for half a second.
pub fn tap<R>(server: &TestServer, channel: &str, f: impl FnOnce() -> R) -> (R, Vec<String>) {
    let mut conn = server.conn();
    let mut ps = conn.as_pubsub();
    ps.subscribe(channel).unwrap();
    let result = f();
    ps.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut got = Vec::new();
    loop {
        match ps.get_message() {
            Ok(msg) => got.push(String::from_utf8_lossy(msg.get_payload_bytes()).into_owned()),
            Err(e) if e.is_timeout() => break,
            Err(e) => panic!("{e}"),
        }
    }
    (result, got)
}

/// How many times Redis has run `command` (from `INFO commandstats`).
pub fn calls(raw: &mut redis::Connection, command: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(raw).unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}
