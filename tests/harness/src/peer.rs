//! A Rust driver for the interop peers in `tests/interop` (see its README): the Java
//! Redisson peer, and any other program that speaks the same line protocol.
//!
//! [`Peer::start`] builds the Java peer for one Redisson version (once per process and
//! version, via `tests/interop/build.sh`), starts it against a Redis URL and waits for its
//! `ready <clientId>` line; [`Peer::launch`] does the same for any peer command
//! (`token_peer.rs` starts the Go and Python peers with it). Commands go to named
//! peer threads; a reader thread routes every reply line to the caller waiting for its
//! request id, so commands on different peer threads can be in flight at once
//! ([`Peer::send`] returns a [`Pending`]).
//!
//! The peer's stderr is captured: its tail is printed when a test panics while the peer is
//! alive, and included in the panic message when the peer dies. Set
//! `REDMUTEX_PEER_STDERR=1` to also echo it live.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Versions tested when `REDMUTEX_REDISSON_VERSIONS` is not set.
pub const DEFAULT_VERSIONS: &str = "4.7.0,3.23.5";

/// How long the JVM may take to print its `ready` line (a first build is separate).
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// Lines of JVM stderr kept for diagnostics.
const STDERR_TAIL: usize = 200;

const INSTALL_HINT: &str = "the Redisson interop tests need a JDK (17+) and Maven on PATH, \
     and Maven Central (or a filled ~/.m2) for the first build: \
     `apt-get install openjdk-17-jdk-headless maven`";

/// The Redisson versions to test: `REDMUTEX_REDISSON_VERSIONS` (comma-separated), else
/// [`DEFAULT_VERSIONS`].
pub fn versions() -> Vec<String> {
    let raw = std::env::var("REDMUTEX_REDISSON_VERSIONS")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_VERSIONS.to_owned());
    let list: Vec<String> = raw
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    assert!(
        !list.is_empty(),
        "REDMUTEX_REDISSON_VERSIONS names no version: {raw:?}"
    );
    list
}

/// Whether `program` is an executable file in one of `PATH`'s directories.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// The redmutex package's root, where `tests/interop` lives (this crate sits in
/// `tests/harness`).
pub fn crate_root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The cargo target directory (`CARGO_TARGET_DIR` or `<crate>/target`); peers build
/// under `<target>/interop/`.
pub fn target_dir() -> PathBuf {
    let manifest = crate_root();
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => manifest.join(dir),
        _ => manifest.join("target"),
    }
}

/// The java classpath of the peer built for `version`; builds it on first use.
///
/// Panics, saying what to install, when `java` or `mvn` is missing or the build fails.
pub fn classpath(version: &str) -> String {
    static BUILT: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    let built = BUILT.get_or_init(|| Mutex::new(HashMap::new()));
    // Held during the build: concurrent tests wait for one build instead of racing it.
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(cp) = built.get(version) {
        return cp.clone();
    }
    for tool in ["java", "mvn"] {
        assert!(on_path(tool), "`{tool}` is not on PATH: {INSTALL_HINT}");
    }
    let outdir = target_dir().join("interop").join(version);
    run_build(
        &format!("the Redisson {version} peer"),
        "tests/interop/build.sh",
        &[version.as_ref(), outdir.as_os_str()],
        INSTALL_HINT,
    );
    let file = outdir.join("classpath.txt");
    let cp = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| {
            panic!(
                "build.sh succeeded but {} is unreadable: {e}",
                file.display()
            )
        })
        .trim()
        .to_owned();
    assert!(!cp.is_empty(), "{} is empty", file.display());
    built.insert(version.to_owned(), cp.clone());
    cp
}

/// Runs the build script `script` (relative to the crate root) with `args` under bash;
/// panics with its stderr and `hint` when it fails, and says how long it took when that was
/// more than a second. `what` names the peer in those messages.
pub fn run_build(what: &str, script: &str, args: &[&std::ffi::OsStr], hint: &str) {
    let script = crate_root().join(script);
    let started = Instant::now();
    let out = Command::new("bash")
        .arg(&script)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "building {what} failed ({}); {hint}\n--- {} stderr ---\n{}",
        out.status,
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    if started.elapsed() > Duration::from_secs(1) {
        eprintln!(
            "peer: built {what} in {:.1}s",
            started.elapsed().as_secs_f64()
        );
    }
}

