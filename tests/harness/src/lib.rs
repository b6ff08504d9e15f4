//! The test harness of redmutex (not published): real `redis-server` processes on free
//! loopback ports, the local cluster and sentinel set, the fault proxy, the interop peers,
//! and small helpers. The integration tests, the benchmark and the examples depend on it,
//! so it is compiled once for all of them.
//!
//! Every test starts its own server (about 20 ms), so tests never share keys, flushes or
//! restarts, and the server dies with the `TestServer` value.

pub mod cluster;
pub mod deploy;
pub mod peer;
pub mod raw;
pub mod reopening;
pub mod sentinel;
pub mod supervised;
pub mod token_peer;
pub mod trace;
pub mod verify_run;
pub mod watched;

// The tool's own worker command line, fault proxy and spawner, so that the tests drive the
// tool with the line it spells and start Redis as the tool does.
pub use redmutex::admin::{launch, proxy, server};

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redmutex::{Client, Config, ConfigBuilder};
use server::RedisServer;

/// A `redis-server` of one test, on its own port and directory, killed on drop.
pub struct TestServer {
    redis: RedisServer,
}

static SEQ: AtomicU64 = AtomicU64::new(0);

impl TestServer {
    /// A server with no persistence.
    pub fn start() -> Self {
        Self::with_args(&[])
    }

    /// A server with extra `redis-server` arguments (e.g. `--enable-debug-command local`).
    pub fn with_args(extra: &[&str]) -> Self {
        let redis = RedisServer::start(extra).unwrap_or_else(|e| panic!("{e}"));
        Self { redis }
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.redis.port()
    }

    /// The server's `redis://` URL.
    pub fn url(&self) -> String {
        self.redis.url()
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

    /// A redmutex client whose watchdog keeps leases of `timeout` (renewing every third).
    pub fn client_with_watchdog(&self, timeout: Duration) -> Client {
        self.client_with(|b| b.lock_watchdog_timeout(timeout))
    }

    /// A redmutex client with settings changed by `f`.
    pub fn client_with(&self, f: impl FnOnce(ConfigBuilder) -> ConfigBuilder) -> Client {
        Client::new(f(Config::builder().address(self.url())).build()).unwrap()
    }

    /// Creates the ACL user `user`, switched on, with `password`, every key and channel,
    /// and the command rules `rules` (e.g. `["+@all", "-publish"]`), for tests that log in
    /// as a user with some rights.
    pub fn add_user(&self, user: &str, password: &str, rules: &[&str]) {
        let pass = format!(">{password}");
        let _: () = redis::cmd("ACL")
            .arg(&["SETUSER", user, "on", &pass, "~*", "&*"])
            .arg(rules)
            .query(&mut self.conn())
            .unwrap();
    }

    /// Makes this a server for login tests: the ACL user `user` with `password` may run
    /// everything, and the `default` user needs `default_password`, so that a client
    /// without a login is refused. Returns a connection opened before the password was
    /// required, which stays logged in as `default` (`conn` can no longer log in).
    pub fn protect(&self, user: &str, password: &str, default_password: &str) -> redis::Connection {
        self.add_user(user, password, &["+@all"]);
        let mut raw = self.conn();
        let _: () = redis::cmd("CONFIG")
            .arg(&["SET", "requirepass", default_password])
            .query(&mut raw)
            .unwrap();
        raw
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.redis.pid()
    }

    /// Kills the server (SIGKILL) and starts it again on the same port and directory.
    pub fn restart(&mut self) {
        self.redis.restart().unwrap_or_else(|e| panic!("{e}"));
    }

    /// Kills the server now (its port stays reserved for a restart).
    pub fn kill(&mut self) {
        self.redis.kill();
    }
}

/// The server every spawner of this process starts (`REDMUTEX_SERVER`, default
/// `redis-7.0`); panics naming the fetch script when its binaries are missing.
pub fn server() -> &'static redmutex::admin::servers::Server {
    redmutex::admin::servers::selected_or_panic()
}

/// The selected server's `REDMUTEX_SERVER` name (`redis-7.0`, `redis-6.2`, ...).
pub fn server_name() -> &'static str {
    server().name()
}

/// True (after saying why on stderr) when the selected server cannot run a test that
/// needs TLS: the caller returns at once. The PyPI builds have no TLS, so the TLS tests
/// count as run only on `redis-7.0`.
pub fn server_lacks_tls() -> bool {
    match server().lacks_tls() {
        Some(why) => {
            eprintln!("skipped: {why}");
            true
        }
        None => false,
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

/// The `redmutex` binary of this build (its `worker`, `hold` and `soak-worker` commands).
///
/// The binary is built only with the `cli` feature; the test targets that start it
/// require that feature in `Cargo.toml`, so this panics only in a target that forgot to.
pub fn redmutex_bin() -> &'static Path {
    // Cargo names the binary to its tests only at their compile time
    // (`CARGO_BIN_EXE_redmutex`), which this crate is not; it puts the binary in the
    // profile directory, one level above the `deps/` directory of every test executable.
    static BIN: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test executable's path");
        let bin = exe
            .parent()
            .and_then(Path::parent)
            .map(|profile| profile.join(format!("redmutex{}", std::env::consts::EXE_SUFFIX)))
            .expect("the test executable lives under <target>/<profile>/deps");
        assert!(
            bin.is_file(),
            "no redmutex binary at {}: it is built only with `--features cli`; \
             give this test target `required-features = [\"cli\"]` in Cargo.toml",
            bin.display()
        );
        bin
    })
}

