//! A master being demoted grants nothing that the new master lacks (issue 27's double
//! grant): `SENTINEL FAILOVER` while one client takes locks in a loop.
//!
//! During a planned failover the old master keeps accepting writes until the sentinels
//! reconfigure it, about ten seconds after the switch. Its replicas leave it first (one
//! is promoted, the other is told to follow the promoted one), so for a while it counts
//! no replicas at all, and a client that has not yet noticed the switch would take every
//! lock there with no `WAIT`: holds that the new master never receives, which another
//! client is then granted again on the new master.
//!
//! The test judges by what the servers hold, not by what the client believes: each
//! iteration takes a lock of its own name (and keeps it, with a lease that outlives the
//! test), so every grant leaves its own key. A grant whose key is on the old master right
//! after the grant was made there; if the new master does not have that key once the
//! client has moved, the grant was made after the new master stopped replicating the old
//! one, and another client can take the same lock on the new master (the test does, to
//! show it). That count must be 0.
//!
//! The window is made certain rather than lucky: the client's periodic rescan is turned
//! far down, so only the sentinels' events and the replica check can move it, and the
//! set runs with the server's default `repl-diskless-sync-delay` (5 s), under which the
//! failover's last step (the other replica synced to the new master) and so the
//! `+switch-master` event come seconds after the old master lost its last replica. With
//! the default 1 s rescan the same hole is a race, lost in some runs only.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redmutex::Error;
use serial_test::serial;

use crate::support::deploy::Deployment;
use crate::support::eventually;
use crate::support::raw::exists;
use crate::support::reopening::Reopening;
use crate::support::sentinel::{SentinelSet, SentinelSpec};
use crate::support::unique;

/// Leases of the loop's holds: they must outlive the test, or a key could vanish from
/// the new master by expiry and be counted as never replicated.
const LEASE: Duration = Duration::from_secs(600);
/// Grants on the new master after which the loop stops: the client has moved for good.
const ON_NEW: usize = 5;
/// Hang guard for the whole loop.
const LOOP_BOUND: Duration = Duration::from_secs(90);

/// One grant of the loop: its lock's name, whether its key was on the old master right
/// after it, and whether it came after the failover was requested.
struct Grant {
    name: String,
    /// When its `lock_with_lease` call began and returned.
    began: Instant,
    at: Instant,
    on_old: bool,
    after_failover: bool,
}

#[test]
#[serial(sentinel)]
fn a_master_being_demoted_grants_no_lock_that_the_new_master_lacks() {
    // The server's own resync delay: the window is longest.
    demotion_grants_nothing_the_new_master_lacks(None);
}

#[test]
#[serial(sentinel)]
fn with_an_immediate_resync_a_master_being_demoted_grants_nothing_either() {
    // The harness's usual delay: shorter windows, and the unavailability to compare.
    demotion_grants_nothing_the_new_master_lacks(Some(0));
}

