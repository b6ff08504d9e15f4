//! A flushed script cache is survived silently, even under load.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::support::proxy::FaultProxy;
use crate::support::raw::{fair_queue, fair_timeouts};
use crate::support::{TestServer, eventually, unique};
use redmutex::Client;

#[test]
fn script_flush_under_load_surfaces_no_error() {
    let server = TestServer::start();
    let client = server.client();
    let name = unique("flush");
    let stop = AtomicBool::new(false);
    let mut raw = server.conn();
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    let lock = client.get_lock(name.clone());
                    let mut done = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let g = lock.lock().unwrap();
                        g.unlock().unwrap();
                        done += 1;
                    }
                    done
                })
            })
            .collect();
        for _ in 0..20 {
            let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut raw).unwrap();
            std::thread::sleep(Duration::from_millis(50));
        }
        stop.store(true, Ordering::Relaxed);
        let total: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
        assert!(total > 0);
    });
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut raw)
        .unwrap();
    let evalsha = stats
        .lines()
        .find(|l| l.starts_with("cmdstat_evalsha:"))
        .unwrap();
    assert!(
        evalsha.contains("failed_calls=") && !evalsha.contains("failed_calls=0"),
        "flushes happened: {evalsha}"
    );
}

/// A fair waiter that gives up leaves the queue even when the script cache is flushed
/// between the load of its give-up script and the call: a waiter left in the queue would
/// hold up everyone behind it until its slot ended.
#[test]
fn a_fair_waiter_leaves_the_queue_despite_a_flush_between_load_and_call() {
    let server = TestServer::start();
    let holder = server.client();
    let proxy = FaultProxy::start(server.port());
    let waiter = Client::open(&proxy.url()).unwrap();
    let name = unique("flush-fair");

    let _held = holder.get_fair_lock(name.clone()).lock().unwrap();
    let mut raw = server.conn();
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            waiter
                .get_fair_lock(name.clone())
                .try_lock_for(Duration::from_millis(1500))
                .unwrap()
                .is_none()
        });
        // Queued: its acquire script is loaded; the next load is the give-up script's.
        eventually(Duration::from_secs(10), "waiter queued", || {
            fair_queue(&mut raw, &name).len() == 1
        });
        proxy.flush_scripts_after_next_load();
        assert!(w.join().unwrap(), "the wait ran out");
    });
    assert_eq!(proxy.flushes(), 1, "the flush landed between load and call");
    assert!(
        fair_queue(&mut raw, &name).is_empty(),
        "the waiter left the queue"
    );
    assert!(fair_timeouts(&mut raw, &name).is_empty(), "and its slot");
}
