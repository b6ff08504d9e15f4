//! Interop scenarios with real Redisson clients, written once for every multi-node
//! topology: each topology module of `tests/redisson` (`cluster`, `sentinel`) implements
//! [`Topology`] for its shared deployment and declares the scenarios with
//! [`redisson_scenarios!`](crate::redisson_scenarios).
//!
//! Both sides load one Redisson YAML file ([`Topology::yaml`]): the Java peer with
//! `Config.fromYAML`, redmutex with `Config::from_redisson_yaml_file`. Every scenario runs for
//! every Redisson version (4.7.0 and 3.23.5, or `REDMUTEX_REDISSON_VERSIONS`) with a
//! fresh peer, and prints one line per version. Timing assertions are hang guards far
//! below the leases: a waiter that got in within [`WAKE_BOUND`] of the release was woken
//! by the release's message, not by an expiry.

pub(crate) mod failover;
pub(crate) mod fair_lock;
pub(crate) mod lock;
pub(crate) mod loss;
pub(crate) mod synchronizers;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use redmutex::{Client, Config};

use crate::peer::{self, Peer, Pending};
use crate::support::deploy::Deployment;
use crate::support::reopening::Reopening;
use crate::support::{eventually, supervised};

/// Redisson's default watchdog, and ours.
pub(crate) const WATCHDOG_MS: u64 = 30_000;
/// "Well before any lease could run out": the bound on message wake-ups.
pub(crate) const WAKE_BOUND: Duration = Duration::from_secs(5);
/// Hang guard for replies that should take milliseconds.
pub(crate) const HANG: Duration = Duration::from_secs(60);

/// What a scenario needs from the deployment beyond [`Deployment`]: the Redisson YAML
/// both sides load, lock names that share a node, and a failover.
pub(crate) trait Topology: Deployment {
    /// Heals the deployment when dropped (see [`Topology::disrupt`]).
    type Disruption<'a>
    where
        Self: 'a;

    /// `cluster` or `sentinel`, for file names and printed lines.
    fn label(&self) -> &'static str;

    /// The deployment's directory (the YAML files go in its `files/`).
    fn root(&self) -> &Path;

    /// The Redisson YAML naming the deployment, without `lockWatchdogTimeout`.
    fn redisson_yaml_text(&self) -> String;

    /// Two lock names derived from `base` whose keys live on one master.
    fn colocated(&self, base: &str) -> [String; 2];

    /// Heals now and when the guard drops; serialises disruptive scenarios.
    fn disrupt(&self) -> Self::Disruption<'_>;

    /// SIGKILLs the master that serves `key` and waits until the deployment agrees on
    /// the replica promoted in its place. Returns the old and new master's ports.
    fn kill_master_of(&self, key: &str) -> (u16, u16);

    /// SIGSTOPs (`frozen`) or SIGCONTs every replica of the master serving `key`. A
    /// frozen replica acknowledges nothing, so a `WAIT` on that master times out while
    /// the master itself answers everything else.
    fn freeze_replicas_of(&self, key: &str, frozen: bool);

    /// The YAML file of this deployment with `lockWatchdogTimeout: watchdog_ms`, the
    /// file both sides of a scenario load.
    fn yaml(&self, watchdog_ms: u64) -> PathBuf {
        let path = supervised::files_dir(self.root())
            .join(format!("redisson-{}-{watchdog_ms}.yaml", self.label()));
        let text = format!(
            "lockWatchdogTimeout: {watchdog_ms}\n{}",
            self.redisson_yaml_text()
        );
        // Scenarios run one at a time, and every writer writes the same text.
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path
    }

