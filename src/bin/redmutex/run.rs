//! `redmutex run NAME -- CMD [ARGS...]`: a command that runs only while a lock is held,
//! in the spirit of `flock(1)`, `etcdctl lock` and `consul lock`.
//!
//! The lock is taken through the library, so it is the same lock a Redisson service or
//! another redmutex process takes by that name, renewed by the watchdog (or held for
//! `--lease`). Then the command starts, in a process group of its own, with
//! `REDMUTEX_LOCK=NAME` (and `REDMUTEX_FENCING_TOKEN` for a fenced lock) in its
//! environment. SIGINT and SIGTERM sent to `redmutex run` go to that group. When the
//! command exits the lock is released and its exit status becomes ours. When the lock is
//! lost first (the watchdog found it gone or could not renew it in time, or the lease ran
//! out), the group gets SIGTERM at once and SIGKILL after `--grace`, and the exit code
//! says so.
//!
//! | code | meaning |
//! |---|---|
//! | the command's | the command ran under the lock and exited with it (128+N if signal N ended it) |
//! | 123 | the lock was lost (or the lease ran out) while the command ran: it was stopped, or it had finished when the release found the lock gone |
//! | 124 | the lock was not acquired within `--wait`; the command did not run |
//! | 125 | `redmutex run` itself failed before the command ran: bad arguments, Redis unreachable or refusing, a Redis error |
//! | 126 | the command was found but could not be started |
//! | 127 | the command was not found |
//!
//! A signal that arrives while `run` still waits for the lock ends the wait: it exits
//! with 128+N without running the command.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, after, never, select, unbounded};
use nix::spawn::{PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags, posix_spawnp};
use nix::sys::signal::{SigSet, Signal, killpg};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid, waitpid};
use nix::unistd::Pid;
use parking_lot::Mutex;
use redmutex::{Client, HeldLock, Lock, LockGuard, LockKind, Loss, TokenLock};

use crate::connect::ConnectOpts;
use crate::fail::Failure;

/// The lock was lost (or its lease ran out) while the command ran.
pub(crate) const LOST: u8 = 123;
/// The lock was not acquired within `--wait`.
pub(crate) const NOT_ACQUIRED: u8 = 124;
/// `redmutex run` failed before the command ran (usage, connection, Redis).
pub(crate) const OWN_FAILURE: u8 = 125;
/// The command could not be started.
const CANNOT_EXECUTE: u8 = 126;
/// The command was not found.
const NOT_FOUND: u8 = 127;

/// Run a command only while holding a lock (flock(1) for Redis and Redisson)
///
/// Takes the lock NAME (waiting as --wait says), runs the command with REDMUTEX_LOCK=NAME
/// (and REDMUTEX_FENCING_TOKEN for --kind fenced) in its environment, forwards SIGINT and
/// SIGTERM to it, releases the lock when it exits and exits with its status. If the lock
/// is lost meanwhile, the command gets SIGTERM at once and SIGKILL after --grace, and the
/// exit code is 123. Not acquired within --wait: 124; run's own failures (usage,
/// connection): 125; command not executable: 126; not found: 127.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// The lock's name (the Redis key a Redisson getLock(NAME) uses too).
    name: String,
    /// Wait at most this long for the lock (500ms, 10s, 5m, 1h; 0: one attempt)
    /// [default: as long as it takes].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    wait: Option<Duration>,
    /// Hold the lock for at most this long, never renewed; the command is stopped when
    /// it runs out [default: renewed by the watchdog while the command runs].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    lease: Option<Duration>,
    /// The watchdog's lease (Redisson's lockWatchdogTimeout), renewed every third of it
    /// [default: 30s].
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = parse_duration,
        conflicts_with_all = ["lease", "redisson_yaml"]
    )]
    watchdog: Option<Duration>,
    /// The kind of lock: lock (Redisson RLock), fair (RFairLock), fenced (RFencedLock,
    /// whose token goes into REDMUTEX_FENCING_TOKEN) or token (the go-redsync / redis-py
    /// string-token lock).
    #[arg(long, value_enum, default_value = "lock")]
    kind: RunKind,
    /// After the lock is lost, how long the command may take to end after SIGTERM before
    /// it gets SIGKILL.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    grace: Duration,
    #[command(flatten)]
    connect: ConnectOpts,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

