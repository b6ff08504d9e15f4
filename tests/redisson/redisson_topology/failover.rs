//! A failover with Java and Rust each holding one lock and waiting for the other's.

use std::panic::resume_unwind;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redis::ConnectionLike;
use redmutex::{Error, Loss};

use crate::support::raw::{exists, hgetall, lock_channel, pttl};
use crate::support::reopening::Reopening;
use crate::support::{eventually, unique};

use super::{Topology, WAKE_BOUND, WATCHDOG_MS, WINDOW_PAUSE, Window, await_waiters, run_versions};

/// The holders' leases on both sides: a renewal falls due every 6.7 s, so one lands on
/// the new master within the scenario, and the few seconds a promotion takes stay far
/// inside the 10 s that Loss::PossiblyLost leaves after the last confirmed renewal (the
/// kill follows one).
const HOLD_WATCHDOG_MS: u64 = 20_000;

/// Waits until the TTL of `key` rises on `raw` (a renewal: it only falls between
/// renewals) or `lost()` says the holder was told it lost the lock; bounded by the lease,
/// after which an unrenewed hold is gone. True when renewed.
fn renewed_or_lost(
    raw: &mut impl ConnectionLike,
    key: &str,
    what: &str,
    lost: impl Fn() -> bool,
) -> bool {
    let mut last = pttl(raw, key);
    eventually(
        Duration::from_millis(HOLD_WATCHDOG_MS),
        &format!("a renewal of {what}, or a loss report"),
        || {
            let now = pttl(raw, key);
            let rose = now > last;
            last = now;
            rose || lost()
        },
    );
    !lost()
}

/// Waits until every replica of the master serving `key` acknowledged everything that
/// master executed so far (a write of our own, then `WAIT`): a promoted replica then
/// has the locks, and the scenario tests the failover, not the replication lag.
fn replicated<T: Topology>(t: &T, key: &str) -> i64 {
    let mut raw = t.raw(key);
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query(&mut raw)
        .unwrap();
    let replicas: i64 = info
        .lines()
        .find_map(|l| l.strip_prefix("connected_slaves:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no connected_slaves in {info}"));
    // `WAIT` covers the writes of its own connection, so it needs one; the tag puts it
    // on `key`'s node.
    redis::cmd("SET")
        .arg(format!("{{{key}}}:synced"))
        .arg(1)
        .arg("PX")
        .arg(60_000)
        .exec(&mut raw)
        .unwrap();
    let acked: i64 = redis::cmd("WAIT")
        .arg(replicas)
        .arg(10_000)
        .query(&mut raw)
        .unwrap();
    assert_eq!(acked, replicas, "replicas acknowledged before the kill");
    replicas
}