    /// A redmutex client configured by [`yaml`](Self::yaml)`(watchdog_ms)`.
    fn yaml_client(&self, watchdog_ms: u64) -> Client {
        let path = self.yaml(watchdog_ms);
        let config = Config::from_redisson_yaml_file(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        Client::new(config).unwrap()
    }
}

/// Runs `f` once per Redisson version with a fresh peer started from
/// [`Topology::yaml`]`(watchdog_ms)`; prints one line per version and fails at the end
/// if any version failed (with the failed peer's stderr).
pub(crate) fn run_versions<T: Topology>(
    t: &T,
    scenario: &str,
    watchdog_ms: u64,
    f: impl Fn(&Peer),
) {
    let mut failed = Vec::new();
    for v in peer::versions() {
        let started = Instant::now();
        let peer = Peer::start_yaml(&v, &t.yaml(watchdog_ms), watchdog_ms);
        match catch_unwind(AssertUnwindSafe(|| f(&peer))) {
            Ok(()) => {
                println!(
                    "{scenario} ({}), Redisson {v}: ok ({:.1}s)",
                    t.label(),
                    started.elapsed().as_secs_f64()
                );
                peer.quit();
            }
            Err(e) => {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                println!(
                    "{scenario} ({}), Redisson {v}: FAILED: {msg}\n{}",
                    t.label(),
                    peer.stderr_tail()
                );
                failed.push(v);
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{scenario} failed for Redisson {failed:?}"
    );
}

/// `PUBSUB <kind>NUMSUB channel` on `raw`; no sharded subscribers where the server has
/// no sharded pub/sub (Redis 6.2).
pub(crate) fn subscribers(raw: &mut impl redis::ConnectionLike, kind: &str, channel: &str) -> i64 {
    if kind == "SHARD" && !crate::support::server().has_sharded_pubsub() {
        return 0;
    }
    let (_, n): (String, i64) = redis::cmd("PUBSUB")
        .arg(format!("{kind}NUMSUB"))
        .arg(channel)
        .query(raw)
        .unwrap();
    n
}

/// Waits until the node serving `channel` counts at least `n` subscribers of either
/// kind: the way to know that a waiter (Java or Rust) sleeps on its channel.
pub(crate) fn await_waiters<T: Topology>(t: &T, channel: &str, n: i64) {
    // Also called right after a failover: see `Reopening`.
    let mut raw = Reopening::new(|| t.raw(channel));
    eventually(HANG, &format!("{n} subscriber(s) of {channel}"), || {
        subscribers(&mut raw, "", channel) + subscribers(&mut raw, "SHARD", channel) >= n
    });
}

/// The reply of a Java command that must succeed, with when it arrived.
pub(crate) fn java_ok(p: Pending) -> (String, Instant) {
    let (reply, at) = p.wait_timed(HANG);
    (reply.unwrap_or_else(|e| panic!("java: {e}")), at)
}

/// How long an application keeps retrying a call that failed inside a failover window
/// (counted from the first failure), and how long it pauses between attempts.
pub(crate) const WINDOW_RETRY: Duration = Duration::from_secs(60);
/// See [`WINDOW_RETRY`].
pub(crate) const WINDOW_PAUSE: Duration = Duration::from_millis(500);

/// Whether a Java error is what a failover window throws (Redisson's `Redis*Exception`s:
/// the node is gone, a reply timed out, the slot map or the sentinels were mid-change),
/// rather than a verdict on the lock (`IllegalMonitorStateException` and friends).
pub(crate) fn failover_error(e: &str) -> bool {
    let class = e.split_whitespace().next().unwrap_or_default();
    class.starts_with("Redis") || class.starts_with("WriteRedis")
}

/// The calls a scenario makes inside a failover window, retried as an application
/// would retry them: a failure that [`failover_error`] recognises is logged and the call
/// is made again after [`WINDOW_PAUSE`], for [`WINDOW_RETRY`] after its first failure;
/// any other error, or a window that never closes, fails the scenario. The scenario then
/// judges what matters: that no two hold a lock at once (by the lock's own hash), and
/// that every call got through in the end.
pub(crate) struct Window {
    /// The kill, once it happened (the log says how long after it a call failed).
    opened: Mutex<Option<Instant>>,
    log: Mutex<Vec<String>>,
}

impl Window {
    /// A window whose failover has not begun yet: calls in flight before it are
    /// retried too, and logged as such.
    pub(crate) fn new() -> Self {
        Self {
            opened: Mutex::new(None),
            log: Mutex::new(Vec::new()),
        }
    }

    /// Marks the start of the failover (the kill).
    pub(crate) fn open(&self) {
        *self.opened.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    }

    /// Notes a failed attempt of `what`, with how long after the kill it failed.
    pub(crate) fn note(&self, what: &str, error: &str) {
        let when = match *self.opened.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(at) => format!("{:.1?} after the kill", at.elapsed()),
            None => "before the kill".to_owned(),
        };
        let line = format!("{what} failed {when} ({error}); retried");
        println!("  failover window: {line}");
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(line);
    }

    /// How many failed attempts were retried so far.
    pub(crate) fn retries(&self) -> usize {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// The failed attempts, one per line, for the scenario's report.
    pub(crate) fn report(&self) -> String {
        let log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        if log.is_empty() {
            return "no call failed in the failover window".to_owned();
        }
        format!("{} retried call(s): {}", log.len(), log.join("; "))
    }

    /// Runs Java command `cmd(left)` on peer thread `thread` until it succeeds; `left`
    /// is what remains of `budget` since the first attempt, for commands that carry a
    /// wait of their own (`trylock`), so that a retry waits no longer than the
    /// application's first call would have. Returns the reply, the instant it arrived,
    /// and how many attempts failed before it.
    pub(crate) fn java(
        &self,
        peer: &Peer,
        thread: &str,
        budget: Duration,
        cmd: impl Fn(Duration) -> String,
    ) -> (String, Instant, u32) {
        let started = Instant::now();
        let mut failed_since: Option<Instant> = None;
        let mut failures = 0;
        loop {
            let line = cmd(budget.saturating_sub(started.elapsed()));
            let (reply, at) = peer.send(thread, &line).wait_timed(HANG + budget);
            match reply {
                Ok(v) => return (v, at, failures),
                Err(e) if failover_error(&e) => {
                    let first = *failed_since.get_or_insert(at);
                    assert!(
                        first.elapsed() < WINDOW_RETRY,
                        "java `{line}` still failing {WINDOW_RETRY:?} after its first failure: {e}"
                    );
                    failures += 1;
                    self.note(&format!("java [{thread}] `{line}`"), &e);
                    // An application's retry pause: the failure gives no signal of when
                    // the node is back.
                    thread::sleep(WINDOW_PAUSE);
                }
                Err(e) => panic!("java [{thread}] `{line}`: {e}"),
            }
        }
    }

    /// [`java`](Self::java) for a command without a wait of its own; returns the reply.
    pub(crate) fn java_ok(&self, peer: &Peer, thread: &str, cmd: &str) -> String {
        self.java(peer, thread, Duration::ZERO, |_| cmd.to_owned())
            .0
    }

    /// Releases every hold Java thread `thread` has on `name`, retrying as
    /// [`java`](Self::java) does. An unlock whose reply was lost may have been applied,
    /// and a lost `tryLock` reply may have taken a second, reentrant hold: so after each
    /// unlock the lock's hash is read, and the thread unlocks again while its field is
    /// still there. An unlock refused as not held after a failed attempt is that
    /// attempt's success. An unlock refused as not held while `held_in_redis` (the
    /// lock's hash on the node the deployment names now) still has the thread's field
    /// went to a node that is not the master yet or any more (Redisson 3.23.5 after a
    /// sentinel failover): a failover-window failure like the others, retried. Returns
    /// how many unlocks it took.
    pub(crate) fn java_release(
        &self,
        peer: &Peer,
        thread: &str,
        name: &str,
        held_in_redis: impl Fn() -> bool,
    ) -> u32 {
        let started = Instant::now();
        let mut unlocks = 0;
        let mut unlock_failed = false;
        loop {
            unlocks += 1;
            assert!(
                started.elapsed() < WINDOW_RETRY,
                "java [{thread}] still holds {name} after {unlocks} unlocks in {WINDOW_RETRY:?}"
            );
            match peer.call_timeout(thread, &format!("unlock {name}"), HANG) {
                Ok(_) => {}
                Err(e) if failover_error(&e) => {
                    unlock_failed = true;
                    self.note(&format!("java [{thread}] `unlock {name}`"), &e);
                    thread::sleep(WINDOW_PAUSE);
                }
                Err(e) if e.starts_with("IllegalMonitorStateException") && unlock_failed => {}
                Err(e) if e.starts_with("IllegalMonitorStateException") && held_in_redis() => {
                    unlock_failed = true;
                    self.note(
                        &format!("java [{thread}] `unlock {name}` (its hold is on the master)"),
                        &e,
                    );
                    thread::sleep(WINDOW_PAUSE);
                }
                Err(e) => panic!("java [{thread}] `unlock {name}`: {e}"),
            }
            // Judged by the hash itself: Redisson's own isHeld may be misrouted too.
            if !held_in_redis() {
                return unlocks;
            }
        }
    }
}

/// How long after `release` the waiter `wait` (run on another thread once its channel
/// has a subscriber) got through.
pub(crate) fn woken_after<T: Topology>(
    t: &T,
    channel: &str,
    wait: impl FnOnce() -> Instant + Send,
    release: impl FnOnce(),
) -> Duration {
    thread::scope(|s| {
        let w = s.spawn(wait);
        await_waiters(t, channel, 1);
        let released = Instant::now();
        release();
        w.join().unwrap().duration_since(released)
    })
}

/// Declares one `#[test]` per shared scenario, run against `topology` (an expression
/// giving `&impl Topology`, evaluated in each test) under `#[serial(key)]`: every
/// scenario starts JVMs, and the failover moves a master.
#[macro_export]
macro_rules! redisson_scenarios {
    ($key:ident on $topology:expr) => {
        $crate::redisson_scenarios!(@each $key, $topology;
            lock::mixed_mutual_exclusion_keeps_an_exact_counter,
            lock::wake_ups_both_ways_and_the_java_publish_command,
            fair_lock::fair_lock_waiters_of_both_languages_acquire_in_arrival_order,
            synchronizers::rwlock_semaphore_and_latch_wake_ups_both_ways,
            failover::a_failover_with_both_sides_holding_and_waiting,
            loss::one_unsynced_renewal_ends_redisson_3_renewals_silently,
        );
    };
    (@each $key:ident, $topology:expr; $($module:ident :: $name:ident),* $(,)?) => {
        $(
            #[test]
            #[::serial_test::serial($key)]
            fn $name() {
                $crate::redisson_topology::$module::$name($topology)
            }
        )*
    };
}
