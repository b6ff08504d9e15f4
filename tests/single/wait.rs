//! Waiting: the wait suite (`tests/suites/wait.rs`) against a single redis-server, plus
//! contention across processes and a killed pub/sub connection.

use std::time::Duration;

use crate::support::TestServer;
use crate::support::raw::await_numsub;

crate::wait_suite::wait_cases!(own on &TestServer::start());

/// Two processes × two clients × eight threads increment a counter with GET then SET
/// under one lock: the count is exact and no two critical sections overlap.
#[test]
#[cfg(feature = "cli")] // the workers are `redmutex worker` processes
fn mutual_exclusion_across_threads_clients_and_processes() {
    use crate::support::launch::Worker;
    use crate::support::{redmutex_bin, report_field, unique};

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
    let (waited, _) = crate::wait_suite::wake_by_unlock(&TestServer::start(), |raw, channel| {
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