/// One reply line: `Ok(value)` for `ok [value]` (empty when there is no value),
/// `Err("<ExceptionClass> <message>")` for `err ...`.
pub type Reply = Result<String, String>;

struct Arrived {
    reply: Reply,
    at: Instant,
}

/// Requests waiting for their reply, by request id; `None` once the peer's stdout closed.
type Waiting = Arc<Mutex<Option<HashMap<u64, Sender<Arrived>>>>>;

/// A running peer process (for the Java peer, one `RedissonClient`).
pub struct Peer {
    /// The Redisson version for the Java peer, else the label given to [`Peer::launch`].
    version: String,
    client_id: String,
    child: Mutex<Child>,
    stdin: Mutex<Option<ChildStdin>>,
    waiting: Waiting,
    next_id: AtomicU64,
    stderr: Arc<Mutex<VecDeque<String>>>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer")
            .field("version", &self.version)
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

/// A command sent to the peer whose reply has not been collected yet.
#[derive(Debug)]
pub struct Pending {
    desc: String,
    sent_at: Instant,
    rx: Receiver<Arrived>,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

impl Pending {
    /// The reply, waiting at most `timeout` (a hang guard: panics when it runs out or the
    /// peer died).
    pub fn wait(self, timeout: Duration) -> Reply {
        self.wait_timed(timeout).0
    }

    /// The reply and the instant the reader thread received it.
    pub fn wait_timed(self, timeout: Duration) -> (Reply, Instant) {
        match self.rx.recv_timeout(timeout) {
            Ok(a) => (a.reply, a.at),
            Err(RecvTimeoutError::Timeout) => panic!(
                "peer: no reply to `{}` within {timeout:?}\n{}",
                self.desc,
                tail(&self.stderr)
            ),
            Err(RecvTimeoutError::Disconnected) => panic!(
                "peer: the peer process exited before replying to `{}`\n{}",
                self.desc,
                tail(&self.stderr)
            ),
        }
    }

    /// The reply if it arrives within `timeout`, else `None` (the command is still running).
    /// Panics if the peer died.
    pub fn try_wait(&self, timeout: Duration) -> Option<Reply> {
        match self.rx.recv_timeout(timeout) {
            Ok(a) => Some(a.reply),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => panic!(
                "peer: the peer process exited before replying to `{}`\n{}",
                self.desc,
                tail(&self.stderr)
            ),
        }
    }

    /// When the command line was written to the peer's stdin (taken just before writing).
    pub fn sent_at(&self) -> Instant {
        self.sent_at
    }
}

fn tail(stderr: &Mutex<VecDeque<String>>) -> String {
    let lines = stderr.lock().unwrap_or_else(|e| e.into_inner());
    if lines.is_empty() {
        return "(peer stderr is empty)".to_owned();
    }
    let mut s = String::from("--- peer stderr (tail) ---\n");
    for l in lines.iter() {
        s.push_str(l);
        s.push('\n');
    }
    s
}

/// Parses `<reqId> ok [value]` / `<reqId> err <rest>`.
fn parse(line: &str) -> Option<(u64, Reply)> {
    let (id, rest) = line.split_once(' ')?;
    let id: u64 = id.parse().ok()?;
    let reply = if rest == "ok" {
        Ok(String::new())
    } else if let Some(v) = rest.strip_prefix("ok ") {
        Ok(v.to_owned())
    } else if let Some(e) = rest.strip_prefix("err ") {
        Err(e.to_owned())
    } else if rest == "err" {
        Err(String::new())
    } else {
        return None;
    };
    Some((id, reply))
}

impl Peer {
    /// Builds (if needed) and starts the peer for Redisson `version` against `url`, with
    /// `lockWatchdogTimeout = watchdog_ms`, and waits for its `ready` line.
    pub fn start(version: &str, url: &str, watchdog_ms: u64) -> Self {
        Self::spawn(version, &[url.as_ref()], watchdog_ms)
    }

