//! Waiting: the wait suite (`tests/suites/wait.rs`) against a single redis-server, plus
//! contention across processes and a killed pub/sub connection.

#[path = "suites/wait.rs"]
mod suite;
use redmutex_harness as support;

use std::time::Duration;

use support::launch::Worker;
use support::raw::await_numsub;
use support::{TestServer, redmutex_bin, report_field, unique};

redmutex_harness::suite_tests!(suite on &TestServer::start() =>
    threads_of_several_clients_never_overlap,
    a_waiter_wakes_on_release,
    each_release_hands_the_lock_to_one_waiter,
    channels_are_unsubscribed_when_the_last_waiter_leaves,
    many_waiters_on_distinct_names_all_subscribe_and_wake,
);

/// Two processes × two clients × eight threads increment a counter with GET then SET
/// under one lock: the count is exact and no two critical sections overlap.
#[test]
fn mutual_exclusion_across_threads_clients_and_processes() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let lock = unique("mutex");
    let counter = unique("counter");
    let iterations = 40;
    let url = server.url();
    let worker = Worker {
        url: &url,
        lock: &lock,
        counter: &counter,
        clients: 2,
        threads: 8,
        iterations,
    };
    let children: Vec<_> = (0..2)
        .map(|_| worker.command(redmutex_bin()).spawn().unwrap())
        .collect();
    let mut overlaps = 0;
    for child in children {
        let out = child.wait_with_output().unwrap();
        let line = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "worker failed: {line}");
        overlaps += report_field(&line, "overlaps");
    }
    let count: u64 = redis::cmd("GET").arg(&counter).query(&mut raw).unwrap();
    assert_eq!(count, 2 * 2 * 8 * iterations);
    assert_eq!(overlaps, 0);
}

/// A waiter whose pub/sub connection is killed resubscribes and still wakes on the
/// release, long before the holder's TTL.
#[test]
fn a_killed_pubsub_connection_is_rebuilt() {
    let (waited, _) = suite::wake_by_unlock(&TestServer::start(), |raw, channel| {
        let killed: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("pubsub")
            .query(raw)
            .unwrap();
        assert!(killed >= 1);
        await_numsub(raw, channel, 1);
    });
    assert!(waited < Duration::from_secs(20), "woke by TTL: {waited:?}");
}
