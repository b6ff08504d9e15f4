//! The pool's cap per master: thousands of waiting threads stay within it, and a call
//! that finds every pooled connection busy for a whole connection timeout gets
//! [`Error::PoolTimeout`] naming the node.

use std::time::Duration;

use redmutex::Error;
use serial_test::{parallel, serial};

use crate::pool_suite;
use crate::support::cluster;
use crate::support::proxy::FaultProxy;
use crate::{client, name_on};

/// [`pool_suite::waiting_threads_stay_within_the_pool_cap`] on every master at once.
/// Besides the pool and the subscriber, a master may see the watchdog's connection and
/// the slot-map reader's. Alone: 2,000 threads load the machine.
#[test]
#[serial(cluster)]
fn two_thousand_waiting_threads_stay_within_the_cap_on_every_master() {
    let c = cluster::shared();
    let names: Vec<String> = c.masters().iter().map(|m| name_on(m, "capped")).collect();
    pool_suite::waiting_threads_stay_within_the_pool_cap(c, &names, 2);
}

/// A pool of one connection to a master behind a frozen proxy: the call that got the
/// connection waits for its reply, and the other one gets no turn within the
/// connection timeout. Its error says which node, the cap, how long it waited, and
/// that the connection was busy rather than unreachable.
#[test]
#[parallel(cluster)]
fn a_checkout_past_its_timeout_is_a_pool_timeout_naming_the_node() {
    let c = cluster::shared();
    let master = c.masters().remove(0);
    let proxy = FaultProxy::start(master.port);
    let via = format!("127.0.0.1:{}", proxy.port);
    let client = client(|b| {
        b.nat_map(master.addr(), via.clone())
            .pool_max_size(1)
            .connection_timeout(Duration::from_millis(300))
            .response_timeout(Duration::from_secs(30))
            .scan_interval(Duration::from_secs(600))
    });
    let names = [name_on(&master, "pool-a"), name_on(&master, "pool-b")];
    // The one pooled connection is open, through the proxy.
    assert!(!client.get_lock(names[0].clone()).is_locked().unwrap());
    assert!(
        proxy.connections() > 0,
        "the client does not go through the proxy"
    );
    proxy.freeze();
    let (done, finished) = crossbeam_channel::unbounded();
    std::thread::scope(|s| {
        for name in &names {
            let (client, done) = (&client, done.clone());
            s.spawn(move || {
                done.send(client.get_lock(name.clone()).is_locked())
                    .unwrap();
            });
        }
        // Whichever took the turn first waits for its reply until the proxy resumes;
        // the other one ends first, with the pool timeout.
        let first = finished.recv().unwrap();
        proxy.resume();
        let second = finished.recv().unwrap();
        let err = first.unwrap_err();
        let Error::PoolTimeout {
            address,
            pool_size,
            waited,
            connect_error,
        } = &err
        else {
            panic!("not a pool timeout: {err}");
        };
        assert_eq!(*address, via, "{err}");
        assert_eq!(*pool_size, 1, "{err}");
        assert!(*waited >= Duration::from_millis(300), "{err}");
        assert!(connect_error.is_none(), "{err}");
        assert!(err.to_string().contains(&via), "{err}");
        assert!(!second.unwrap());
    });
}