    /// Like [`start`](Self::start), with the Redisson config read from a YAML file
    /// (`Config.fromYAML`: cluster, sentinel, single, ...).
    pub fn start_yaml(version: &str, yaml: &Path, watchdog_ms: u64) -> Self {
        Self::spawn(version, &["--yaml".as_ref(), yaml.as_os_str()], watchdog_ms)
    }

    fn spawn(version: &str, target: &[&std::ffi::OsStr], watchdog_ms: u64) -> Self {
        let cp = classpath(version);
        let mut java = Command::new("java");
        java.arg("-cp")
            .arg(&cp)
            .arg("dev.redmutex.interop.Peer")
            .args(target)
            .arg(watchdog_ms.to_string());
        Self::launch(version, java, INSTALL_HINT)
    }

    /// Starts `command` (a built peer with its arguments; its stdio is replaced by pipes)
    /// and waits for its `ready <id>` line. `label` names the peer in thread names and
    /// messages and is what [`version`](Self::version) returns; `hint` is added to the
    /// panic message when the program cannot be started.
    pub fn launch(label: &str, mut command: Command, hint: &str) -> Self {
        let shown = format!("{command:?}");
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {shown}: {e}; {hint}"));
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr_pipe = child.stderr.take().expect("piped stderr");

        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let echo = std::env::var_os("REDMUTEX_PEER_STDERR").is_some();
        let err_thread = {
            let stderr = Arc::clone(&stderr);
            let prefix = format!("peer {label} stderr");
            std::thread::Builder::new()
                .name(format!("peer-{label}-stderr"))
                .spawn(move || {
                    for line in BufReader::new(stderr_pipe).lines() {
                        let Ok(line) = line else { break };
                        if echo {
                            eprintln!("[{prefix}] {line}");
                        }
                        let mut buf = stderr.lock().unwrap_or_else(|e| e.into_inner());
                        if buf.len() == STDERR_TAIL {
                            buf.pop_front();
                        }
                        buf.push_back(line);
                    }
                })
                .expect("spawn stderr thread")
        };

        let waiting: Waiting = Arc::new(Mutex::new(Some(HashMap::new())));
        let (ready_tx, ready_rx) = mpsc::channel::<String>();
        let out_thread = {
            let waiting = Arc::clone(&waiting);
            let stderr = Arc::clone(&stderr);
            std::thread::Builder::new()
                .name(format!("peer-{label}-stdout"))
                .spawn(move || read_replies(stdout, ready_tx, &waiting, &stderr))
                .expect("spawn stdout thread")
        };

        let client_id = match ready_rx.recv_timeout(READY_TIMEOUT) {
            Ok(id) => id,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                let _ = err_thread.join();
                panic!(
                    "peer {label}: no `ready` line ({e}) from {shown}\n{}",
                    tail(&stderr)
                );
            }
        };
        Self {
            version: label.to_owned(),
            client_id,
            child: Mutex::new(child),
            stdin: Mutex::new(Some(stdin)),
            waiting,
            next_id: AtomicU64::new(1),
            stderr,
            threads: vec![out_thread, err_thread],
        }
    }

    /// The id on the peer's `ready` line: for the Java peer the Redisson client id
    /// (`RedissonClient.getId()`), the prefix of its hash fields.
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// The Redisson version this peer runs (the label of a [`launch`](Self::launch)ed peer).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The hash field of Java thread `java_thread_id`: `<clientId>:<threadId>`.
    pub fn field(&self, java_thread_id: &str) -> String {
        format!("{}:{java_thread_id}", self.client_id)
    }

