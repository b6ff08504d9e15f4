//! `RCountDownLatch` against `RedissonCountDownLatch`: count-downs on one side open waits
//! on the other (scenario 14).

use std::thread;
use std::time::{Duration, Instant};

use serial_test::parallel;

use crate::peer::Peer;
use crate::support::raw::{exists, latch_channel};
use crate::support::{TestServer, unique};
use crate::{HANG, WATCHDOG_MS, assert_woken_by_message, ms, run_versions, wait_subscribers};

/// Count-down latch: Java count-downs open a Rust wait, Rust count-downs open a Java
/// `await`; a count-down that does not reach zero opens neither.
#[test]
#[parallel]
fn scenario_14_count_down_latch_across_sides() {
    run_versions(14, count_down_latch_across_sides);
}

fn count_down_latch_across_sides(v: &str) {
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();

    // Rust sets and waits; Java counts down.
    let name = unique("s14-rust-waits");
    let latch = client.get_count_down_latch(name.clone());
    assert!(latch.try_set_count(2).unwrap());
    assert!(!peer.bool("j", &format!("latch.trysetcount {name} 5")));
    assert_eq!(peer.num("j", &format!("latch.count {name}")), 2);
    thread::scope(|s| {
        let waiter = s.spawn(|| {
            let opened = latch.wait_for(HANG).unwrap();
            (opened, Instant::now())
        });
        wait_subscribers(&mut raw, &latch_channel(&name), 1);
        peer.ok("j", &format!("latch.countdown {name}"));
        assert_eq!(latch.get_count().unwrap(), 1);
        assert_eq!(peer.num("j", &format!("latch.count {name}")), 1);
        assert!(!waiter.is_finished(), "rust wait returned at count 1");
        let counted = Instant::now();
        peer.ok("j", &format!("latch.countdown {name}"));
        let (opened, at) = waiter.join().unwrap();
        assert!(opened, "rust wait timed out");
        let latency = at.duration_since(counted);
        println!(
            "scenario 14 version {v}: rust wait returned {:.2} ms after the last java \
             count-down was sent",
            ms(latency)
        );
        assert_woken_by_message("rust waiter", latency);
    });
    assert_eq!(latch.get_count().unwrap(), 0);
    assert_eq!(peer.num("j", &format!("latch.count {name}")), 0);
    assert!(!exists(&mut raw, &name));
    assert!(latch.wait_for(Duration::ZERO).unwrap());

    // Java sets and awaits; Rust counts down.
    let name = unique("s14-java-waits");
    let latch = client.get_count_down_latch(name.clone());
    assert!(peer.bool("j", &format!("latch.trysetcount {name} 2")));
    assert!(!latch.try_set_count(5).unwrap());
    assert_eq!(latch.get_count().unwrap(), 2);
    let java = peer.send("jw", &format!("latch.await {name} 60000"));
    wait_subscribers(&mut raw, &latch_channel(&name), 1);
    latch.count_down().unwrap();
    assert_eq!(latch.get_count().unwrap(), 1);
    assert_eq!(peer.num("j", &format!("latch.count {name}")), 1);
    assert_eq!(
        java.try_wait(Duration::ZERO),
        None,
        "java await returned at count 1"
    );
    let counted = Instant::now();
    latch.count_down().unwrap();
    let (reply, at) = java.wait_timed(HANG);
    assert_eq!(reply, Ok("true".to_owned()), "java await");
    let latency = at.duration_since(counted);
    println!(
        "scenario 14 version {v}: java await returned {:.2} ms after the last rust count-down",
        ms(latency)
    );
    assert_woken_by_message("java waiter", latency);
    assert_eq!(peer.num("j", &format!("latch.count {name}")), 0);
    assert!(!exists(&mut raw, &name));
    assert!(peer.bool("j", &format!("latch.await {name} 0")));
    peer.quit();
}
