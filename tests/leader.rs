//! `Client::leader`: one candidate leads at a time, a leader is told at once when its
//! lock is taken away, and stepping down lets the next candidate in. (The multi-process
//! story, with SIGKILL and SIGSTOP, is `examples/leader_election.rs`.)

mod support;

use std::time::Duration;

use redmutex::{Error, Loss};
use support::{TestServer, unique};

const HANG: Duration = Duration::from_secs(10);

#[test]
fn one_candidate_leads_and_stepping_down_hands_over() {
    let server = TestServer::start();
    let (a, b) = (server.client(), server.client());
    let name = unique("leader");
    let (la, lb) = (a.leader(name.clone()), b.leader(name.clone()));
    assert_eq!(la.name(), name);
    assert!(!la.has_leader().unwrap());
    let lead = la.try_lead().unwrap().expect("nobody leads yet");
    assert!(lead.is_leader());
    assert!(lb.has_leader().unwrap());
    assert!(lb.try_lead().unwrap().is_none());
    assert!(
        lb.await_leadership_for(Duration::from_millis(100))
            .unwrap()
            .is_none()
    );
    assert_eq!(lead.wait_lost(Duration::from_millis(10)), None);
    let waiter = std::thread::spawn(move || {
        let next = lb.await_leadership_for(HANG).unwrap();
        next.map(|l| l.step_down().is_ok())
    });
    lead.step_down().unwrap();
    assert_eq!(waiter.join().unwrap(), Some(true));
}

#[test]
fn a_leader_whose_lock_is_taken_away_learns_it_at_once() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client_with_watchdog(Duration::from_millis(600));
    let name = unique("leader-lost");
    let latch = client.leader(name.clone());
    let lead = latch.await_leadership().unwrap();
    let lost = lead.lost();
    let _: () = redis::cmd("DEL").arg(&name).query(&mut raw).unwrap();
    // The watchdog's next renewal (every 200 ms) finds the lock gone.
    assert_eq!(lost.recv_timeout(HANG), Ok(Loss::Lost));
    assert!(!lead.is_leader());
    assert_eq!(lead.wait_lost(Duration::ZERO), Some(Loss::Lost));
    assert!(matches!(lead.step_down(), Err(Error::LockLost { .. })));
    // Someone else may lead now.
    let other = server.client();
    assert!(other.leader(name).try_lead().unwrap().is_some());
}
