//! `redmutex run NAME -- CMD`: the command runs only while the lock is held, gets the
//! lock's name (and fencing token) in its environment, is stopped when the lock is lost,
//! gets the signals sent to `run`, and its exit status comes back; each of run's own
//! outcomes has its exit code. Every case runs the real binary against a real server,
//! with the command a small `sh` script that says what it does on stdout and waits for
//! a cue on stdin; with the `interop` feature, a Redisson holder and waiter share the lock.

#[cfg(feature = "interop")]
use redmutex_harness::peer;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

use crate::support::raw::{exists, fenced_token_key, hgetall, lock_channel, numsub};
use crate::support::{Holder, TestServer, eventually, redmutex_bin, unique};

/// Hang guard for what should take milliseconds to a few seconds.
const HANG: Duration = Duration::from_secs(30);

/// The exit codes `run` documents (src/bin/redmutex/run.rs).
const LOST: i32 = 123;
const NOT_ACQUIRED: i32 = 124;
const OWN_FAILURE: i32 = 125;
const NOT_FOUND: i32 = 127;

/// A command that says `started <lock> <token>`, then waits for one line on stdin and
/// exits with `code`.
fn cued(code: i32) -> String {
    format!(
        "echo started \"$REDMUTEX_LOCK\" \"${{REDMUTEX_FENCING_TOKEN:-none}}\"; read cue; exit {code}"
    )
}

/// A command that says `started`, sleeps far longer than any test waits, then says
/// `finished`: a `finished` line would mean it was never stopped.
const LONG_SLEEP: &str = "echo started; sleep 120; echo finished";

/// One `redmutex run` process: its stdout lines arrive on a channel.
struct Run {
    child: Child,
    lines: Receiver<String>,
}

impl Run {
    /// `redmutex run --url URL [opts] NAME -- sh -c SCRIPT`.
    fn start(url: &str, opts: &[&str], name: &str, script: &str) -> Self {
        let mut child = Command::new(redmutex_bin())
            .args(["run", "--url", url])
            .args(opts)
            .args([name, "--", "sh", "-c", script])
            .env_remove("REDMUTEX_URL")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self { child, lines }
    }

    /// The next line the command prints, which must start with `prefix`.
    fn expect(&self, prefix: &str) -> String {
        let line = self
            .lines
            .recv_timeout(HANG)
            .unwrap_or_else(|e| panic!("the command never said {prefix:?}: {e}"));
        assert!(
            line.starts_with(prefix),
            "expected {prefix:?}, got {line:?}"
        );
        line
    }

    /// Whether the command has printed nothing (yet).
    fn silent(&self) -> bool {
        matches!(
            self.lines.try_recv(),
            Err(std::sync::mpsc::TryRecvError::Empty)
        )
    }

    /// One line on the command's stdin: its cue to exit.
    fn cue(&mut self) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "go").unwrap();
        stdin.flush().unwrap();
    }

    fn signal(&self, sig: &str) {
        let sent = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(sent.success());
    }

    /// Waits for `run` to exit (hang guard) and returns its exit code and the lines the
    /// command printed that were not read yet.
    fn finish(mut self) -> (i32, Vec<String>) {
        let pid = self.child.id();
        let (tx, rx) = channel::<ExitStatus>();
        let mut child = std::mem::replace(&mut self.child, Command::new("true").spawn().unwrap());
        std::thread::spawn(move || {
            let _ = tx.send(child.wait().unwrap());
        });
        let status = match rx.recv_timeout(HANG) {
            Ok(status) => status,
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
                panic!("redmutex run (pid {pid}) did not exit within {HANG:?}");
            }
        };
        let _ = self.child.wait();
        let rest = self.lines.try_iter().collect();
        let code = status
            .code()
            .expect("redmutex run exits, never dies of a signal");
        (code, rest)
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The command starts once the lock is held, holds it while it runs, and its exit status
/// comes back; a second `run` gives up with 124 after `--wait` without starting its
/// command, and one without `--wait` waits and starts only after the first is done.
#[test]
fn the_command_runs_only_while_the_lock_is_held() {
    let server = TestServer::start();
    let url = server.url();
    let mut raw = server.conn();
    let name = unique("run");

    let mut first = Run::start(&url, &[], &name, &cued(7));
    let line = first.expect("started");
    assert_eq!(line, format!("started {name} none"));
    let holders = hgetall(&mut raw, &name);
    assert_eq!(
        holders.len(),
        1,
        "one owner while the command runs: {holders:?}"
    );

    // Busy: a bounded wait gives up with its own code, and its command never starts.
    let impatient = Run::start(&url, &["--wait", "300ms"], &name, "echo started");
    let (code, lines) = impatient.finish();
    assert_eq!(code, NOT_ACQUIRED);
    assert!(
        lines.is_empty(),
        "the command ran without the lock: {lines:?}"
    );

    // A patient one waits (on the lock's channel) and does not start meanwhile.
    let patient = Run::start(&url, &[], &name, &cued(0));
    eventually(HANG, "the second run waits on the channel", || {
        numsub(&mut raw, &lock_channel(&name)) >= 1
    });
    assert!(
        patient.silent(),
        "the second command started while the first held the lock"
    );
    assert_eq!(
        hgetall(&mut raw, &name),
        holders,
        "the first still holds it alone"
    );

    first.cue();
    let (code, lines) = first.finish();
    assert_eq!(code, 7, "the command's own exit code comes back");
    assert!(lines.is_empty());

    let mut patient = patient;
    patient.expect("started");
    let now = hgetall(&mut raw, &name);
    assert_eq!(now.len(), 1);
    assert_ne!(now, holders, "the second run holds it under its own owner");
    patient.cue();
    assert_eq!(patient.finish().0, 0);
    assert!(!exists(&mut raw, &name), "released when the command exited");
}

