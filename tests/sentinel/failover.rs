//! Failovers with locks held and waiters waiting: `SENTINEL FAILOVER`, and SIGKILL of
//! the master.
//!
//! Each lock has a holder (one client) and a waiter (another client) asleep on its
//! channel when the master moves. Afterwards the waiters' subscriptions must appear on
//! the new master (the listener moved them), every holder either still holds its lock
//! on the new master (the watchdog renews it there) or was told it is lost, and every
//! waiter acquires once its holder released. Two threads are never inside one lock's
//! section unless the holder had been told of the loss first. A probe client locks and
//! unlocks throughout; the longest gap between two of its cycles is the
//! unavailability window, printed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redmutex::{Client, Error};
use serial_test::serial;

use crate::support::deploy::Deployment;
use crate::support::raw::{hgetall, lock_channel, numsub, pttl};
use crate::support::reopening::Reopening;
use crate::support::sentinel::{DataNode, SentinelSet, shared};
use crate::support::{eventually, unique};

/// Leases of the holders: long enough that a renewal on the new master is due well
/// within the lease, short enough that a lost lock expires within the test.
const WATCHDOG: Duration = Duration::from_secs(12);
/// Locks (holder + waiter pairs) per failover.
const PAIRS: usize = 3;
/// Hang guard for waiters after their holder's release (far below the lease: a waiter
/// that got the lock this soon was woken by the unlock message, not by the expiry).
const WAKE_BOUND: Duration = Duration::from_secs(5);

/// What happened to one lock.
#[derive(Debug, Default)]
struct Pair {
    /// When the holder was told its hold is lost, if it was.
    lost_at: Option<Instant>,
    /// When the holder's release was about to be sent (its unlock returns later: after
    /// the release's `WAIT` for the replicas, which a waiter woken by the release's
    /// message need not wait for), and whether it said `LockLost`.
    released_at: Option<Instant>,
    release_said_lost: bool,
    /// When the waiter acquired.
    acquired_at: Option<Instant>,
}

