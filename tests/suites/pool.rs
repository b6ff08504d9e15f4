//! The connection pool's cap per node under thousands of waiting threads; run against
//! the cluster (`tests/cluster/pool.rs`) and the sentinel set (`tests/sentinel/pool.rs`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::Duration;

use redmutex::Error;

use crate::support::deploy::Deployment;
use crate::support::eventually;

/// The cap the test sets (`pool_max_size`).
pub(crate) const CAP: usize = 8;
/// Threads waiting in `lock()` at once.
pub(crate) const THREADS: usize = 2_000;

/// One node's connections named after a client, as `CLIENT LIST` shows them.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Seen {
    /// Subscriber connections.
    pub(crate) subscribers: usize,
    /// Every other one: the pool's, and a background thread's own (the watchdog's, a
    /// cluster client's map reads).
    pub(crate) others: usize,
}

/// The connections named `name` on the node `raw` is connected to.
pub(crate) fn seen(raw: &mut redis::Connection, name: &str) -> Seen {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(raw).unwrap();
    let mut seen = Seen::default();
    for line in list.lines() {
        let field = |key: &str| {
            line.split(' ')
                .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        };
        if field("name") != Some(name) {
            continue;
        }
        // The subscriber's connection is the client's only RESP3 one; it shows no `P`
        // flag while it has no channel. Redis 6.2 lists no `resp`: there the subscriber
        // is the one whose last command was a (un)subscription or its HELLO.
        let subscriber = match field("resp") {
            Some(resp) => resp == "3",
            None => {
                field("flags").is_some_and(|f| f.contains('P'))
                    || field("cmd").is_some_and(|c| {
                        matches!(
                            c,
                            "hello" | "subscribe" | "unsubscribe" | "ssubscribe" | "sunsubscribe"
                        )
                    })
            }
        };
        if subscriber {
            seen.subscribers += 1;
        } else {
            seen.others += 1;
        }
    }
    seen
}