/// The number after `name=` in the report line of a `redmutex` child process.
pub fn report_field(line: &str, name: &str) -> u64 {
    launch::report_field(line, name).unwrap_or_else(|| panic!("no {name} in {line:?}"))
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

/// Waits for the next renewal of a lease whose TTL `read` returns: the TTL only falls
/// between renewals, so a sample above the one before it is a renewal. Returns the TTL
/// after it.
pub fn await_renewal(what: &str, mut read: impl FnMut() -> i64) -> i64 {
    let mut last = read();
    assert!(last > 0, "{what}: no TTL ({last})");
    let mut now = last;
    eventually(
        Duration::from_secs(10),
        &format!("a renewal {what}"),
        || {
            now = read();
            let rose = now > last;
            last = now;
            rose
        },
    );
    now
}

/// Waits up to 10 s until `counter` (bumped by test threads) reads `n`.
pub fn await_count(counter: &AtomicU64, n: u64, what: &str) {
    eventually(Duration::from_secs(10), what, || {
        counter.load(Ordering::SeqCst) == n
    });
}

/// Times `attempt`, a wait bounded by the duration it is given that must give up
/// (return `false`, nothing acquired): it waits out `bound`, give or take 10 ms, and
/// gives up well within 10 s.
pub fn assert_waits_out(bound: Duration, attempt: impl FnOnce(Duration) -> bool) {
    let started = Instant::now();
    assert!(
        !attempt(bound),
        "acquired within a wait that should run out"
    );
    let waited = started.elapsed();
    assert!(waited >= bound - Duration::from_millis(10), "{waited:?}");
    assert!(waited < Duration::from_secs(10), "{waited:?}");
}

/// Names of this process's threads.
pub fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|s| s.trim().to_owned())
        .collect()
}

/// After a fault test, with every redmutex client dropped: no channel stays subscribed,
/// no unlock latch is left, no connection but the caller's is open, and no redmutex
/// thread is running in this process. Only valid in `#[serial]` tests.
/// Waits until the watchdog thread has deleted every spent unlock latch: after that it
/// sends nothing more for the releases so far. A latch that no client deletes (its
/// release had a try of unknown outcome, or its process was killed before its watchdog
/// got to it) goes at its PX, about 11-14 s with the default settings: the wait covers
/// that, so a latch that never goes is still caught, and a loaded machine is no flake.
pub fn await_no_unlock_latches(raw: &mut redis::Connection) {
    eventually(Duration::from_secs(30), "no unlock latches", || {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("redisson_unlock_latch:*")
            .query(raw)
            .unwrap();
        keys.is_empty()
    });
}

/// Waits until the server shows nothing a closed client left behind: no subscribed
/// channel, no unlock latch, no connection but `raw`'s, no `redmutex-` thread here.
pub fn assert_no_leftovers(raw: &mut redis::Connection) {
    eventually(Duration::from_secs(10), "no subscribed channels", || {
        let channels: Vec<String> = redis::cmd("PUBSUB").arg("CHANNELS").query(raw).unwrap();
        channels.is_empty()
    });
    await_no_unlock_latches(raw);
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
    /// The child process.
    pub child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Holder {
    /// A holder of `lock` on the server at `url` under a watchdog of `watchdog_ms`, with
    /// `extra` options, once it has said it holds the lock.
    pub fn holding(url: &str, lock: &str, watchdog_ms: u64, extra: &[&str]) -> Self {
        let watchdog = watchdog_ms.to_string();
        let mut args = vec!["--url", url, "--lock", lock, "--watchdog-ms", &watchdog];
        args.extend_from_slice(extra);
        let holder = Self::spawn(&args);
        holder.expect("held");
        holder
    }

    /// Starts `redmutex hold` with `args`, without waiting for any line.
    pub fn spawn(args: &[&str]) -> Self {
        let mut child = Command::new(redmutex_bin())
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

    /// Writes `line` to the holder's stdin (a cue for its next step).
    pub fn cue(&mut self, line: &str) {
        use std::io::Write as _;
        let stdin = self.child.stdin.as_mut().expect("piped stdin");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends the signal named `sig` (e.g. `STOP`) to the holder.
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
    let (result, got) = tap_with(server, |ps| ps.subscribe(channel), f);
    (
        result,
        got.into_iter().map(|(_, payload)| payload).collect(),
    )
}

/// [`tap`] for every channel matching `pattern`: (channel, payload) pairs.
pub fn tap_pattern<R>(
    server: &TestServer,
    pattern: &str,
    f: impl FnOnce() -> R,
) -> (R, Vec<(String, String)>) {
    tap_with(server, |ps| ps.psubscribe(pattern), f)
}

fn tap_with<R>(
    server: &TestServer,
    subscribe: impl FnOnce(&mut redis::PubSub<'_>) -> redis::RedisResult<()>,
    f: impl FnOnce() -> R,
) -> (R, Vec<(String, String)>) {
    let mut conn = server.conn();
    let mut ps = conn.as_pubsub();
    subscribe(&mut ps).unwrap();
    let result = f();
    ps.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut got = Vec::new();
    loop {
        match ps.get_message() {
            Ok(msg) => got.push((
                msg.get_channel_name().to_owned(),
                String::from_utf8_lossy(msg.get_payload_bytes()).into_owned(),
            )),
            Err(e) if e.is_timeout() => break,
            Err(e) => panic!("{e}"),
        }
    }
    (result, got)
}