/// The lock kinds `run` can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum RunKind {
    Lock,
    Fair,
    Fenced,
    Token,
}

/// What a signal means at each stage of the run; the signal thread reads it.
enum Stage {
    /// Nothing is held yet and nothing runs: a signal ends the process.
    Connecting,
    /// Waiting for the lock: a signal shuts the client down, which wakes the wait.
    Acquiring(Client),
    /// The command runs: signals go to the main loop, which forwards them.
    Running(Sender<Signal>),
}

/// The stage and the signal that interrupted the wait, if one did.
struct Signals {
    stage: Stage,
    interrupted: Option<Signal>,
}

pub(crate) fn run(args: &RunArgs) -> Result<(), Failure> {
    // Blocked before any thread starts, so every thread inherits the mask and only the
    // signal thread's sigwait receives them; `spawn` gives the command a clean mask.
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    set.thread_block()
        .map_err(|e| own(format!("cannot block signals: {e}")))?;
    let signals = Arc::new(Mutex::new(Signals {
        stage: Stage::Connecting,
        interrupted: None,
    }));
    listen(set, Arc::clone(&signals))?;

    let watchdog = args.watchdog;
    let config = args
        .connect
        .config_tuned(|b| match watchdog {
            Some(w) => b.lock_watchdog_timeout(w),
            None => b,
        })
        .map_err(|f| own(f.message))?;
    let client = Client::new(config).map_err(|e| own(e.to_string()))?;
    signals.lock().stage = Stage::Acquiring(client.clone());

    let name = args.name.as_str();
    let mut env = vec![("REDMUTEX_LOCK", name.to_owned())];
    let acquired: redmutex::Result<Option<Held>> = match args.kind {
        RunKind::Lock => take(&client.get_lock(name), args).map(|g| g.map(Held::boxed)),
        RunKind::Fair => take(&client.get_fair_lock(name), args).map(|g| g.map(Held::boxed)),
        RunKind::Fenced => take(&client.get_fenced_lock(name), args).map(|g| {
            g.map(|g| {
                env.push(("REDMUTEX_FENCING_TOKEN", g.token().to_string()));
                Held::boxed(g)
            })
        }),
        RunKind::Token => take_token(&client.get_token_lock(name), args),
    };
    let held = {
        let mut signals = signals.lock();
        if let Some(sig) = signals.interrupted {
            // The client is shut down: a hold granted just before cannot be released
            // and expires with its lease.
            return Err(Failure {
                code: 128 + sig as u8,
                message: format!("{sig} while waiting for lock {name:?}; the command did not run"),
            });
        }
        let held = match acquired {
            Ok(Some(held)) => held,
            Ok(None) => {
                return Err(Failure {
                    code: NOT_ACQUIRED,
                    message: format!(
                        "lock {name:?} not acquired within {:?}; the command did not run",
                        args.wait.unwrap_or_default()
                    ),
                });
            }
            Err(e) => return Err(own(format!("lock {name:?}: {e}"))),
        };
        let (tx, rx) = unbounded();
        signals.stage = Stage::Running(tx);
        (held, rx)
    };
    let (held, forwarded) = held;
    let outcome = supervise(args, held, &env, &forwarded);
    // The release above used the client; its threads stop here.
    client.shutdown();
    outcome
}

/// A failure of `run` itself, before the command ran.
fn own(message: impl Into<String>) -> Failure {
    Failure {
        code: OWN_FAILURE,
        message: message.into(),
    }
}