    /// Sends `cmd` (e.g. `lock mylock`) to the peer thread named `thread` without waiting.
    pub fn send(&self, thread: &str, cmd: &str) -> Pending {
        assert!(
            !thread.is_empty() && !thread.contains(char::is_whitespace),
            "bad thread name {thread:?}"
        );
        assert!(!cmd.contains('\n'), "command must be one line: {cmd:?}");
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        {
            let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
            match waiting.as_mut() {
                Some(map) => {
                    map.insert(id, tx);
                }
                None => panic!(
                    "peer {}: the peer process already exited; cannot send `{cmd}`\n{}",
                    self.version,
                    tail(&self.stderr)
                ),
            }
        }
        let line = format!("{id} {thread} {cmd}\n");
        let mut stdin = self.stdin.lock().unwrap_or_else(|e| e.into_inner());
        let sent_at = Instant::now();
        let written = match stdin.as_mut() {
            Some(pipe) => pipe.write_all(line.as_bytes()).and_then(|()| pipe.flush()),
            None => Err(std::io::Error::other("stdin already closed")),
        };
        drop(stdin);
        if let Err(e) = written {
            panic!(
                "peer {}: cannot write `{cmd}` to the peer process: {e}\n{}",
                self.version,
                tail(&self.stderr)
            );
        }
        Pending {
            desc: format!("[{} {thread}] {cmd}", self.version),
            sent_at,
            rx,
            stderr: Arc::clone(&self.stderr),
        }
    }

    /// Sends `cmd` to `thread` and waits for its reply (at most `timeout`).
    pub fn call_timeout(&self, thread: &str, cmd: &str, timeout: Duration) -> Reply {
        self.send(thread, cmd).wait(timeout)
    }

    /// Sends `cmd` to `thread` and waits for its reply (60 s hang guard).
    pub fn call(&self, thread: &str, cmd: &str) -> Reply {
        self.call_timeout(thread, cmd, Duration::from_secs(60))
    }

    /// [`call`](Self::call) that expects `ok`; returns the value.
    pub fn ok(&self, thread: &str, cmd: &str) -> String {
        match self.call(thread, cmd) {
            Ok(v) => v,
            Err(e) => panic!("peer {} [{thread}] `{cmd}` failed: {e}", self.version),
        }
    }

    /// [`ok`](Self::ok) for commands that answer `true` / `false`.
    pub fn bool(&self, thread: &str, cmd: &str) -> bool {
        match self.ok(thread, cmd).as_str() {
            "true" => true,
            "false" => false,
            other => panic!(
                "peer {} [{thread}] `{cmd}`: not a boolean: {other:?}",
                self.version
            ),
        }
    }

    /// [`ok`](Self::ok) for commands that answer a number.
    pub fn num(&self, thread: &str, cmd: &str) -> i64 {
        let v = self.ok(thread, cmd);
        v.parse().unwrap_or_else(|_| {
            panic!(
                "peer {} [{thread}] `{cmd}`: not a number: {v:?}",
                self.version
            )
        })
    }

    /// [`call`](Self::call) that expects `err`; returns `"<ExceptionClass> <message>"`.
    pub fn err(&self, thread: &str, cmd: &str) -> String {
        match self.call(thread, cmd) {
            Err(e) => e,
            Ok(v) => panic!(
                "peer {} [{thread}] `{cmd}` succeeded ({v:?}) but an error was expected",
                self.version
            ),
        }
    }

    /// Java's `Thread.getId()` of the named thread.
    pub fn thread_id(&self, thread: &str) -> String {
        self.ok(thread, "threadid")
    }

