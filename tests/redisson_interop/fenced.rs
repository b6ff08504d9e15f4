//! `RFencedLock` against Redisson's (3.19+, so both tested versions): one token counter,
//! tokens that rise across the languages, mutual exclusion and shared wake-ups
//! (scenario 15).

use std::thread;
use std::time::{Duration, Instant};

use serial_test::parallel;

use crate::peer::Peer;
use crate::support::raw::{fenced_token_key, get, lock_channel, pttl};
use crate::support::{TestServer, unique};
use crate::{HANG, WATCHDOG_MS, assert_woken_by_message, ms, run_versions, wait_subscribers};

/// Fenced lock: Java and Rust acquisitions of one name, re-entries included, draw
/// strictly increasing tokens from one counter; each side excludes the other and wakes
/// the other's waiter with its unlock; a Java `RLock` on the name draws no token, as
/// documented for redmutex's `RLock`.
#[test]
#[parallel]
fn scenario_15_fenced_tokens_across_sides() {
    run_versions(15, fenced_tokens_across_sides);
}

/// Waits (event-driven, polling the peer) until one Java wait on fenced lock `name` is
/// parked on its unlock channel, so that the next unlock message runs it.
fn wait_parked(peer: &Peer, name: &str) {
    let end = Instant::now() + HANG;
    while peer.num("x", &format!("fenced.parked {name}")) < 1 {
        assert!(
            Instant::now() < end,
            "no java wait parked on {name} within {HANG:?}"
        );
        thread::sleep(Duration::from_millis(2));
    }
}

fn fenced_tokens_across_sides(v: &str) {
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();
    let name = unique("s15-fenced");
    let lock = client.get_fenced_lock(name.clone());
    let java_token = |thread: &str, cmd: &str| -> u64 {
        peer.ok(thread, &format!("fenced.{cmd} {name}"))
            .parse()
            .unwrap()
    };
    let mut tokens = Vec::new();

    // Java first, with a re-entry; then Rust, with a re-entry.
    tokens.push(java_token("j", "lockandgettoken"));
    tokens.push(java_token("j", "lockandgettoken"));
    assert_eq!(peer.num("j", &format!("fenced.holdcount {name}")), 2);
    assert!(
        thread::scope(|s| s
            .spawn(|| lock.try_lock().unwrap().is_none())
            .join()
            .unwrap()),
        "rust acquired a java-held fenced lock"
    );
    peer.ok("j", &format!("fenced.unlock {name}"));
    peer.ok("j", &format!("fenced.unlock {name}"));
    let outer = lock.lock_and_get_token().unwrap();
    let inner = lock.lock().unwrap();
    tokens.extend([outer.token(), inner.token()]);
    assert!(
        !peer.bool("j", &format!("fenced.trylock {name} 0")),
        "java acquired"
    );
    assert_eq!(java_token("x", "gettoken"), inner.token());
    assert_eq!(lock.get_token().unwrap(), inner.token());

    // A Java waiter is woken by the Rust unlock and draws the next token. Its wait is
    // Redisson's asynchronous one: unlocking before it parks would race Redisson's own
    // lost wake-up before 3.28.0 (#5761; a Java unlocker hits it as well), so wait until
    // it is parked on the channel.
    let waiter = peer.send("w", &format!("fenced.lockandgettoken {name}"));
    wait_subscribers(&mut raw, &lock_channel(&name), 1);
    wait_parked(&peer, &name);
    drop(inner);
    let released = Instant::now();
    outer.unlock().unwrap();
    let (reply, at) = waiter.wait_timed(HANG);
    let java = reply.expect("java lockAndGetToken");
    println!(
        "scenario 15 version {v}: java fenced waiter took over {:.2} ms after the rust unlock",
        ms(at.duration_since(released))
    );
    assert_woken_by_message("java fenced waiter", at.duration_since(released));
    tokens.push(java.parse().unwrap());

    // A Rust waiter is woken by the Java unlock.
    thread::scope(|s| {
        let w = s.spawn(|| {
            let g = lock.try_lock_for(HANG).unwrap().expect("rust took over");
            let took = (g.token(), Instant::now());
            g.unlock().unwrap();
            took
        });
        wait_subscribers(&mut raw, &lock_channel(&name), 1);
        let released = Instant::now();
        peer.ok("w", &format!("fenced.unlock {name}"));
        let (token, at) = w.join().unwrap();
        assert_woken_by_message("rust fenced waiter", at.duration_since(released));
        tokens.push(token);
    });

    // Java's timed form, and its plain tryLock, move the counter too.
    let timed = peer.ok("j", &format!("fenced.trylockandgettoken {name} 1000 30000"));
    tokens.push(timed.parse().unwrap());
    peer.ok("j", &format!("fenced.unlock {name}"));
    assert!(peer.bool("j", &format!("fenced.trylock {name} -1")));
    peer.ok("j", &format!("fenced.unlock {name}"));
    tokens.push(lock.get_token().unwrap());
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens must rise strictly: {tokens:?}"
    );
    assert_eq!(tokens.first(), Some(&1));

    // A Java RLock on the fenced name takes the hash without a token; so does ours.
    let before = lock.get_token().unwrap();
    peer.ok("j", &format!("lock {name}"));
    peer.ok("j", &format!("unlock {name}"));
    client
        .get_lock(name.clone())
        .lock()
        .unwrap()
        .unlock()
        .unwrap();
    assert_eq!(get(&mut raw, &fenced_token_key(&name)), Some(before as i64));
    assert_eq!(pttl(&mut raw, &fenced_token_key(&name)), -1);
    peer.quit();
}