/// Receives SIGINT and SIGTERM (blocked everywhere) with sigwait and acts as the stage
/// says.
fn listen(set: SigSet, signals: Arc<Mutex<Signals>>) -> Result<(), Failure> {
    std::thread::Builder::new()
        .name("redmutex-signals".into())
        .spawn(move || {
            while let Ok(sig) = set.wait() {
                let mut guard = signals.lock();
                let signals = &mut *guard;
                match &signals.stage {
                    Stage::Connecting => std::process::exit(128 + sig as i32),
                    Stage::Acquiring(client) => {
                        // Under the stage lock, which the main thread takes before it
                        // starts the command: either it sees `interrupted` and stops, or
                        // the stage is already `Running` and the signal is forwarded.
                        signals.interrupted = Some(sig);
                        client.shutdown();
                    }
                    Stage::Running(tx) => {
                        let _ = tx.send(sig);
                    }
                }
            }
        })
        .map_err(|e| own(format!("cannot start the signal thread: {e}")))?;
    Ok(())
}

/// One hold of whichever kind, as `run` needs it.
struct Held {
    guard: Box<dyn Hold>,
    remain: Box<dyn Fn() -> redmutex::Result<Option<Duration>>>,
}

trait Hold {
    fn loss_signal(&self) -> Receiver<Loss>;
    fn release(self: Box<Self>) -> redmutex::Result<()>;
}

impl<K: LockKind> Hold for LockGuard<K> {
    fn loss_signal(&self) -> Receiver<Loss> {
        LockGuard::loss_signal(self)
    }
    fn release(self: Box<Self>) -> redmutex::Result<()> {
        self.unlock()
    }
}

impl Held {
    fn boxed<K: HeldLock>(guard: LockGuard<K>) -> Self {
        let lock = guard.lock().clone();
        Self {
            guard: Box::new(guard),
            remain: Box::new(move || lock.remain_time_to_live()),
        }
    }
}

/// The acquisition `--wait` and `--lease` ask for, on any kind: the four calls have the
/// same names on every lock.
macro_rules! acquire {
    ($lock:expr, $args:expr) => {
        match ($args.wait, $args.lease) {
            (None, None) => $lock.lock().map(Some),
            (None, Some(lease)) => $lock.lock_with_lease(lease).map(Some),
            (Some(wait), None) => $lock.try_lock_for(wait),
            (Some(wait), Some(lease)) => $lock.try_lock_with_lease(wait, lease),
        }
    };
}

fn take<K: HeldLock>(lock: &Lock<K>, args: &RunArgs) -> redmutex::Result<Option<LockGuard<K>>> {
    acquire!(lock, args)
}

fn take_token(lock: &TokenLock, args: &RunArgs) -> redmutex::Result<Option<Held>> {
    let guard = acquire!(lock, args)?;
    let lock = lock.clone();
    Ok(guard.map(|guard| Held {
        guard: Box::new(guard),
        remain: Box::new(move || lock.remain_time_to_live()),
    }))
}

