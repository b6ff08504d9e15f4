//! `Client::leader`: one candidate leads at a time, a leader is told at once when its
//! lock is taken away, and stepping down lets the next candidate in; anyone can read who
//! leads (`current`) and follow each change (`changes`), whether the leader is this
//! client, another redmutex process or (with the `interop` feature) a Redisson client;
//! `redmutex watch --leader` prints the same changes (with the `cli` feature). (The
//! multi-process story, with SIGKILL and SIGSTOP, is `examples/leader_election.rs`.)

#[cfg(feature = "interop")]
use redmutex_harness::peer;

use std::time::{Duration, Instant};

use crate::support::raw::{calls, pttl};
use crate::support::{Holder, TestServer, unique};
use redmutex::{ChangeCause, Error, LeaderChange, LeaderChanges, LeaderClient, Loss};

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

/// The next change (hang guard: it must come).
fn next(changes: &LeaderChanges) -> LeaderChange {
    changes
        .recv_timeout(Duration::from_secs(30))
        .unwrap()
        .expect("a leader change within 30 s")
}

/// `current` names the holder: this client's thread, another redmutex process's (its
/// named connection is there), or nobody; with the hold count and the lease left.
#[test]
fn current_names_the_leader_and_its_kind() {
    let server = TestServer::start();
    let client = server.client();
    let name = unique("leader-who");
    let latch = client.leader(name.clone());
    assert_eq!(latch.current().unwrap(), None);

    let lead = latch.try_lead().unwrap().unwrap();
    let me = latch.current().unwrap().expect("this client leads");
    assert_eq!(me.client, LeaderClient::ThisClient);
    assert_eq!(me.client_id, client.id());
    assert_eq!(me.owner, format!("{}:{}", me.client_id, me.thread));
    assert_eq!(me.holds, 1);
    let left = me.lease_left.expect("a lease");
    assert!(
        left > Duration::ZERO && left <= Duration::from_secs(30),
        "{left:?}"
    );
    assert_eq!(me.taken_after, None, "held at the first read");
    assert_eq!(lead.latch().current().unwrap().unwrap().owner, me.owner);
    lead.step_down().unwrap();

    let holder = Holder::holding(&server.url(), &name, 30_000, &[]);
    let other = latch.current().unwrap().expect("the other process leads");
    assert_eq!(other.client, LeaderClient::Redmutex);
    assert_ne!(other.client_id, client.id());
    drop(holder);
}

/// A clean hand-over is seen by the unlock message: the leader steps down under a lease
/// of two minutes, and the change (cause `Released`) comes long before that lease could
/// have ended. The observer lives in the waiting candidate's client and must not take
/// its wake-up: the candidate, asleep on the same channel, takes over at once too.
#[test]
fn a_clean_hand_over_is_seen_within_one_message() {
    let server = TestServer::start();
    let lease = Duration::from_secs(120);
    let (a, b) = (
        server.client_with_watchdog(lease),
        server.client_with_watchdog(lease),
    );
    let name = unique("leader-handover");
    let lead = a.leader(name.clone()).try_lead().unwrap().unwrap();
    let observed = b.leader(name.clone());
    let changes = observed.changes().unwrap();
    let first = next(&changes);
    assert_eq!(first.cause, ChangeCause::Initial);
    assert_eq!(first.current.as_ref().unwrap().client_id, a.id());

    // The candidate registers as a waiter after the observer (a message's one wake-up
    // goes to the first waiter in line, so an observer counted as one would take it):
    // its second attempt, which follows its registration, shows it is in line.
    let mut raw = server.conn();
    let scripts = |raw: &mut redis::Connection| calls(raw, "evalsha") + calls(raw, "eval");
    let before = scripts(&mut raw);
    let candidate = {
        let latch = b.leader(name.clone());
        std::thread::spawn(move || {
            let leadership = latch.await_leadership_for(Duration::from_secs(60)).unwrap();
            leadership.map(|l| l.step_down().is_ok())
        })
    };
    crate::support::eventually(Duration::from_secs(30), "the candidate waits", || {
        scripts(&mut raw) >= before + 2
    });
    let stepped_down = Instant::now();
    lead.step_down().unwrap();
    let change = next(&changes);
    let seen = stepped_down.elapsed();
    assert_eq!(change.cause, ChangeCause::Released, "{change:?}");
    assert_eq!(change.previous.unwrap().client_id, a.id());
    assert!(
        seen < lease,
        "seen after {seen:?}, before the {lease:?} TTL could end"
    );
    // The candidate was woken by the same message: it took over, stepped down.
    assert_eq!(candidate.join().unwrap(), Some(true));
}