/// Java and Rust each hold a lock on one master and each wait for the other's; the
/// master is SIGKILLed and a replica promoted. Afterwards both holds are still there
/// on the new master and renewed there by their own side (Java: `isHeldByCurrentThread`
/// and a TTL that rose), both waiters are subscribed there, neither waiter got in
/// before the holder's unlock was sent, and each gets its lock soon after it.
///
/// A call that fails inside the failover window (Redisson's `Connection refused` to the
/// killed master, a timeout while the slot map or the sentinels change) is what an
/// application sees there: it is retried as one would retry it, logged, and the
/// scenario judges safety and progress rather than the first error (see [`Window`]).
/// Safety is read from the lock hashes themselves: when a waiter gets in, its lock's
/// hash names it and nobody else. The "woken within [`WAKE_BOUND`]" bounds apply to the
/// wake-ups that no retry stood in for.
pub(crate) fn a_failover_with_both_sides_holding_and_waiting<T: Topology>(t: &T) {
    run_versions(t, "SIGKILL failover", HOLD_WATCHDOG_MS, |peer| {
        let _d = t.disrupt();
        let [rust_name, java_name] = t.colocated(&unique("ri-fo"));
        let holder = t.yaml_client(HOLD_WATCHDOG_MS);
        let waiter = t.yaml_client(WATCHDOG_MS);
        let rust_guard = holder.get_lock(rust_name.clone()).lock().unwrap();
        peer.ok("h", &format!("lock {java_name}"));
        let java_holder_field = peer.field(&peer.thread_id("h"));
        let java_waiter_field = peer.field(&peer.thread_id("w"));
        let window = Window::new();
        // Each set just before its side's unlock is sent: a waiter that gets in sees it
        // set, or two held the lock at once.
        let java_unlock_sent = AtomicBool::new(false);
        let rust_unlock_sent = AtomicBool::new(false);
        let report = thread::scope(|s| {
            let java_wait = s.spawn(|| {
                let (reply, at, failures) =
                    window.java(peer, "w", Duration::from_secs(60), |left| {
                        format!("trylock {rust_name} {}", left.as_millis())
                    });
                let after_unlock = rust_unlock_sent.load(Ordering::SeqCst);
                let holders = hash_fields(t, &rust_name);
                (reply, at, failures, after_unlock, holders)
            });
            let rust_wait = s.spawn(|| {
                let lock = waiter.get_lock(java_name.clone());
                let deadline = Instant::now() + Duration::from_secs(60);
                let mut failures = 0u32;
                let g = loop {
                    match lock.try_lock_for(deadline.saturating_duration_since(Instant::now())) {
                        Ok(Some(g)) => break g,
                        Ok(None) => panic!("the Rust waiter did not get the Java-held lock"),
                        // Bounded by the deadline: past it the next call answers None.
                        Err(e) => {
                            failures += 1;
                            window.note("rust waiter's try_lock_for", &e.to_string());
                            thread::sleep(WINDOW_PAUSE);
                        }
                    }
                };
                let at = Instant::now();
                // Set before the unlock is sent: if it is not, two held the lock.
                let after_unlock = java_unlock_sent.load(Ordering::SeqCst);
                let holders = hash_fields(t, &java_name);
                g.unlock().unwrap();
                (at, failures, after_unlock, holders)
            });
            await_waiters(t, &lock_channel(&rust_name), 1);
            await_waiters(t, &lock_channel(&java_name), 1);
            // Kill right after a renewal of the Rust hold: its warning margin (10 s) then
            // counts from the kill. Killed late in a renewal period, a loaded machine's
            // promotion and re-routing could outlast what was left of it, and the hold
            // was presumed lost although it survived.
            let mut old_raw = t.raw(&rust_name);
            let fresh = renewed_or_lost(
                &mut old_raw,
                &rust_name,
                "the Rust hold before the kill",
                || rust_guard.is_lost(),
            );
            assert!(fresh, "the Rust hold was lost before the kill");
            let replicas = replicated(t, &rust_name);

            let began = Instant::now();
            window.open();
            let (old, new) = t.kill_master_of(&rust_name);
            let agreed = began.elapsed();
            // The test's own reads on the new master: see `Reopening`.
            let mut raw = Reopening::new(|| t.raw(&rust_name));
            for n in [&rust_name, &java_name] {
                assert!(exists(&mut raw, n), "{n} is not on the new master {new}");
            }
            // The waiters moved with the master.
            await_waiters(t, &lock_channel(&rust_name), 1);
            await_waiters(t, &lock_channel(&java_name), 1);
            let resubscribed = began.elapsed();
            // Redisson may still be finding the new master: the reply comes when it has.
            assert_eq!(
                window.java_ok(peer, "h", &format!("isheld {java_name}")),
                "true",
                "the Java hold is gone"
            );
            let java_back = began.elapsed();
            let renewed = Instant::now();
            // A loss report instead of a renewal is the honest alternative: a loaded
            // machine may stall the holder's watchdog past its warning margin.
            let rust_kept = renewed_or_lost(
                &mut raw,
                &rust_name,
                "the Rust hold on the new master",
                || rust_guard.is_lost(),
            );
            // Redisson tells nobody of a loss: its hold must be renewed.
            assert!(renewed_or_lost(
                &mut raw,
                &java_name,
                "the Java hold on the new master",
                || false
            ));
            let renewals = renewed.elapsed();
            // Nobody got in meanwhile.
            assert!(!rust_wait.is_finished(), "the Rust waiter got in early");
            // Unless the Rust holder was told of its loss: then the Java waiter may be in.
            assert!(
                !rust_kept || !java_wait.is_finished(),
                "the Java waiter got in early"
            );

            java_unlock_sent.store(true, Ordering::SeqCst);
            let java_released = Instant::now();
            let retried = window.retries();
            window.java_release(peer, "h", &java_name, || {
                hash_fields(t, &java_name).contains(&java_holder_field)
            });
            let java_unlock_retried = window.retries() > retried;
            // A waiter's panic is the scenario's failure, with its own message.
            let (rust_at, rust_failures, after_unlock, holders) =
                rust_wait.join().unwrap_or_else(|e| resume_unwind(e));
            assert!(
                after_unlock,
                "the Rust waiter held the lock before the Java unlock"
            );
            assert!(
                holders.len() == 1 && !holders.contains(&java_holder_field),
                "the Rust waiter's hold of {java_name} is not alone: {holders:?}"
            );
            let rust_woke = rust_at.duration_since(java_released);

            assert!(
                !rust_kept || !java_wait.is_finished(),
                "the Java waiter got in before the Rust unlock"
            );
            rust_unlock_sent.store(true, Ordering::SeqCst);
            let rust_released = Instant::now();
            let rust_loss = rust_guard.loss();
            match rust_guard.unlock() {
                Ok(()) => assert!(
                    // Presumed lost (no renewal confirmed in time) but found intact by
                    // the release: the key never expired, so nobody else held it.
                    rust_kept || rust_loss == Some(Loss::PossiblyLost),
                    "a hold Redis said was gone released without LockLost"
                ),
                Err(Error::LockLost { .. }) => assert!(!rust_kept, "a renewed hold said LockLost"),
                Err(e) => panic!("the Rust holder's unlock on the new master: {e}"),
            }
            let (reply, at, java_failures, after_rust_unlock, holders) =
                java_wait.join().unwrap_or_else(|e| resume_unwind(e));
            assert_eq!(
                reply, "true",
                "the Java waiter did not get the Rust-held lock"
            );
            assert!(
                !rust_kept || after_rust_unlock,
                "the Java waiter held the lock before the Rust unlock"
            );
            assert!(
                holders.len() == 1 && holders.contains(&java_waiter_field),
                "the Java waiter's hold of {rust_name} is not alone: {holders:?}"
            );
            let java_woke = at.saturating_duration_since(rust_released);
            // A retry's pause, not a message, let these in: only the deadline bounds them.
            if rust_failures == 0 && !java_unlock_retried {
                assert!(
                    rust_woke < WAKE_BOUND,
                    "Rust woke {rust_woke:?} after the Java unlock"
                );
            }
            if java_failures == 0 && rust_kept {
                assert!(
                    java_woke < WAKE_BOUND,
                    "Java woke {java_woke:?} after the Rust unlock"
                );
            }
            let rust_hold = if rust_kept {
                "the Rust hold and"
            } else {
                "the Rust hold reported LOST (its unlock said LockLost),"
            };
            format!(
                "master {old} (with {replicas} replicas in sync) killed, {new} agreed after \
                 {agreed:?}; both waiters subscribed there {resubscribed:?} after the kill; Java \
                 answered isHeld {java_back:?} after the kill; {rust_hold} the Java hold \
                 renewed on the new master within {renewals:?} more; Rust waiter woke {rust_woke:?} after the \
                 Java unlock was sent, Java waiter {java_woke:?} after the Rust unlock began; {}",
                window.report()
            )
        });
        window.java_release(peer, "w", &rust_name, || {
            hash_fields(t, &rust_name).contains(&java_waiter_field)
        });
        println!("  Redisson {}: {report}", peer.version());
    });
}

/// The owner fields of lock `name`'s hash, read on the node serving it now.
fn hash_fields<T: Topology>(t: &T, name: &str) -> Vec<String> {
    // Read right after a failover: see `Reopening`.
    let mut raw = Reopening::new(|| t.raw(name));
    hgetall(&mut raw, name).into_keys().collect()
}