/// Why the command is being stopped.
enum Stop {
    Exited,
    Lost(&'static str),
}

/// Runs the command under `held` and returns how `run` ends.
fn supervise(
    args: &RunArgs,
    held: Held,
    env: &[(&str, String)],
    forwarded: &Receiver<Signal>,
) -> Result<(), Failure> {
    // With a lease nobody renews, the lock ends when its TTL does: read it now, counted
    // from before the read, so the deadline is never later than the key's expiry.
    let lease_end = match args.lease {
        Some(_) => {
            let asked = Instant::now();
            match (held.remain)() {
                Ok(Some(left)) => Some(asked + left.min(Duration::from_secs(86_400 * 365))),
                Ok(None) => Some(asked),
                Err(e) => return Err(release_after(held, own(format!("reading the lease: {e}")))),
            }
        }
        None => None,
    };
    let group = match spawn(&args.command, env) {
        Ok(pid) => pid,
        Err(failure) => return Err(release_after(held, failure)),
    };
    let exited = exit_notice(group);
    let lost = held.guard.loss_signal();
    let lease_timer = lease_end.map_or_else(never, |end| {
        after(end.saturating_duration_since(Instant::now()))
    });
    let stop = loop {
        select! {
            recv(exited) -> _ => break Stop::Exited,
            recv(forwarded) -> sig => if let Ok(sig) = sig {
                signal_group(group, sig);
            },
            recv(lost) -> loss => break Stop::Lost(match loss {
                Ok(Loss::PossiblyLost) => "renewal failed in time; it may be gone",
                _ => "the watchdog found it gone or taken",
            }),
            recv(lease_timer) -> _ => break Stop::Lost("its --lease ran out"),
        }
    };
    if let Stop::Lost(why) = stop {
        eprintln!(
            "redmutex: lock {:?} lost ({why}) while the command ran: SIGTERM to it, SIGKILL \
             after {:?}",
            args.name, args.grace
        );
        terminate(group, args.grace, &exited, forwarded);
    }
    // The child is a zombie now (waitid left it unreaped, so no signal above could reach
    // a recycled pid): reap it.
    let status = loop {
        match waitpid(group, None) {
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(own(format!("waiting for the command: {e}"))),
            Ok(status) => break status,
        }
    };
    let released = held.guard.release();
    match (stop, released) {
        (Stop::Lost(_), _) => Err(Failure {
            code: LOST,
            message: String::new(),
        }),
        (Stop::Exited, Err(e)) if e.is_not_held() => Err(Failure {
            code: LOST,
            message: format!(
                "lock {:?} was found lost when the command had finished ({e}): it may not \
                 have run alone",
                args.name
            ),
        }),
        (Stop::Exited, released) => {
            if let Err(e) = released {
                eprintln!(
                    "redmutex: releasing lock {:?} failed ({e}); it expires with its lease",
                    args.name
                );
            }
            match exit_code(status) {
                0 => Ok(()),
                code => Err(Failure {
                    code,
                    message: String::new(),
                }),
            }
        }
    }
}

/// Releases `held` (best effort: the command never ran) and returns `failure`.
fn release_after(held: Held, failure: Failure) -> Failure {
    if let Err(e) = held.guard.release() {
        eprintln!("redmutex: releasing the lock failed ({e}); it expires with its lease");
    }
    failure
}

/// A channel that receives one message when the child `pid` has exited, without reaping
/// it: until the main thread reaps it, its pid (and process group id) cannot be reused,
/// so signals sent meanwhile reach it or nobody.
fn exit_notice(pid: Pid) -> Receiver<()> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let spawned = std::thread::Builder::new()
        .name("redmutex-child".into())
        .spawn(move || {
            let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT;
            // EINTR cannot happen for the signals we block; anything else ends the wait,
            // and the main thread's blocking wait covers it.
            while let Err(nix::errno::Errno::EINTR) = waitid(Id::Pid(pid), flags) {}
            let _ = tx.send(());
        });
    if spawned.is_err() {
        // No thread: say "exited" now, so the main thread blocks in its own wait.
        let (tx, rx) = crossbeam_channel::bounded(1);
        let _ = tx.send(());
        return rx;
    }
    rx
}

/// SIGTERM to the group now, SIGKILL after `grace`; returns once the child exited.
fn terminate(group: Pid, grace: Duration, exited: &Receiver<()>, forwarded: &Receiver<Signal>) {
    signal_group(group, Signal::SIGTERM);
    let kill_at = after(grace);
    loop {
        select! {
            recv(exited) -> _ => return,
            recv(forwarded) -> sig => if let Ok(sig) = sig {
                signal_group(group, sig);
            },
            recv(kill_at) -> _ => {
                signal_group(group, Signal::SIGKILL);
                let _ = exited.recv();
                return;
            }
        }
    }
}

