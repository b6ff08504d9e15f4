//! The expiry family against Redisson's `RExpirable` overrides: both sides cover every
//! key of a fair lock, a fenced lock and a permit-expirable semaphore (scenario 19).

use std::time::Duration;

use redmutex::RExpirable;
use serial_test::parallel;

use crate::peer::Peer;
use crate::support::raw::{
    fair_queue, fair_queue_key, fair_timeouts_key, fenced_token_key, permit_timeouts_key, pttl,
};
use crate::support::{TestServer, eventually, unique};
use crate::{HANG, WATCHDOG_MS, run_versions};

/// Expiry: what either side sets or clears covers the same keys (the fair lock's queue
/// and timeouts, the fenced lock's counter, the permit semaphore's timeout set), and each
/// side reads the other's TTL.
#[test]
#[parallel]
fn scenario_19_expiry_across_sides() {
    run_versions(19, expiry_across_sides);
}

fn expiry_across_sides(v: &str) {
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();
    let ttls = |raw: &mut redis::Connection, keys: &[&str]| -> Vec<i64> {
        keys.iter().map(|k| pttl(raw, k)).collect()
    };
    let all_between = |t: &[i64], low: i64, high: i64| t.iter().all(|t| (low..=high).contains(t));

    // A fair lock held by Rust with a Java waiter queued.
    let name = unique("s19-fair");
    let keys = [
        name.clone(),
        fair_queue_key(&name),
        fair_timeouts_key(&name),
    ];
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let fair = client.get_fair_lock(name.clone());
    let guard = fair.lock_with_lease(Duration::from_secs(300)).unwrap();
    let waiter = peer.send("w", &format!("fair.trylock {name} 60000"));
    eventually(HANG, "java queued", || {
        fair_queue(&mut raw, &name).len() == 1
    });
    assert!(peer.bool("j", &format!("fair.clearexpire {name}")));
    assert_eq!(
        ttls(&mut raw, &keys),
        [-1, -1, -1],
        "java cleared every key"
    );
    assert_eq!(peer.num("j", &format!("fair.ttl {name}")), -1);
    assert!(fair.expire(Duration::from_secs(400)).unwrap());
    assert!(all_between(&ttls(&mut raw, &keys), 390_000, 400_000));
    let java_ttl = peer.num("j", &format!("fair.ttl {name}"));
    assert!((390_000..=400_000).contains(&java_ttl), "{java_ttl}");
    if crate::support::server().has_7_0_options() {
        assert!(peer.bool("j", &format!("fair.expireif {name} lt 200000")));
        assert!(all_between(&ttls(&mut raw, &keys), 190_000, 200_000));
    } else {
        // Redis 6.2 has no PEXPIRE conditions: Redisson's conditional expiry fails there,
        // redmutex's says why, and neither changes a key.
        let java = peer
            .send("j", &format!("fair.expireif {name} lt 200000"))
            .wait(HANG);
        assert!(
            java.as_ref()
                .is_err_and(|e| e.contains("Wrong number of args")),
            "{java:?}"
        );
        match fair.expire_if_less(Duration::from_secs(200)) {
            Err(redmutex::Error::Config(why)) => assert!(why.contains("7.0"), "{why}"),
            other => panic!("a conditional expiry on 6.2: {other:?}"),
        }
        assert!(all_between(&ttls(&mut raw, &keys), 390_000, 400_000));
    }
    assert!(fair.clear_expire().unwrap());
    assert_eq!(ttls(&mut raw, &keys), [-1, -1, -1]);
    guard.unlock().unwrap();
    assert_eq!(waiter.wait(HANG), Ok("true".to_owned()));
    peer.ok("w", &format!("fair.unlock {name}"));

    // A fenced lock held by Java: Rust's expiry reaches its token counter.
    let name = unique("s19-fenced");
    let token = fenced_token_key(&name);
    let fenced = client.get_fenced_lock(name.clone());
    peer.ok("j", &format!("fenced.lock {name} 300000"));
    assert!(fenced.expire(Duration::from_secs(400)).unwrap());
    assert!(all_between(
        &ttls(&mut raw, &[&name, &token]),
        390_000,
        400_000
    ));
    assert!(peer.bool("j", &format!("fenced.clearexpire {name}")));
    assert_eq!(ttls(&mut raw, &[&name, &token]), [-1, -1]);
    if crate::support::server().has_7_0_options() {
        assert!(!fenced.expire_if_set(Duration::from_secs(5)).unwrap());
    }
    peer.ok("j", &format!("fenced.unlock {name}"));

    // A permit-expirable semaphore with a Java permit out.
    let name = unique("s19-pes");
    let acquired = permit_timeouts_key(&name);
    let pes = client.get_permit_expirable_semaphore(name.clone());
    assert!(peer.bool("j", &format!("pes.trysetpermits {name} 2")));
    let id = peer.ok("j", &format!("pes.acquire {name}"));
    assert!(pes.expire(Duration::from_secs(400)).unwrap());
    assert!(all_between(
        &ttls(&mut raw, &[&name, &acquired]),
        390_000,
        400_000
    ));
    let java_ttl = peer.num("j", &format!("pes.ttl {name}"));
    assert!((390_000..=400_000).contains(&java_ttl), "{java_ttl}");
    assert!(peer.bool("j", &format!("pes.clearexpire {name}")));
    assert_eq!(ttls(&mut raw, &[&name, &acquired]), [-1, -1]);
    assert_eq!(pes.remain_time_to_live().unwrap(), Some(Duration::MAX));
    peer.ok("j", &format!("pes.release {name} {id}"));
    peer.quit();
}