/// Lock/unlock cycles of a probe client until `stop`: the instants of completed cycles.
fn probe(client: Client, name: String, stop: Arc<AtomicBool>) -> Vec<Instant> {
    let lock = client.get_lock(name);
    let mut done = vec![Instant::now()];
    while !stop.load(Ordering::Acquire) {
        match lock.try_lock() {
            Ok(Some(guard)) => {
                if guard.unlock().is_ok() {
                    done.push(Instant::now());
                }
            }
            Ok(None) => panic!("nobody else takes the probe lock"),
            Err(_) => {}
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    done
}

fn longest_gap(cycles: &[Instant], from: Instant) -> Duration {
    cycles
        .windows(2)
        .filter(|w| w[1] >= from)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or_default()
}

fn failover_with_holders_and_waiters(
    what: &str,
    move_master: impl FnOnce(&SentinelSet) -> DataNode,
) {
    let set = shared();
    let _d = set.disrupt();
    let old = set.master();
    let holders = set.client_with_watchdog(WATCHDOG);
    let waiters = set.client_with_watchdog(WATCHDOG);
    let names: Vec<String> = (0..PAIRS).map(|_| unique("s-fo")).collect();
    let pairs: Vec<Arc<Mutex<Pair>>> = (0..PAIRS).map(|_| Arc::default()).collect();
    let guards: Vec<_> = names
        .iter()
        .map(|n| holders.get_lock(n).lock().unwrap())
        .collect();

    let stop_probe = Arc::new(AtomicBool::new(false));
    std::thread::scope(|s| {
        let prober = {
            let stop = Arc::clone(&stop_probe);
            let client = set.client();
            let name = unique("s-probe");
            s.spawn(move || probe(client, name, stop))
        };
        let waiting: Vec<_> = names
            .iter()
            .zip(&pairs)
            .map(|(name, pair)| {
                let lock = waiters.get_lock(name);
                let pair = Arc::clone(pair);
                s.spawn(move || {
                    let guard = lock.lock().unwrap();
                    pair.lock().acquired_at = Some(Instant::now());
                    guard.unlock().unwrap();
                })
            })
            .collect();
        let mut raw = old.conn();
        for name in &names {
            eventually(
                Duration::from_secs(10),
                "waiters subscribed on the old master",
                || numsub(&mut raw, &lock_channel(name)) == 1,
            );
        }
        // Loss watchers: they record when a holder is told.
        for (guard, pair) in guards.iter().zip(&pairs) {
            let signal = guard.loss_signal();
            let pair = Arc::clone(pair);
            s.spawn(move || {
                if signal.recv().is_ok() {
                    pair.lock().lost_at = Some(Instant::now());
                }
            });
        }

        let started = Instant::now();
        let new = move_master(set);
        let agreed = started.elapsed();
        assert_ne!(new.port, old.port);
        // The test's own reads after the failover: see `Reopening`.
        let mut raw = Reopening::new(|| new.conn());
        for name in &names {
            eventually(
                Duration::from_secs(20),
                "waiters resubscribed on the new master",
                || numsub(&mut raw, &lock_channel(name)) == 1,
            );
        }
        let resubscribed = started.elapsed();
        // A hold that is still kept must be renewed on the new master: its TTL there
        // climbs back above the lowest value seen (it only falls between renewals).
        for (name, guard) in names.iter().zip(&guards) {
            let mut lowest = i64::MAX;
            eventually(
                WATCHDOG,
                "a renewal on the new master, or a loss report",
                || {
                    let ttl = pttl(&mut raw, name);
                    lowest = lowest.min(ttl);
                    guard.is_lost() || ttl > lowest + 500
                },
            );
            if !guard.is_lost() {
                let fields = hgetall(&mut raw, name);
                assert!(
                    fields.keys().all(|k| k.starts_with(holders.id())),
                    "{name}: kept hold missing on the new master: {fields:?}"
                );
            }
        }
        let renewed = started.elapsed();

        for (guard, pair) in guards.into_iter().zip(&pairs) {
            pair.lock().released_at = Some(Instant::now());
            let outcome = guard.unlock();
            let mut p = pair.lock();
            match outcome {
                Ok(()) => {}
                Err(Error::LockLost { .. }) => p.release_said_lost = true,
                Err(e) => panic!("release after {what}: {e:?}"),
            }
        }
        for w in waiting {
            w.join().unwrap();
        }
        stop_probe.store(true, Ordering::Release);
        let cycles = prober.join().unwrap();
        let window = longest_gap(&cycles, started);

        let mut kept = 0;
        for (name, pair) in names.iter().zip(&pairs) {
            let p = pair.lock();
            let acquired = p.acquired_at.expect("every waiter acquires");
            let released = p.released_at.expect("every holder released");
            let told = p.lost_at.is_some() || p.release_said_lost;
            if !told {
                kept += 1;
            }
            if acquired < released {
                let lost_at = p.lost_at.unwrap_or_else(|| {
                    panic!("{name}: waiter acquired before the release of a holder never told")
                });
                assert!(
                    lost_at <= acquired,
                    "{name}: two holders before the loss was reported"
                );
            } else {
                assert!(
                    acquired - released < WAKE_BOUND,
                    "{name}: waiter acquired {:?} after the release",
                    acquired - released
                );
            }
        }
        println!(
            "sentinel {what}: sentinels agreed after {agreed:?}, waiters resubscribed after \
             {resubscribed:?}, kept holds renewed by {renewed:?}; {kept}/{PAIRS} holds kept (the \
             others reported lost); probe unavailability window {window:?} over {} cycles",
            cycles.len()
        );
    });
}

#[test]
#[serial(sentinel)]
fn sentinel_failover_keeps_or_reports_holds_and_every_waiter_acquires() {
    failover_with_holders_and_waiters("SENTINEL FAILOVER", SentinelSet::failover);
}

#[test]
#[serial(sentinel)]
fn a_killed_master_keeps_or_reports_holds_and_every_waiter_acquires() {
    failover_with_holders_and_waiters("SIGKILL of the master", SentinelSet::kill_master);
}

#[test]
#[serial(sentinel)]
fn after_sentinel_failover_locks_go_to_the_new_master_before_the_old_one_is_demoted() {
    // The old master accepts writes for ~11 s after the switch, until the sentinels
    // reconfigure it; a client that waited for READONLY or a closed connection would
    // go on granting locks there that the new master grants again. The bound below is
    // half of that window: only the +switch-master event or the scan finds the move.
    let set = shared();
    let _d = set.disrupt();
    let client = set.client();
    client
        .get_lock(unique("s-warm"))
        .lock()
        .unwrap()
        .unlock()
        .unwrap();
    let old = set.master();
    let started = Instant::now();
    let new = set.failover();
    let agreed = started.elapsed();
    // The old master is demoted (with `CLIENT KILL`) while this test reads: see `Reopening`.
    let mut on_old = Reopening::new(|| old.conn());
    let mut on_new = Reopening::new(|| new.conn());
    let name = unique("s-after");
    eventually(
        Duration::from_secs(5),
        "locks going to the new master",
        || {
            let guard = client.get_lock(&name).lock().unwrap();
            let there = !hgetall(&mut on_new, &name).is_empty();
            guard.unlock().unwrap();
            there
        },
    );
    let moved = started.elapsed();
    let role: redis::Value = redis::cmd("ROLE").query(&mut on_old).unwrap();
    println!(
        "sentinel failover: sentinels agreed after {agreed:?}, locks on the new master after \
         {moved:?}; the old master then said {role:?}"
    );
}
