//! Quorum locks with a cluster client among their members: a member whose slot moved
//! (a migration its map has not seen yet) answers `MOVED`, and the vote follows it to the
//! new owner as the client's own calls do, instead of counting the member as failed.

use std::time::Duration;

use redmutex::Client;
use serial_test::serial;

use crate::name_on;
use crate::support::TestServer;
use crate::support::cluster::{self, key_slot};
use crate::support::deploy::Deployment;
use crate::support::raw::exists;

#[test]
#[serial(cluster)]
fn quorum_members_on_a_cluster_follow_a_slot_that_moved() {
    let c = cluster::shared();
    let _d = c.disrupt();
    let masters = c.masters();
    let (from, to) = (&masters[0], masters[1].clone());
    // The cluster member reads the slot map only at start in this test's time: after the
    // migration, only a MOVED answer can tell it where the slot went.
    let member = c.client_with(|b| b.scan_interval(Duration::from_secs(3600)));
    let s1 = TestServer::start();
    let mut s2 = TestServer::start();
    let clients = [member, s1.client(), s2.client()];
    let token_name = name_on(from, "q-token");
    // One slot for both locks, so one migration moves both.
    let red_name = cluster::key_for_slot(key_slot(&token_name), &crate::support::unique("q-red"));
    let lease = Duration::from_secs(20);
    let token_lock = Client::get_quorum_token_lock(&clients, token_name.clone()).unwrap();
    let red_lock = clients[0].get_red_lock(clients.iter().map(|c| c.get_lock(red_name.clone())));

    // Through the map as it is, so the member has pooled connections to the source.
    let g = token_lock
        .try_lock_with_lease(Duration::ZERO, lease)
        .unwrap()
        .expect("a free lock");
    assert_eq!(g.granted_by(), 3);
    g.unlock().unwrap();
    red_lock
        .try_lock()
        .unwrap()
        .expect("a free lock")
        .unlock()
        .unwrap();

    c.migrate_slot(key_slot(&token_name), &to);
    // Without s2 the cluster member's vote decides: 2 of 3 are needed.
    s2.kill();

    let g = token_lock
        .try_lock_with_lease(Duration::ZERO, lease)
        .expect("the moved member counted as failed")
        .expect("a free lock");
    assert_eq!(g.granted_by(), 2);
    let mut target = to.conn();
    assert!(
        exists(&mut target, &token_name),
        "not granted on the new owner"
    );
    g.unlock().expect("the release did not reach the new owner");
    assert!(!exists(&mut target, &token_name));

    let g = red_lock
        .try_lock()
        .expect("the moved member counted as failed")
        .expect("a free lock");
    assert!(
        exists(&mut target, &red_name),
        "not granted on the new owner"
    );
    g.unlock().expect("the release did not reach the new owner");
    assert!(!exists(&mut target, &red_name));
}