/// A lock held by another process (a `redmutex hold` child) keeps `run --wait 0` out with
/// 124; a signal to a `run` still waiting ends the wait with 128+N, its command never
/// started, and the holder's hold untouched.
#[test]
fn a_held_lock_keeps_run_out_and_a_signal_ends_its_wait() {
    let server = TestServer::start();
    let url = server.url();
    let mut raw = server.conn();
    let name = unique("run-held");
    let holder = Holder::holding(&url, &name, 30_000, &[]);
    let held = hgetall(&mut raw, &name);

    let (code, lines) = Run::start(&url, &["--wait", "0"], &name, "echo started").finish();
    assert_eq!(code, NOT_ACQUIRED);
    assert!(lines.is_empty());

    let waiting = Run::start(&url, &[], &name, "echo started");
    eventually(HANG, "run waits on the channel", || {
        numsub(&mut raw, &lock_channel(&name)) >= 1
    });
    waiting.signal("TERM");
    let (code, lines) = waiting.finish();
    assert_eq!(code, 128 + 15);
    assert!(lines.is_empty(), "the command ran: {lines:?}");
    assert_eq!(hgetall(&mut raw, &name), held);
    drop(holder);
}

/// Deleting the key (DEL) or force-unlocking it while the command runs: the watchdog's
/// next renewal finds the lock gone, the command is stopped before it finishes its own
/// sleep, and `run` exits with 123. The watchdog lease is 3 s here, so the renewal that
/// notices comes within 1 s; the command would sleep two minutes.
#[test]
fn losing_the_lock_stops_the_command_with_the_loss_code() {
    let server = TestServer::start();
    let url = server.url();
    let mut raw = server.conn();
    let client = server.client();
    for how in ["del", "force_unlock"] {
        let name = unique("run-lost");
        let run = Run::start(&url, &["--watchdog", "3s"], &name, LONG_SLEEP);
        run.expect("started");
        assert!(exists(&mut raw, &name));
        match how {
            "del" => {
                let _: i64 = redis::cmd("DEL").arg(&name).query(&mut raw).unwrap();
            }
            _ => assert!(client.get_lock(name.as_str()).force_unlock().unwrap()),
        }
        let (code, lines) = run.finish();
        assert_eq!(code, LOST, "{how}: the loss code");
        assert!(
            lines.is_empty(),
            "{how}: the command finished its sleep: {lines:?}"
        );
    }
}

/// A command that ignores SIGTERM after the loss is killed after `--grace`; a `--lease`
/// that runs out stops the command the same way.
#[test]
fn a_command_that_ignores_sigterm_is_killed_after_the_grace_and_a_lease_ends_the_run() {
    let server = TestServer::start();
    let url = server.url();
    let mut raw = server.conn();
    let name = unique("run-grace");
    let stubborn = format!("trap '' TERM; {LONG_SLEEP}");
    let run = Run::start(
        &url,
        &["--watchdog", "3s", "--grace", "300ms"],
        &name,
        &stubborn,
    );
    run.expect("started");
    let _: i64 = redis::cmd("DEL").arg(&name).query(&mut raw).unwrap();
    let (code, lines) = run.finish();
    assert_eq!(code, LOST);
    assert!(lines.is_empty(), "not killed: {lines:?}");

    let name = unique("run-lease");
    let run = Run::start(&url, &["--lease", "1s"], &name, LONG_SLEEP);
    run.expect("started");
    let (code, lines) = run.finish();
    assert_eq!(code, LOST, "the lease ran out under the command");
    assert!(lines.is_empty(), "{lines:?}");
}

