//! Topology changes under load: a slot migrated while a holder renews and a waiter
//! waits, a master SIGKILLed, and a `CLUSTER FAILOVER`. In each, the holder keeps its
//! lock (renewed where the slot lives now) or is told it lost it, the waiters are woken
//! by the next unlock, nothing hangs. A prober thread runs lock/unlock cycles on the
//! same shard throughout; the longest gap between its completed cycles is the
//! unavailability window, printed with the other figures.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redmutex::{Client, Loss};
use serial_test::serial;

use crate::support::cluster::{self, ClusterNode, Failover, key_slot};
use crate::support::deploy::Deployment;
use crate::support::eventually;
use crate::support::raw::{exists, lock_channel, pttl};
use crate::{WAKE_BOUND, await_subscribed, name_on};

/// Lock/unlock cycles on one name until stopped; what they saw.
struct Prober {
    stop: Arc<AtomicBool>,
    cycles: Arc<Mutex<Vec<(Instant, Instant, bool)>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Prober {
    fn start(client: Client, name: String) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let cycles = Arc::new(Mutex::new(Vec::new()));
        let (s, c) = (Arc::clone(&stop), Arc::clone(&cycles));
        let thread = std::thread::spawn(move || {
            let lock = client.get_lock(name);
            while !s.load(Ordering::SeqCst) {
                let started = Instant::now();
                let ok = lock
                    .lock_with_lease(Duration::from_secs(5))
                    .and_then(|g| g.unlock())
                    .is_ok();
                c.lock().unwrap().push((started, Instant::now(), ok));
                if !ok {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        });
        Self {
            stop,
            cycles,
            thread: Some(thread),
        }
    }

    /// Waits until `n` cycles succeeded (the prober's connections are warm).
    fn await_cycles(&self, n: usize) {
        eventually(Duration::from_secs(10), "prober cycles", || {
            self.cycles.lock().unwrap().iter().filter(|c| c.2).count() >= n
        });
    }

    /// Stops it; returns (longest gap between two successful cycles' ends, failed
    /// cycles, cycles).
    fn finish(mut self) -> (Duration, usize, usize) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        let cycles = self.cycles.lock().unwrap();
        let ends: Vec<Instant> = cycles.iter().filter(|c| c.2).map(|c| c.1).collect();
        let gap = ends
            .windows(2)
            .map(|w| w[1].duration_since(w[0]))
            .max()
            .unwrap_or_default();
        let failed = cycles.iter().filter(|c| !c.2).count();
        (gap, failed, cycles.len())
    }
}

impl Drop for Prober {
    /// Stops it also when the test fails, so its cycles do not run into later tests.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Another name in `name`'s slot.
fn same_slot(name: &str, prefix: &str) -> String {
    cluster::key_for_slot(key_slot(name), &crate::support::unique(prefix))
}

/// `PTTL key` on `raw`, preceded by `ASKING` (a node importing the key's slot answers
/// a plain command with `MOVED`).
fn pttl_asking(raw: &mut redis::Connection, key: &str) -> i64 {
    let (_, left): ((), i64) = redis::pipe()
        .cmd("ASKING")
        .cmd("PTTL")
        .arg(key)
        .query(raw)
        .unwrap();
    left
}

/// Waits for the holder's next renewal of `key` as `node` sees it.
fn await_renewal(node: &ClusterNode, key: &str, what: &str) -> i64 {
    let mut raw = node.conn();
    crate::support::await_renewal(what, || pttl_asking(&mut raw, key))
}

/// A waiter thread's lock attempt: it returns when it got the lock (then releases it).
fn waiter(client: &Client, name: &str) -> Instant {
    let g = client
        .get_lock(name.to_owned())
        .try_lock_for(Duration::from_secs(90))
        .unwrap()
        .expect("the waiter got the lock");
    let at = Instant::now();
    g.unlock().unwrap();
    at
}

/// A slot with a held lock (1.5 s watchdog: three renewals per phase) and a waiting
/// client moves to another master: IMPORTING/MIGRATING with the key still on the source,
/// then with the key moved (the source answers ASK), then done (MOVED). The holder keeps
/// the lock throughout, renewed on the target; the waiter, whose sharded subscription
/// the source dropped at the move, is woken by the unlock on the target.
#[test]
#[serial(cluster)]
fn a_slot_migration_keeps_the_holder_and_wakes_the_waiter() {
    let c = cluster::shared();
    let _d = c.disrupt();
    let masters = c.masters();
    let (from, to) = (&masters[0], masters[1].clone());
    let name = name_on(from, "migrate");
    let slot = key_slot(&name);
    let holder = c.client_with_watchdog(Duration::from_millis(1500));
    let other = c.client();
    let guard = holder.get_lock(name.clone()).lock().unwrap();
    std::thread::scope(|s| {
        let w = s.spawn(|| waiter(&other, &name));
        await_subscribed(c, &lock_channel(&name), 1, 1);
        let prober = Prober::start(c.client(), same_slot(&name, "probe"));
        let began = Instant::now();
        let m = c.begin_migration(slot, &to);
        // Two renewals in each phase: the second one went out after the phase began.
        for _ in 0..2 {
            await_renewal(from, &name, "while MIGRATING, the key on the source");
        }
        m.move_keys();
        for _ in 0..2 {
            await_renewal(&to, &name, "with the key moved (the source answers ASK)");
        }
        m.finish();
        let moved = began.elapsed();
        for _ in 0..2 {
            await_renewal(&to, &name, "after the move (MOVED)");
        }
        // Renewed in every phase (above), so the hold was kept. A watchdog starved on a
        // loaded machine past the point where a renewal could be confirmed in time says
        // so (PossiblyLost) and goes on renewing: cautious, allowed; Lost is not.
        let loss = guard.loss();
        assert!(
            matches!(loss, None | Some(Loss::PossiblyLost)),
            "the holder lost its lock in the migration: {loss:?}"
        );
        let mut target = to.conn();
        assert!(exists(&mut target, &name));
        let left = pttl(&mut target, &name);
        assert!(left > 0, "{left}");
        // The waiter's subscriptions now live on the target.
        await_subscribed(c, &lock_channel(&name), 1, 1);
        let (gap, failed, cycles) = prober.finish();
        let released = Instant::now();
        // The key is intact on the target (above): the release finds it, lost or not.
        guard.unlock().unwrap();
        let woke = w.join().unwrap().duration_since(released);
        println!(
            "migration of slot {slot} {} -> {}: {moved:?} from IMPORTING to done; prober: \
             longest gap {gap:?}, {failed} failed of {cycles} cycles; waiter woke {woke:?} \
             after the unlock; holder PTTL on the target {left} ms; holder's loss report \
             {loss:?}",
            from.port, to.port
        );
        assert_eq!(failed, 0, "a cycle failed during the migration");
        assert!(woke < WAKE_BOUND, "{woke:?}");
    });
}

/// The holder, two waiters of two clients and a prober on one master; then `disrupt`
/// changes the master. The holder keeps its lock (a renewal lands on the new master),
/// both waiters get the lock after the unlock, the prober recovers.
fn failover_scenario(what: &str, disrupt: impl FnOnce(&ClusterNode) -> ClusterNode) {
    let c = cluster::shared();
    let master = c.masters().remove(0);
    let name = name_on(&master, "failover");
    // A 20 s lease: renewals every 6.7 s, "possibly lost" 10 s before the end, so the
    // 4-5 s a promotion takes cannot cost the hold. Replica sync (the default, named
    // here because the test relies on it) makes `lock()` return only once the replica
    // has the hold: without it a SIGKILL right after the acquire may lose the hold
    // with the master's replication buffer, as asynchronous replication allows.
    let holder = c.client_with(|b| {
        b.lock_watchdog_timeout(Duration::from_secs(20))
            .check_lock_synced_slaves(true)
    });
    let waiters = [c.client(), c.client()];
    let guard = holder.get_lock(name.clone()).lock().unwrap();
    std::thread::scope(|s| {
        let ws: Vec<_> = waiters
            .iter()
            .map(|w| s.spawn(|| waiter(w, &name)))
            .collect();
        await_subscribed(c, &lock_channel(&name), 2, 2);
        let prober = Prober::start(c.client(), same_slot(&name, "probe"));
        prober.await_cycles(3);
        let began = Instant::now();
        let promoted = disrupt(&master);
        let settled = began.elapsed();
        let mut raw = promoted.conn();
        assert!(exists(&mut raw, &name), "the hold was not replicated");
        // The TTL only falls between renewals: a sample above the one before it is a
        // renewal (comparing with the first sample plus a margin would miss one that
        // landed just before it).
        let mut last = pttl(&mut raw, &name);
        assert!(last > 0, "no TTL on the new master ({last})");
        eventually(
            Duration::from_secs(20),
            "a renewal on the new master",
            || {
                let now = pttl(&mut raw, &name);
                let rose = now > last;
                last = now;
                rose
            },
        );
        let renewed = began.elapsed();
        assert!(
            !guard.is_lost(),
            "{what}: the holder was told it lost the lock"
        );
        await_subscribed(c, &lock_channel(&name), 2, 2);
        let (gap, failed, cycles) = prober.finish();
        let released = Instant::now();
        guard.unlock().unwrap();
        let mut got: Vec<Duration> = ws
            .into_iter()
            .map(|w| w.join().unwrap().duration_since(released))
            .collect();
        got.sort();
        println!(
            "{what} of {}: cluster agreed after {settled:?}; first renewal on the new master \
             after {renewed:?}; prober: longest gap {gap:?}, {failed} failed of {cycles} \
             cycles; waiters got the lock {got:?} after the unlock",
            master.port
        );
        assert!(got[0] < WAKE_BOUND, "{got:?}");
    });
}

/// A master SIGKILLed; its replica is promoted by the cluster (about 4 s).
#[test]
#[serial(cluster)]
fn a_killed_master_is_replaced_and_locks_carry_on() {
    let c = cluster::shared();
    let _d = c.disrupt();
    failover_scenario("SIGKILL failover", |m| c.kill_master(m));
}

/// `CLUSTER FAILOVER` on a master's replica.
#[test]
#[serial(cluster)]
fn a_cluster_failover_keeps_locks_and_moves_waiters() {
    let c = cluster::shared();
    let _d = c.disrupt();
    failover_scenario("CLUSTER FAILOVER", |m| {
        c.failover(&c.replica_of(m), Failover::Default)
    });
}

/// `TRYAGAIN` replies node `node` has sent since it started.
fn tryagain_count(node: &ClusterNode) -> u64 {
    if !crate::support::server().has_7_0_options() {
        // Redis 6.2 does not count redirections in errorstats; its commandstats count
        // them as rejected calls (only this test's scripts are refused here: it runs
        // alone, and the one slot migrating is its own).
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut node.conn())
            .unwrap();
        return info
            .lines()
            .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
            .filter_map(|l| l.split(',').find_map(|f| f.strip_prefix("rejected_calls=")))
            .map(|n| n.trim().parse::<u64>().unwrap())
            .sum();
    }
    let info: String = redis::cmd("INFO")
        .arg("errorstats")
        .query(&mut node.conn())
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("errorstat_TRYAGAIN:count="))
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// A fair waiter whose slot stays MIGRATING (the held lock's hash on the source, its
/// queue nowhere yet) is answered `TRYAGAIN` on every attempt. With time left it keeps
/// waiting past the transport's retry budget, and takes the lock once the migration is
/// done and the holder lets go; a caller without time left still gets the error.
#[test]
#[serial(cluster)]
fn a_waiter_with_time_left_outlasts_a_long_migration() {
    let c = cluster::shared();
    let _d = c.disrupt();
    let masters = c.masters();
    let (from, to) = (&masters[0], masters[1].clone());
    let name = name_on(from, "long-migration");
    let holder = c.client();
    // A retry budget of 200 ms: each attempt gives up on TRYAGAIN after about five tries.
    let impatient = c.client_with(|b| {
        b.retry_attempts(1)
            .retry_delay(Duration::from_millis(100))
            .retry_max_delay(Duration::from_millis(200))
    });
    let guard = holder.get_fair_lock(name.clone()).lock().unwrap();
    let m = c.begin_migration(key_slot(&name), &to);
    match impatient.get_fair_lock(name.clone()).try_lock() {
        Err(redmutex::Error::Redis(e)) => assert_eq!(
            e.kind(),
            redis::ErrorKind::Server(redis::ServerErrorKind::TryAgain),
            "{e:?}"
        ),
        Err(e) => panic!("{e:?}"),
        Ok(got) => panic!("a multi-key script ran on a slot half moved: {got:?}"),
    }
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            let got = impatient
                .get_fair_lock(name.clone())
                .try_lock_for(Duration::from_secs(60));
            done.store(true, Ordering::Release);
            // Guards stay on their thread: released here, reported as what happened.
            got.map(|g| g.map(|g| g.unlock()))
        });
        // Six budgets' worth of refusals: a waiter that gave up after one is long gone.
        let before = tryagain_count(from);
        eventually(Duration::from_secs(30), "the waiter to keep trying", || {
            assert!(
                !done.load(Ordering::Acquire),
                "the waiter stopped while it had time left: {:?}",
                w.is_finished()
            );
            tryagain_count(from) >= before + 30
        });
        m.move_keys();
        m.finish();
        guard.unlock().unwrap();
        let got = w.join().unwrap().expect("the waiter failed");
        got.expect("the waiter timed out").unwrap();
    });
}