    /// Waits until every named Java thread of the peer is parked on its lock entry's
    /// latch (`java.util.concurrent.Semaphore.tryAcquire`) inside `frame` (e.g.
    /// `org.redisson.RedissonLock.lock` or `org.redisson.RedissonLock.tryLock`), per the
    /// JDK's `jstack`: past its last attempt, asleep until a message or its timeout.
    ///
    /// Redisson leaves no trace of that in Redis, and the `"1"` message a write unlock
    /// publishes releases only as many latch permits as threads are parked at that
    /// moment (`LockPubSub`: `release(getQueueLength())`). A thread that is between its
    /// last acquire attempt and the latch misses it and sleeps its whole wait, whoever
    /// unlocked: the same with a Java writer. A test of that wake-up waits here before it
    /// unlocks. Panics after `timeout`; returns how many `jstack` runs it took.
    pub fn wait_parked(&self, threads: &[&str], frame: &str, timeout: Duration) -> usize {
        let pid = self.child.lock().unwrap_or_else(|e| e.into_inner()).id();
        let end = Instant::now() + timeout;
        let mut runs = 0;
        loop {
            let out = Command::new("jstack")
                .arg(pid.to_string())
                .output()
                .expect("jstack (from the JDK) must be on PATH");
            runs += 1;
            let dump = String::from_utf8_lossy(&out.stdout);
            let parked = |t: &&str| {
                dump.split("\n\n").any(|block| {
                    block.starts_with(&format!("\"{t}\" "))
                        && block.contains("java.util.concurrent.Semaphore.tryAcquire")
                        && block.contains(frame)
                })
            };
            if threads.iter().all(parked) {
                return runs;
            }
            assert!(
                Instant::now() < end,
                "peer {}: java threads {threads:?} not all parked in {frame} within \
                 {timeout:?}:\n{dump}{}",
                self.version,
                String::from_utf8_lossy(&out.stderr)
            );
            // No event tells a thread parked; jstack itself takes tens of ms.
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The peer's captured stderr (last lines).
    pub fn stderr_tail(&self) -> String {
        tail(&self.stderr)
    }

    /// Asks the peer to shut its client down and exit (`quit`); kills it if it has not
    /// exited within 15 s. Locks it still holds stay in Redis until they expire.
    pub fn quit(mut self) {
        let quit = self.send("control", "quit");
        let _ = quit.try_wait(Duration::from_secs(15));
        // EOF on stdin too, in case the quit line was lost.
        drop(self.stdin.lock().unwrap_or_else(|e| e.into_inner()).take());
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let exited = {
                let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
                matches!(child.try_wait(), Ok(Some(_)))
            };
            if exited || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.shutdown_now();
    }

    /// SIGKILLs the peer process now (a crash: no unlock, no client shutdown).
    pub fn kill(&self) {
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        let _ = child.kill();
        let _ = child.wait();
    }

    fn shutdown_now(&mut self) {
        self.kill();
        drop(self.stdin.lock().unwrap_or_else(|e| e.into_inner()).take());
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The stdout reader: first the `ready` line, then one reply per line, routed by id.
fn read_replies(
    stdout: impl Read,
    ready: Sender<String>,
    waiting: &Mutex<Option<HashMap<u64, Sender<Arrived>>>>,
    stderr: &Mutex<VecDeque<String>>,
) {
    let mut lines = BufReader::new(stdout).lines();
    let mut ready = Some(ready);
    for line in lines.by_ref() {
        let Ok(line) = line else { break };
        let at = Instant::now();
        if let Some(tx) = ready.take() {
            match line.strip_prefix("ready ") {
                Some(id) => {
                    let _ = tx.send(id.trim().to_owned());
                    continue;
                }
                None => {
                    ready = Some(tx);
                    note(stderr, format!("(unexpected stdout before ready) {line}"));
                    continue;
                }
            }
        }
        match parse(&line) {
            Some((id, reply)) => {
                let tx = waiting
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .as_mut()
                    .and_then(|m| m.remove(&id));
                match tx {
                    Some(tx) => {
                        let _ = tx.send(Arrived { reply, at });
                    }
                    None => note(stderr, format!("(reply nobody waits for) {line}")),
                }
            }
            None => note(stderr, format!("(unparsable stdout) {line}")),
        }
    }
    // EOF: fail every waiting request (their senders drop) and refuse new ones.
    waiting.lock().unwrap_or_else(|e| e.into_inner()).take();
}

fn note(stderr: &Mutex<VecDeque<String>>, line: String) {
    let mut buf = stderr.lock().unwrap_or_else(|e| e.into_inner());
    if buf.len() == STDERR_TAIL {
        buf.pop_front();
    }
    buf.push_back(line);
}

impl Drop for Peer {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "peer {} ({}) is being dropped during a panic\n{}",
                self.version,
                self.client_id,
                tail(&self.stderr)
            );
        }
        self.shutdown_now();
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn reply_lines_parse() {
        assert_eq!(parse("7 ok"), Some((7, Ok(String::new()))));
        assert_eq!(parse("7 ok true"), Some((7, Ok("true".into()))));
        assert_eq!(
            parse("8 err IllegalMonitorStateException attempt to unlock"),
            Some((
                8,
                Err("IllegalMonitorStateException attempt to unlock".into())
            ))
        );
        assert_eq!(parse("ready x"), None);
        assert_eq!(parse("9 maybe"), None);
    }
}
