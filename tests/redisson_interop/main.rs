//! Interoperability with real Redisson clients.
//!
//! Every scenario runs against every Redisson version in `REDMUTEX_REDISSON_VERSIONS`
//! (default `4.7.0,3.23.5`), each on its own `redis-server`, with the Java peer of
//! `tests/interop` (driven by the harness's `peer` module) as the other side. Each version prints a
//! line `scenario N version V: ok`; a failing version does not hide the others' results.
//!
//! Needs `redis-server`, a JDK and Maven on PATH (the peer is built on first use);
//! scenario 12 also runs the JDK's `jstack` on the peer.
//! Timing assertions are hang guards only (far below the 30 s lease where a message is
//! what must wake a waiter); measured latencies are printed, not asserted.
//!
//! The two heavy scenarios (1: 16,000 critical sections, 9: latency measurement) run
//! `#[serial]`, alone; the others `#[parallel]` with each other.
//!
//! One module per lock kind (`lock`, `lease` for `RLock` leases, `fair_lock`, `rwlock`,
//! `semaphore`, `latch`, `fenced`, `spin`, `non_reentrant`, `multi` for MultiLock and
//! RedLock, `expiry` for the expiry family), `latency` for the measurement; the harness
//! shared by all of them is here and in `holder`.

use redmutex_harness as support;
use redmutex_harness::peer;

mod config;
mod expiry;
mod fair_lock;
mod fenced;
mod holder;
mod latch;
mod latency;
mod lease;
mod lock;
mod multi;
mod non_reentrant;
mod red_lock;
mod rwlock;
mod semaphore;
mod spin;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::thread;
use std::time::{Duration, Instant};

use support::raw::{hgetall, numsub};

/// Hang guard for anything that should take milliseconds.
pub(crate) const HANG: Duration = Duration::from_secs(60);
/// Default lease (Redisson's and ours): a waiter woken well before it can only have been
/// woken by the unlock message.
pub(crate) const WATCHDOG_MS: u64 = 30_000;
/// "Well before the TTL could expire": the bound asserted on message wake-ups.
pub(crate) const WAKE_BOUND: Duration = Duration::from_secs(5);

/// Runs `f` once per Redisson version, prints one result line per version and fails at
/// the end if any version failed.
pub(crate) fn run_versions(scenario: u32, f: impl Fn(&str)) {
    let mut failed = Vec::new();
    for v in peer::versions() {
        let started = Instant::now();
        match catch_unwind(AssertUnwindSafe(|| f(&v))) {
            Ok(()) => println!(
                "scenario {scenario} version {v}: ok ({:.1}s)",
                started.elapsed().as_secs_f64()
            ),
            Err(e) => {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                println!("scenario {scenario} version {v}: FAILED: {msg}");
                failed.push(v);
            }
        }
    }
    assert!(
        failed.is_empty(),
        "scenario {scenario} failed for Redisson {failed:?}"
    );
}

/// Waits (event-driven, polling Redis) until `channel` has at least `n` subscribers.
pub(crate) fn wait_subscribers(conn: &mut redis::Connection, channel: &str, n: i64) {
    let end = Instant::now() + HANG;
    while numsub(conn, channel) < n {
        assert!(
            Instant::now() < end,
            "nobody subscribed {channel} within {HANG:?}"
        );
        thread::sleep(Duration::from_millis(2));
    }
}

/// Asserts that `who` woke `latency` after the other side's release: well before any
/// TTL could have ended its wait, so the release's message woke it.
pub(crate) fn assert_woken_by_message(who: &str, latency: Duration) {
    assert!(
        latency < WAKE_BOUND,
        "{who} woke after {latency:?}: not by the message"
    );
}

/// Asserts that `reply` is Redisson's refusal to release a lock it does not hold.
pub(crate) fn assert_imse(reply: &str) {
    assert!(
        reply.starts_with("IllegalMonitorStateException"),
        "expected IllegalMonitorStateException, got {reply:?}"
    );
}

/// The only field of the lock hash, which must start with `prefix` and hold `count`.
pub(crate) fn assert_single_field(
    conn: &mut redis::Connection,
    name: &str,
    prefix: &str,
    count: &str,
) {
    let h = hgetall(conn, name);
    assert_eq!(h.len(), 1, "lock hash {name}: {h:?}");
    let (field, value) = h.iter().next().unwrap();
    let thread = field.strip_prefix(prefix);
    assert!(
        thread.is_some_and(|t| t.parse::<u64>().is_ok()),
        "field {field:?} is not {prefix}<thread number>"
    );
    assert_eq!(value, count, "hold count in {h:?}");
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