/// A leader killed with SIGKILL is seen gone when its TTL ends, and not before: the
/// change (cause `Expired`) arrives after the expiry the TTL read just before the kill
/// announced, and the key is gone by then.
#[test]
fn a_killed_leader_is_seen_at_its_ttl() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client();
    let name = unique("leader-killed");
    let mut holder = Holder::holding(&server.url(), &name, 2_000, &[]);
    let changes = client.leader(name.clone()).changes().unwrap();
    let first = next(&changes);
    assert_eq!(first.current.unwrap().client, LeaderClient::Redmutex);

    let asked = Instant::now();
    let left = pttl(&mut raw, &name);
    assert!(left > 0, "{left}");
    holder.child.kill().unwrap();
    let change = next(&changes);
    let seen = asked.elapsed();
    assert_eq!(change.cause, ChangeCause::Expired, "{change:?}");
    assert_eq!(change.current, None);
    // The key expired `left` ms after `asked` at the earliest (later if a renewal
    // slipped in before the kill); 2 ms for PTTL's rounding.
    assert!(
        seen + Duration::from_millis(2) >= Duration::from_millis(left as u64),
        "seen {seen:?} after the read, before the {left} ms TTL ended"
    );
    assert!(!crate::support::raw::exists(&mut raw, &name));
    let _ = holder.child.wait();
}

/// A Redisson client holding the lock is the leader: `current` names its client id and
/// Java thread; its unlock is seen by its message.
#[cfg(feature = "interop")]
#[test]
fn a_redisson_leader_is_seen_as_leader() {
    let version = peer::versions().remove(0);
    let server = TestServer::start();
    let java = peer::Peer::start(&version, &server.url(), 120_000);
    let client = server.client();
    let name = unique("leader-java");
    java.ok("lead", &format!("lock {name}"));
    let latch = client.leader(name.clone());
    let leader = latch.current().unwrap().expect("the Java client leads");
    assert_eq!(leader.client, LeaderClient::Redisson, "Redisson {version}");
    assert_eq!(leader.client_id, java.client_id());
    assert_eq!(leader.thread, java.thread_id("lead"));
    let changes = latch.changes().unwrap();
    assert_eq!(next(&changes).current.unwrap().owner, leader.owner);
    java.ok("lead", &format!("unlock {name}"));
    let change = next(&changes);
    assert_eq!(change.cause, ChangeCause::Released, "{change:?}");
    assert_eq!(change.current, None);
}

/// `redmutex watch --leader NAME` prints who leads, then the hand-over as it happens.
#[cfg(feature = "cli")]
#[test]
fn watch_leader_prints_the_changes_live() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let server = TestServer::start();
    let name = unique("leader-watch");
    let lease = Duration::from_secs(120);
    let a = server.client_with_watchdog(lease);
    let lead = a.leader(name.clone()).try_lead().unwrap().unwrap();
    let mut watch = Command::new(crate::support::redmutex_bin())
        .args(["watch", "--leader", "--json", "--url", &server.url(), &name])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let mut line =
        || -> serde_json::Value { serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap() };
    let first = line();
    assert_eq!(first["cause"], "initial");
    assert_eq!(first["leader"]["client_id"], a.id());
    assert_eq!(first["leader"]["client"], "redmutex");
    lead.step_down().unwrap();
    let change = line();
    assert_eq!(change["cause"], "released", "{change}");
    assert_eq!(change["previous"]["client_id"], a.id());
    assert!(change["leader"].is_null());
    let _ = watch.kill();
    let _ = watch.wait();
}
