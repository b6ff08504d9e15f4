//! Quorum locks with a sentinel client among their members: its vote goes to the master
//! the sentinels name, and with another member down that vote decides.

use std::time::Duration;

use redmutex::Client;
use serial_test::parallel;

use crate::support::TestServer;
use crate::support::deploy::Deployment;
use crate::support::raw::exists;
use crate::support::sentinel::shared;
use crate::support::unique;

#[test]
#[parallel(sentinel)]
fn quorum_locks_count_a_sentinel_members_vote_on_its_master() {
    let set = shared();
    let s1 = TestServer::start();
    let mut s2 = TestServer::start();
    let clients = [set.client(), s1.client(), s2.client()];
    s2.kill();
    let token_name = unique("sq-token");
    let red_name = unique("sq-red");
    let token_lock = Client::get_quorum_token_lock(&clients, token_name.clone()).unwrap();
    let red_lock = clients[0].get_red_lock(clients.iter().map(|c| c.get_lock(red_name.clone())));

    let g = token_lock
        .try_lock_with_lease(Duration::ZERO, Duration::from_secs(20))
        .unwrap()
        .expect("a free lock");
    assert_eq!(g.granted_by(), 2);
    assert!(exists(&mut set.master().conn(), &token_name));
    g.unlock().unwrap();
    assert!(!exists(&mut set.master().conn(), &token_name));

    let g = red_lock.try_lock().unwrap().expect("a free lock");
    assert!(exists(&mut set.master().conn(), &red_name));
    g.unlock().unwrap();
    assert!(!exists(&mut set.master().conn(), &red_name));
}