/// SIGTERM (and SIGINT) sent to `redmutex run` reach the command, which handles it and
/// exits with its own code; the lock is released at once.
#[test]
fn signals_to_run_reach_the_command_and_the_lock_is_released() {
    let server = TestServer::start();
    let url = server.url();
    let mut raw = server.conn();
    for (sig, code) in [("TERM", 3), ("INT", 4)] {
        let name = unique("run-signal");
        let script =
            format!("trap 'echo got-{sig}; exit {code}' {sig}; echo started; sleep 120 & wait");
        let run = Run::start(&url, &[], &name, &script);
        run.expect("started");
        run.signal(sig);
        run.expect(&format!("got-{sig}"));
        let (exit, _) = run.finish();
        assert_eq!(exit, code, "SIG{sig}: the command's code comes back");
        assert!(!exists(&mut raw, &name), "SIG{sig}: the lock was released");
    }
}

/// A fenced lock's token reaches the command's environment: the token of this grant, one
/// more than the last; the other kinds run too (fair, and the string-token lock, whose
/// key is a string while the command runs).
#[test]
fn the_fencing_token_and_every_kind_reach_the_command() {
    let server = TestServer::start();
    let url = server.url();
    let mut raw = server.conn();
    let name = unique("run-fenced");
    for expected in 1..=2 {
        let mut run = Run::start(&url, &["--kind", "fenced"], &name, &cued(0));
        let line = run.expect("started");
        assert_eq!(line, format!("started {name} {expected}"));
        let counter: i64 = redis::cmd("GET")
            .arg(fenced_token_key(&name))
            .query(&mut raw)
            .unwrap();
        assert_eq!(counter, expected);
        run.cue();
        assert_eq!(run.finish().0, 0);
    }
    for (kind, key_type) in [("fair", "hash"), ("token", "string")] {
        let name = unique("run-kind");
        let mut run = Run::start(&url, &["--kind", kind], &name, &cued(0));
        run.expect(&format!("started {name} none"));
        let t: String = redis::cmd("TYPE").arg(&name).query(&mut raw).unwrap();
        assert_eq!(t, key_type, "{kind}");
        run.cue();
        assert_eq!(run.finish().0, 0, "{kind}");
        assert!(!exists(&mut raw, &name), "{kind}: released");
    }
}

/// run's own failures have their codes: bad arguments and an unreachable server 125, a
/// command that does not exist 127 (with the lock released again).
#[test]
fn runs_own_failures_have_their_codes() {
    let server = TestServer::start();
    let url = server.url();
    let mut raw = server.conn();
    let name = unique("run-codes");
    let bad = |args: &[&str]| {
        Command::new(redmutex_bin())
            .arg("run")
            .args(args)
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .code()
    };
    assert_eq!(
        bad(&["--url", &url, "--wait", "soon", &name, "--", "true"]),
        Some(OWN_FAILURE)
    );
    assert_eq!(
        bad(&["--url", &url, &name]),
        Some(OWN_FAILURE),
        "no command"
    );
    let dead = format!(
        "redis://127.0.0.1:{}",
        crate::support::supervised::free_port()
    );
    assert_eq!(
        bad(&["--url", &dead, &name, "--", "true"]),
        Some(OWN_FAILURE)
    );
    let missing = Command::new(redmutex_bin())
        .args(["run", "--url", &url, &name, "--", "/nonexistent/command"])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(missing.code(), Some(NOT_FOUND));
    assert!(!exists(&mut raw, &name), "released after the failed start");
}

/// A Redisson holder keeps `run` out, and `run`'s command keeps a Redisson `tryLock` out.
#[cfg(feature = "interop")]
#[test]
fn run_and_a_redisson_holder_exclude_each_other() {
    let version = peer::versions().remove(0);
    let server = TestServer::start();
    let url = server.url();
    let peer = peer::Peer::start(&version, &url, 30_000);
    let name = unique("run-java");

    peer.ok("holder", &format!("lock {name}"));
    let (code, lines) = Run::start(&url, &["--wait", "300ms"], &name, "echo started").finish();
    assert_eq!(code, NOT_ACQUIRED, "Redisson {version} holds it");
    assert!(lines.is_empty());
    peer.ok("holder", &format!("unlock {name}"));

    let mut run = Run::start(&url, &[], &name, &cued(0));
    run.expect("started");
    assert!(
        !peer.bool("taker", &format!("trylock {name} -1")),
        "Redisson {version} took the lock while the command ran"
    );
    run.cue();
    assert_eq!(run.finish().0, 0);
    assert!(peer.bool("taker", &format!("trylock {name} -1")));
    peer.ok("taker", &format!("unlock {name}"));
}