/// Connections the node `raw` is connected to has accepted so far (`INFO stats`).
fn accepted(raw: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("stats").query(raw).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("total_connections_received:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap()
}

/// [`THREADS`] threads of one client with a pool of [`CAP`] call `lock()` at once on
/// `names` (one per node: the threads are spread over them), while the main thread
/// holds every lock, so that all of them make their first attempt and wait; then it
/// releases, and each thread takes its lock in turn and gives it back. A sampler reads
/// `CLIENT LIST` on every node from before the first thread starts until the last one
/// ends. On no node may the client's connections ever be more than the pool's cap plus
/// the subscriber and the background threads' own (the watchdog's, which also deletes
/// spent unlock latches, and on a cluster the slot-map reader's: `background` in all);
/// every call gets its lock (or times out with
/// [`Error::PoolTimeout`], which a busy pool that keeps moving never gives), and no two
/// threads hold one lock at once. The sampler may miss a connection that lived
/// between two samples, so the connections each node accepted during the run are
/// counted as well (`INFO stats`; the callers run alone on their deployment, and the
/// samplers' connections are open before): no more than the same bound, since a pool
/// within its cap never closes a healthy connection.
///
/// Without turns a checkout pops an idle connection or opens a new one at once, and the
/// thousands of first attempts open dozens of connections per node.
pub(crate) fn waiting_threads_stay_within_the_pool_cap<D: Deployment>(
    d: &D,
    names: &[String],
    background: usize,
) {
    let client = d.client_with(|b| b.pool_max_size(CAP as u32));
    let mine = format!("redmutex:{}", client.id());
    let raws: Vec<redis::Connection> = names.iter().map(|n| d.raw(n)).collect();
    let mut stats: Vec<redis::Connection> = names.iter().map(|n| d.raw(n)).collect();
    let held: Vec<_> = names
        .iter()
        .map(|n| client.get_lock(n.clone()).lock().unwrap())
        .collect();
    let stop = AtomicBool::new(false);
    let samples = AtomicUsize::new(0);
    let entered = AtomicUsize::new(0);
    let inside: Vec<AtomicUsize> = names.iter().map(|_| AtomicUsize::new(0)).collect();
    let outcomes: Mutex<HashMap<&'static str, usize>> = Mutex::new(HashMap::new());
    let start = Barrier::new(THREADS + 1);
    let (peaks, opened) = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut raws = raws;
            let mut peaks = vec![Seen::default(); raws.len()];
            while !stop.load(Ordering::Acquire) {
                for (raw, peak) in raws.iter_mut().zip(&mut peaks) {
                    let now = seen(raw, &mine);
                    peak.subscribers = peak.subscribers.max(now.subscribers);
                    peak.others = peak.others.max(now.others);
                }
                samples.fetch_add(1, Ordering::Release);
            }
            peaks
        });
        // Samples before the first thread starts.
        let at = samples.load(Ordering::Acquire);
        eventually(Duration::from_secs(30), "a first sample", || {
            samples.load(Ordering::Acquire) > at
        });
        let before: Vec<u64> = stats.iter_mut().map(accepted).collect();
        let threads: Vec<_> = (0..THREADS)
            .map(|i| {
                let (client, names, inside) = (&client, names, &inside);
                let (start, entered, outcomes) = (&start, &entered, &outcomes);
                std::thread::Builder::new()
                    .stack_size(256 * 1024)
                    .spawn_scoped(s, move || {
                        let n = i % names.len();
                        let lock = client.get_lock(names[n].clone());
                        start.wait();
                        entered.fetch_add(1, Ordering::AcqRel);
                        let outcome = match lock.lock() {
                            Ok(guard) => {
                                assert_eq!(
                                    inside[n].fetch_add(1, Ordering::SeqCst),
                                    0,
                                    "two holders of {} at once",
                                    names[n]
                                );
                                inside[n].fetch_sub(1, Ordering::SeqCst);
                                guard.unlock().unwrap();
                                "locked"
                            }
                            Err(Error::PoolTimeout { .. }) => "pool timeout",
                            Err(e) => panic!("lock() failed: {e}"),
                        };
                        *outcomes.lock().unwrap().entry(outcome).or_default() += 1;
                    })
                    .unwrap()
            })
            .collect();
        start.wait();
        // Every thread is in `lock()` (its first attempt made or queued for a turn);
        // then a few more samples while they wait, before the locks are released.
        eventually(Duration::from_secs(60), "every thread in lock()", || {
            entered.load(Ordering::Acquire) == THREADS
        });
        let at = samples.load(Ordering::Acquire);
        eventually(Duration::from_secs(30), "samples while they wait", || {
            samples.load(Ordering::Acquire) >= at + 10
        });
        for guard in held {
            guard.unlock().unwrap();
        }
        for t in threads {
            t.join().unwrap();
        }
        stop.store(true, Ordering::Release);
        let opened: Vec<u64> = stats
            .iter_mut()
            .zip(&before)
            .map(|(raw, before)| accepted(raw) - before)
            .collect();
        (sampler.join().unwrap(), opened)
    });
    let outcomes = outcomes.into_inner().unwrap();
    println!(
        "{THREADS} threads, cap {CAP}: peak connections per node {peaks:?} over {} samples, \
         connections accepted per node {opened:?}; outcomes {outcomes:?}",
        samples.load(Ordering::Acquire)
    );
    assert_eq!(outcomes.values().sum::<usize>(), THREADS, "{outcomes:?}");
    for (name, peak) in names.iter().zip(&peaks) {
        assert!(
            peak.others <= CAP + background,
            "{} connections of the client (not subscribers) at once on the node of {name}, \
             over a cap of {CAP} plus {background} of background threads: {peaks:?}",
            peak.others
        );
        assert!(peak.subscribers <= 1, "{peaks:?}");
    }
    for (name, opened) in names.iter().zip(&opened) {
        assert!(
            *opened <= (CAP + background + 1) as u64,
            "the node of {name} accepted {opened} connections during the run, over a cap \
             of {CAP} plus {background} of background threads and a subscriber: {opened:?}"
        );
    }
}