/// The scenario of the module docs on a private set with `repl-diskless-sync-delay`
/// `delay` (`None`: the server's default), so that the shared set keeps its own and the
/// test leaves nothing to heal.
fn demotion_grants_nothing_the_new_master_lacks(delay: Option<u32>) {
    // REDMUTEX_TEST_LOG=debug shows the client's own reasoning (its replica checks).
    crate::support::trace::init();
    let set = SentinelSet::start(SentinelSpec {
        repl_diskless_sync_delay: delay,
        ..SentinelSpec::default()
    });
    let old = set.master();
    let client = set.client_with(|b| {
        b.sentinel_scan_interval(Duration::from_secs(3600))
            .slaves_sync_timeout(Duration::from_millis(200))
            .retry_delay(Duration::from_millis(50))
            .retry_max_delay(Duration::from_millis(100))
    });
    let base = unique("s-demoted");
    let failover_sent = AtomicBool::new(false);
    let new_port = Mutex::new(None::<u16>);
    let stop = AtomicBool::new(false);
    let failover_at = Mutex::new(None::<Instant>);

    let (grants, refused, new) = std::thread::scope(|s| {
        let looping = s.spawn(|| {
            let mut on_old = Reopening::new(|| old.conn());
            let mut grants = Vec::new();
            let mut refused = 0;
            let mut on_new_count = 0;
            let started = Instant::now();
            for i in 0.. {
                if stop.load(Ordering::Acquire) {
                    break;
                }
                assert!(
                    started.elapsed() < LOOP_BOUND,
                    "the client never moved to the new master"
                );
                let name = format!("{base}:{i}");
                let after_failover = failover_sent.load(Ordering::Acquire);
                let began = Instant::now();
                match client.get_lock(&name).lock_with_lease(LEASE) {
                    Ok(guard) => {
                        // Kept, so the key stays as the evidence of this grant.
                        guard.detach();
                        let on_old = exists(&mut on_old, &name);
                        if !on_old && new_port.lock().unwrap().is_some() {
                            on_new_count += 1;
                            if on_new_count >= ON_NEW {
                                stop.store(true, Ordering::Release);
                            }
                        }
                        grants.push(Grant {
                            name,
                            began,
                            at: Instant::now(),
                            on_old,
                            after_failover,
                        });
                    }
                    // An acquire that no replica (or a master being demoted) could
                    // confirm is undone: no grant, the loop goes on.
                    Err(Error::NoSyncedReplicas { .. }) => refused += 1,
                    Err(e) if e.is_transient() => refused += 1,
                    Err(e) => panic!("lock {name}: {e:?}"),
                }
            }
            (grants, refused)
        });
        // Some grants on the old master first, replicated as usual.
        std::thread::sleep(Duration::from_millis(300));
        failover_sent.store(true, Ordering::Release);
        *failover_at.lock().unwrap() = Some(Instant::now());
        let new = set.failover();
        *new_port.lock().unwrap() = Some(new.port);
        let (grants, refused) = looping.join().unwrap();
        (grants, refused, new)
    });
    let failover_at = failover_at.lock().unwrap().expect("the failover was sent");
    // The unavailability the failover caused: the longest time without a grant.
    let window = grants
        .windows(2)
        .filter(|w| w[1].at >= failover_at)
        .map(|w| w[1].at - w[0].at)
        .max()
        .unwrap_or_default();

    let mut on_new = Reopening::new(|| new.conn());
    let lost: Vec<&Grant> = grants
        .iter()
        .filter(|g| g.on_old && !exists(&mut on_new, &g.name))
        .collect();
    // What a lost grant means: another client is granted the same lock on the new
    // master while this one still believes it holds it.
    let other = set.client();
    let regranted = lost
        .iter()
        .filter(|g| {
            other
                .get_lock(&g.name)
                .try_lock()
                .unwrap()
                .map(|guard| guard.detach())
                .is_some()
        })
        .count();
    let on_old_after = grants
        .iter()
        .filter(|g| g.on_old && g.after_failover)
        .count();
    println!(
        "sentinel demotion (repl-diskless-sync-delay {delay:?}): longest time without a grant \
         {window:?}; {} grants ({} on the old master after SENTINEL FAILOVER, all but \
         {} of them on the new master too), {refused} acquires refused or failed; {regranted} \
         of the lost grants granted again on the new master",
        grants.len(),
        on_old_after,
        lost.len()
    );
    // Where each lost grant's call lay against the failover request, in ms (negative:
    // before it): the first question when one shows up.
    let ms = |t: Instant| {
        if t >= failover_at {
            (t - failover_at).as_secs_f64() * 1000.0
        } else {
            -(failover_at - t).as_secs_f64() * 1000.0
        }
    };
    let timings: Vec<String> = lost
        .iter()
        .map(|g| format!("{} {:+.1}..{:+.1} ms", g.name, ms(g.began), ms(g.at)))
        .collect();
    assert!(
        lost.is_empty(),
        "{} grants on the old master that the new master does not have ({regranted} granted \
         again there), each call's span from the failover request: {timings:?}",
        lost.len(),
    );
}

/// A client's first count of a master's replicas starts from what the sentinels list
/// for it. A client whose first acquire came after a failover had already taken the
/// promoted replica away would otherwise take "one of one acknowledged" as synced, and
/// never ask the sentinels whether the master is being replaced.
///
/// Shown without a failover: one of two replicas is gone, so the master counts one
/// while the sentinels still list two. A fresh client learns the two from the
/// sentinels, then the sentinels go, so nobody can vouch for the master: the acquire
/// must be refused as unsynced, as it is for a client that had counted two replicas
/// itself. (Before the sentinels' list was the starting point, it was granted.) Once a
/// sentinel is back and vouches for the master, the same client is granted.
#[test]
#[serial(sentinel)]
fn a_first_replica_count_below_the_sentinels_list_is_checked_with_them() {
    let set = crate::support::sentinel::shared();
    let _heal = set.disrupt();
    let gone = set.replicas()[0].clone();
    set.kill(&gone);
    let master = set.master();
    let mut raw = Reopening::new(|| master.conn());
    eventually(
        Duration::from_secs(10),
        "the master to count one replica in sync",
        || {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut raw)
                .unwrap();
            info.lines().filter(|l| l.contains("state=online")).count() == 1
        },
    );
    // No periodic rescan and few retries: the outcome is the replica check's alone.
    let client = set.client_with(|b| {
        b.sentinel_scan_interval(Duration::from_secs(3600))
            .retry_attempts(1)
            .retry_delay(Duration::from_millis(50))
    });
    let sentinels = set.sentinel_ports().len();
    for i in 0..sentinels {
        set.kill_sentinel(i);
    }
    let name = unique("s-first-count");
    match client
        .get_lock(&name)
        .lock_with_lease(Duration::from_secs(30))
    {
        Err(Error::NoSyncedReplicas { .. }) => {}
        other => panic!(
            "an acquire on a master counting 1 of the 2 replicas the sentinels list, with \
             no sentinel to vouch for it, was not refused as unsynced: {other:?}"
        ),
    }
    assert!(
        !exists(&mut raw, &name),
        "the refused acquire left its hold"
    );
    set.restart_sentinel(0);
    let guard = client
        .get_lock(&name)
        .lock_with_lease(Duration::from_secs(30))
        .expect("granted once a sentinel vouches for the master");
    guard.unlock().unwrap();
}
