//! The non-reentrant lock and non-reentrant fair lock against Redisson 4.4+'s (scenario
//! 17). Older Redisson has neither; the peer says so and the scenario checks that it
//! does.

use std::sync::mpsc;
use std::thread;

use redmutex::Error;
use serial_test::parallel;

use crate::peer::Peer;
use crate::support::raw::{fair_queue, lock_channel};
use crate::support::{TestServer, eventually, unique};
use crate::{HANG, WATCHDOG_MS, assert_imse, run_versions, wait_subscribers};

/// Non-reentrant locks: each side's holder is refused a second acquisition (Java with
/// `IllegalMonitorStateException`, Rust with `Error::AlreadyHeld`) with nothing changed
/// and, for the fair kind, without being queued; the other side is excluded and woken by
/// the release; fair waiters of both sides are served in arrival order.
#[test]
#[parallel]
fn scenario_17_non_reentrant_locks_across_sides() {
    run_versions(17, non_reentrant_locks_across_sides);
}

fn non_reentrant_locks_across_sides(v: &str) {
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();
    let name = unique("s17-nr");
    let reply = peer.call("j", &format!("nonreentrant.trylock {name} -1"));
    if !v.starts_with('4') {
        let err = reply.expect_err("Redisson 3.x has no non-reentrant lock");
        assert!(err.starts_with("Unsupported"), "{err}");
        assert!(
            peer.call("j", &format!("nrfair.trylock {name} -1"))
                .is_err()
        );
        peer.quit();
        return;
    }
    assert_eq!(reply, Ok("true".to_owned()));
    assert_imse(&peer.err("j", &format!("nonreentrant.lock {name}")));
    assert_eq!(peer.num("j", &format!("nonreentrant.holdcount {name}")), 1);
    let lock = client.get_non_reentrant_lock(name.clone());
    thread::scope(|s| {
        assert!(
            s.spawn(|| lock.try_lock().unwrap().is_none())
                .join()
                .unwrap()
        );
        let w = s.spawn(|| lock.try_lock_for(HANG).unwrap().map(|g| g.detach()));
        wait_subscribers(&mut raw, &lock_channel(&name), 1);
        peer.ok("j", &format!("nonreentrant.unlock {name}"));
        assert!(w.join().unwrap().is_some(), "rust took over");
    });
    // That thread's hold, released on the Rust side by force: a Rust holder now.
    assert!(lock.force_unlock().unwrap());
    let guard = lock.lock().unwrap();
    assert!(matches!(lock.lock(), Err(Error::AlreadyHeld { .. })));
    assert_eq!(lock.hold_count().unwrap(), 1);
    assert!(!peer.bool("j", &format!("nonreentrant.trylock {name} 0")));
    let java = peer.send("w", &format!("nonreentrant.lock {name}"));
    wait_subscribers(&mut raw, &lock_channel(&name), 1);
    guard.unlock().unwrap();
    assert_eq!(java.wait(HANG), Ok(String::new()));
    peer.ok("w", &format!("nonreentrant.unlock {name}"));

    // The fair kind: a Rust waiter queued before a Java one is served first.
    let name = unique("s17-nrfair");
    let fair = client.get_non_reentrant_fair_lock(name.clone());
    let java_waiter = peer.field(&peer.thread_id("w"));
    peer.ok("h", &format!("nrfair.lock {name}"));
    assert_imse(&peer.err("h", &format!("nrfair.trylock {name} 1000")));
    thread::scope(|s| {
        let (refusal, refused) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let fair = &fair;
        s.spawn(move || {
            let g = fair.lock().unwrap();
            let again = fair.try_lock_for(HANG).map(drop);
            refusal
                .send(matches!(again, Err(Error::AlreadyHeld { .. })))
                .unwrap();
            released.recv().unwrap();
            g.unlock().unwrap();
        });
        eventually(HANG, "rust queued", || {
            fair_queue(&mut raw, &name).len() == 1
        });
        let java = peer.send("w", &format!("nrfair.lock {name}"));
        eventually(HANG, "java queued", || {
            fair_queue(&mut raw, &name).len() == 2
        });
        peer.ok("h", &format!("nrfair.unlock {name}"));
        assert!(
            refused.recv().unwrap(),
            "the rust holder's second acquisition was refused"
        );
        assert_eq!(
            fair_queue(&mut raw, &name),
            [java_waiter],
            "the refused holder was not queued"
        );
        release.send(()).unwrap();
        assert_eq!(java.wait(HANG), Ok(String::new()), "java served second");
    });
    assert_imse(&peer.err("w", &format!("nrfair.lock {name}")));
    peer.ok("w", &format!("nrfair.unlock {name}"));
    peer.quit();
}