/// Sends `sig` to the command's process group; a group that is gone already is fine.
fn signal_group(group: Pid, sig: Signal) {
    if let Err(e) = killpg(group, sig)
        && e != nix::errno::Errno::ESRCH
    {
        eprintln!("redmutex: cannot send {sig} to the command: {e}");
    }
}

/// The shell's reading of an exit status: the code, or 128+N for signal N.
fn exit_code(status: WaitStatus) -> u8 {
    match status {
        WaitStatus::Exited(_, code) => (code & 0xff) as u8,
        WaitStatus::Signaled(_, sig, _) => 128 + sig as u8,
        _ => OWN_FAILURE,
    }
}

/// Starts `command` (looked up on `PATH`) with `extra` added to this process's
/// environment, in a process group of its own, with the signal mask and the
/// dispositions a fresh process has: this process blocks SIGINT and SIGTERM (its signal
/// thread takes them) and ignores SIGPIPE (Rust's runtime does), and an exec would pass
/// both on. Returns its pid, which is also its process group's id.
fn spawn(command: &[String], extra: &[(&str, String)]) -> Result<Pid, Failure> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    let c_string = |bytes: Vec<u8>| {
        CString::new(bytes).map_err(|_| own("the command or its environment contains a NUL byte"))
    };
    let argv = command
        .iter()
        .map(|a| c_string(a.clone().into_bytes()))
        .collect::<Result<Vec<_>, _>>()?;
    let program = argv.first().ok_or_else(|| own("no command"))?;
    let mut envp = Vec::new();
    for (key, value) in std::env::vars_os() {
        if extra.iter().any(|(k, _)| key.as_bytes() == k.as_bytes()) {
            continue;
        }
        let mut pair = key.as_bytes().to_vec();
        pair.push(b'=');
        pair.extend_from_slice(value.as_bytes());
        envp.push(c_string(pair)?);
    }
    for (key, value) in extra {
        envp.push(c_string(format!("{key}={value}").into_bytes())?);
    }
    let setup = || -> nix::Result<PosixSpawnAttr> {
        let mut attr = PosixSpawnAttr::init()?;
        let mut defaults = SigSet::empty();
        for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGPIPE] {
            defaults.add(sig);
        }
        attr.set_sigdefault(&defaults)?;
        attr.set_sigmask(&SigSet::empty())?;
        attr.set_pgroup(Pid::from_raw(0))?;
        attr.set_flags(
            PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF
                | PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK
                | PosixSpawnFlags::POSIX_SPAWN_SETPGROUP,
        )?;
        Ok(attr)
    };
    let attr = setup().map_err(|e| own(format!("cannot prepare the command's start: {e}")))?;
    let actions = PosixSpawnFileActions::init()
        .map_err(|e| own(format!("cannot prepare the command's start: {e}")))?;
    posix_spawnp(program, &actions, &attr, &argv, &envp).map_err(|e| {
        let code = if e == nix::errno::Errno::ENOENT {
            NOT_FOUND
        } else {
            CANNOT_EXECUTE
        };
        Failure {
            code,
            message: format!("cannot run {:?}: {}", command[0], e.desc()),
        }
    })
}

/// A duration as an operator writes it: `500ms`, `10s`, `1.5s`, `5m`, `1h`; a bare
/// number is seconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let bad = || format!("`{text}` is no duration: write it as 500ms, 10s, 5m or 1h");
    let n: f64 = number.parse().map_err(|_| bad())?;
    let seconds = match unit.trim() {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(bad()),
    };
    Duration::try_from_secs_f64(seconds).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_operators_write_them() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn exit_statuses_read_as_the_shell_does() {
        let pid = Pid::from_raw(1);
        assert_eq!(exit_code(WaitStatus::Exited(pid, 3)), 3);
        assert_eq!(
            exit_code(WaitStatus::Signaled(pid, Signal::SIGTERM, false)),
            143
        );
    }
}
