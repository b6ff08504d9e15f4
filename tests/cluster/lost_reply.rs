//! A lost reply on one shard: the fault proxy sits in front of one master, and the
//! client reaches that master through it by its NAT map (Redisson's `natMap`), so every
//! connection of the client to that shard (pool, watchdog, subscriber) crosses the proxy.
//! A script whose reply the proxy throws away has run once; it must not run again.

use std::time::Duration;

use redmutex::Error;
use serial_test::parallel;

use crate::support::cluster;
use crate::support::deploy::Deployment;
use crate::support::proxy::FaultProxy;
use crate::support::raw::hgetall;
use crate::{client, name_on};

/// Acquire and release, each with its reply dropped on the way back: the acquire ran
/// once (one hold, not two: it is never sent again), and the release, retried under
/// its unlock latch, released one hold, not two. The acquire's hold, which no guard
/// knows of, is released with the last guard.
#[test]
#[parallel(cluster)]
fn a_lost_reply_never_doubles_a_hold_or_a_release() {
    let c = cluster::shared();
    let master = c.masters().remove(0);
    let name = name_on(&master, "lost");
    let proxy = FaultProxy::start(master.port);
    let client = client(|b| {
        b.nat_map(master.addr(), format!("127.0.0.1:{}", proxy.port))
            .response_timeout(Duration::from_millis(300))
            .retry_delay(Duration::from_millis(50))
            .retry_max_delay(Duration::from_millis(100))
            // No slot-map reads meanwhile: the proxy drops the next reply of any
            // connection through it.
            .scan_interval(Duration::from_secs(600))
    });
    let mut raw = c.raw(&name);
    let lock = client.get_lock(name.clone());
    let lease = Duration::from_secs(30);
    // Scripts loaded on that master, through the proxy.
    lock.lock_with_lease(lease).unwrap().unlock().unwrap();
    assert!(
        proxy.connections() > 0,
        "the client does not go through the proxy"
    );

    proxy.drop_next_reply();
    let err = lock.lock_with_lease(lease).map(drop).unwrap_err();
    assert!(proxy.reply_dropped());
    assert!(matches!(err, Error::ResponseTimeout(_)), "{err}");
    let fields = hgetall(&mut raw, &name);
    assert_eq!(fields.values().collect::<Vec<_>>(), ["1"], "{fields:?}");
    assert_eq!(
        lock.hold_count().unwrap(),
        1,
        "the acquire ran exactly once"
    );

    let first = lock.lock_with_lease(lease).unwrap();
    let second = lock.lock_with_lease(lease).unwrap();
    assert_eq!(lock.hold_count().unwrap(), 3);
    proxy.drop_next_reply();
    second.unlock().unwrap();
    assert!(proxy.reply_dropped());
    assert_eq!(
        lock.hold_count().unwrap(),
        2,
        "the release ran exactly once"
    );
    // The hold whose acquire reply was lost has no guard; it goes with the thread's
    // last known one.
    first.unlock().unwrap();
    assert!(!lock.is_locked().unwrap());
}
