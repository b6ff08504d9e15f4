//! Leases across the languages: both watchdogs renewing, a lease expiring without a
//! message, a killed holder process taken over at its TTL (scenarios 4, 6, 10).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use redmutex::Error;
use serial_test::parallel;

use crate::holder::RustHolder;
use crate::peer::Peer;
use crate::support::raw::{exists, hgetall, lock_channel, pttl};
use crate::support::{Holder, TestServer, unique};
use crate::{
    HANG, WATCHDOG_MS, assert_imse, assert_single_field, ms, run_versions, wait_subscribers,
};

/// Samples the raw PTTL of a key every ~200 ms on its own connection.
struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Vec<i64>>,
}

impl Sampler {
    fn start(server: &TestServer, key: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let mut conn = server.conn();
        let key = key.to_owned();
        let flag = Arc::clone(&stop);
        let handle = thread::spawn(move || {
            let mut samples = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                samples.push(pttl(&mut conn, &key));
                thread::sleep(Duration::from_millis(200));
            }
            samples
        });
        Self { stop, handle }
    }

    fn finish(self) -> Vec<i64> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap()
    }
}

/// A raw subscriber of one lock channel that records every message published on it.
struct Monitor {
    messages: Receiver<String>,
    control: String,
    handle: JoinHandle<()>,
}

impl Monitor {
    fn start(server: &TestServer, channel: &str) -> Self {
        let control = unique("monitor-stop");
        let mut conn = server.conn();
        conn.set_read_timeout(None).unwrap();
        let (tx, messages) = mpsc::channel();
        let (chan, ctl) = (channel.to_owned(), control.clone());
        let (sub_tx, sub_rx) = mpsc::channel();
        let handle = thread::spawn(move || {
            let mut ps = conn.as_pubsub();
            ps.subscribe(&chan).unwrap();
            ps.subscribe(&ctl).unwrap();
            let _ = sub_tx.send(());
            while let Ok(msg) = ps.get_message() {
                if msg.get_channel_name() == ctl {
                    break;
                }
                let _ = tx.send(msg.get_payload::<String>().unwrap_or_default());
            }
        });
        sub_rx
            .recv_timeout(HANG)
            .expect("monitor did not subscribe");
        Self {
            messages,
            control,
            handle,
        }
    }

    /// Messages received so far (consumed).
    fn take(&self) -> Vec<String> {
        self.messages.try_iter().collect()
    }

    /// The next message, waiting at most `timeout`.
    fn next(&self, timeout: Duration) -> Option<String> {
        self.messages.recv_timeout(timeout).ok()
    }

    fn stop(self, conn: &mut redis::Connection) {
        let _: i64 = redis::cmd("PUBLISH")
            .arg(&self.control)
            .arg("stop")
            .query(conn)
            .unwrap();
        self.handle.join().unwrap();
    }
}

/// With a 2 s watchdog on both sides, each side holds for 7 s while the other keeps
/// failing timed attempts, and the raw PTTL stays within (0, 2000].
#[test]
#[parallel]
fn scenario_4_watchdog_interop() {
    run_versions(4, watchdog_interop);
}

fn watchdog_interop(v: &str) {
    const HOLD: Duration = Duration::from_secs(7);
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), 2_000);
    let client = server.client_with_watchdog(Duration::from_secs(2));
    let mut raw = server.conn();

    let check = |who: &str, samples: &[i64]| {
        assert!(
            samples.len() >= 20,
            "{who}: only {} PTTL samples",
            samples.len()
        );
        let bad: Vec<_> = samples
            .iter()
            .filter(|t| !(1..=2_000).contains(*t))
            .collect();
        assert!(
            bad.is_empty(),
            "{who}: PTTL outside (0, 2000]: {bad:?} of {samples:?}"
        );
        let min = samples.iter().min().unwrap();
        println!(
            "scenario 4 version {v}: {who} held {:.0}s, {} PTTL samples, min {min} ms",
            HOLD.as_secs_f64(),
            samples.len()
        );
    };

    // Java holds under its watchdog; Rust keeps failing.
    let name = unique("s4-java");
    let lock = client.get_lock(name.clone());
    peer.ok("h", &format!("lock {name}"));
    let sampler = Sampler::start(&server, &name);
    let end = Instant::now() + HOLD;
    let mut attempts = 0;
    while Instant::now() < end {
        assert!(
            lock.try_lock_for(Duration::from_millis(300))
                .unwrap()
                .is_none(),
            "rust acquired a lock java holds under its watchdog"
        );
        attempts += 1;
    }
    let samples = sampler.finish();
    assert!(peer.bool("h", &format!("isheld {name}")));
    peer.ok("h", &format!("unlock {name}"));
    assert!(!exists(&mut raw, &name));
    check("java", &samples);
    assert!(attempts >= 5, "only {attempts} rust attempts");

    // Rust holds under its watchdog; Java keeps failing.
    let name = unique("s4-rust");
    let lock = client.get_lock(name.clone());
    let guard = lock.lock().unwrap();
    assert_eq!(client.renewing_count(), 1);
    let sampler = Sampler::start(&server, &name);
    let end = Instant::now() + HOLD;
    let mut attempts = 0;
    while Instant::now() < end {
        assert!(
            !peer.bool("j", &format!("trylock {name} 300")),
            "java acquired a lock rust holds under its watchdog"
        );
        attempts += 1;
    }
    let samples = sampler.finish();
    assert!(!guard.is_lost());
    assert!(peer.bool("j", &format!("islocked {name}")));
    assert_eq!(lock.hold_count().unwrap(), 1);
    guard.unlock().unwrap();
    assert!(!exists(&mut raw, &name));
    check("rust", &samples);
    assert!(attempts >= 5, "only {attempts} java attempts");
    peer.quit();
}

/// A 1 s lease never released: the other side acquires once it expires, with no unlock
/// message published.
#[test]
#[parallel]
fn scenario_6_expired_lease_without_message() {
    run_versions(6, expired_lease_without_message);
}

fn expired_lease_without_message(v: &str) {
    const NOT_BEFORE: Duration = Duration::from_millis(900);
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();

    // Java takes a 1 s lease; Rust waits in lock().
    let name = unique("s6-java-lease");
    let lock = client.get_lock(name.clone());
    let monitor = Monitor::start(&server, &lock_channel(&name));
    let leased = peer.send("h", &format!("lock {name} 1000"));
    // The lease starts after this instant: a lower bound for the time since it started.
    let sent = leased.sent_at();
    let (reply, replied) = leased.wait_timed(HANG);
    assert_eq!(reply, Ok(String::new()));
    let ttl = pttl(&mut raw, &name);
    assert!((1..=1_000).contains(&ttl), "PTTL of a 1 s lease: {ttl}");
    let guard = lock.lock().unwrap();
    let acquired = Instant::now();
    let since_send = acquired.duration_since(sent);
    println!(
        "scenario 6 version {v}: java 1 s lease -> rust acquired {:.0} ms after the java lock \
         was sent ({:.0} ms after its reply)",
        ms(since_send),
        ms(acquired.duration_since(replied))
    );
    assert!(
        since_send >= NOT_BEFORE,
        "rust acquired {since_send:?} into a 1 s lease"
    );
    assert!(
        since_send < Duration::from_secs(20),
        "rust waited {since_send:?}"
    );
    assert_eq!(
        monitor.take(),
        Vec::<String>::new(),
        "a message was published"
    );
    assert!(!peer.bool("h", &format!("isheld {name}")));
    assert_imse(&peer.err("h", &format!("unlock {name}")));
    assert_single_field(&mut raw, &name, &format!("{}:", client.id()), "1");
    assert_eq!(
        monitor.take(),
        Vec::<String>::new(),
        "java's failed unlock published"
    );
    guard.unlock().unwrap();
    assert_eq!(
        monitor.next(HANG).as_deref(),
        Some("0"),
        "rust unlock message"
    );
    monitor.stop(&mut raw);

    // Rust takes a 1 s lease; Java waits in lock().
    let name = unique("s6-rust-lease");
    let lock = client.get_lock(name.clone());
    let monitor = Monitor::start(&server, &lock_channel(&name));
    let sent = Instant::now();
    let guard = lock.lock_with_lease(Duration::from_secs(1)).unwrap();
    let taken = Instant::now();
    let ttl = pttl(&mut raw, &name);
    assert!((1..=1_000).contains(&ttl), "PTTL of a 1 s lease: {ttl}");
    let (reply, acquired) = peer.send("w", &format!("lock {name}")).wait_timed(HANG);
    assert_eq!(reply, Ok(String::new()));
    let since_send = acquired.duration_since(sent);
    println!(
        "scenario 6 version {v}: rust 1 s lease -> java acquired {:.0} ms after the rust lock \
         call started ({:.0} ms after it returned)",
        ms(since_send),
        ms(acquired.duration_since(taken))
    );
    assert!(
        since_send >= NOT_BEFORE,
        "java acquired {since_send:?} into a 1 s lease"
    );
    assert!(
        since_send < Duration::from_secs(20),
        "java waited {since_send:?}"
    );
    assert_eq!(
        monitor.take(),
        Vec::<String>::new(),
        "a message was published"
    );
    assert!(guard.is_lost());
    let released = guard.unlock();
    assert!(
        matches!(&released, Err(Error::LockLost { .. })),
        "release of an expired lease: {released:?}"
    );
    assert!(peer.bool("w", &format!("isheld {name}")));
    let tid = peer.thread_id("w");
    assert_eq!(
        hgetall(&mut raw, &name),
        BTreeMap::from([(peer.field(&tid), "1".to_owned())])
    );
    assert_eq!(
        monitor.take(),
        Vec::<String>::new(),
        "rust's failed release published"
    );
    peer.ok("w", &format!("unlock {name}"));
    assert_eq!(
        monitor.next(HANG).as_deref(),
        Some("0"),
        "java unlock message"
    );
    monitor.stop(&mut raw);
    peer.quit();
}

/// A holder process dies (SIGKILL) with the lock held under a 2 s watchdog: the other
/// language's waiter takes over when the key's TTL ends, not before. Java holder → Rust
/// waiter, then a `redmutex hold` process → Java waiter.
#[test]
#[parallel]
fn scenario_10_killed_holder_is_taken_over_by_the_other_side() {
    run_versions(10, killed_holder_is_taken_over);
}

fn killed_holder_is_taken_over(v: &str) {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client();

    // Java holds, the JVM is killed, a Rust waiter takes over.
    let java = Peer::start(v, &server.url(), 2_000);
    let name = unique("s10j");
    java.ok("j", &format!("lock {name}"));
    let mut waiter = RustHolder::spawn(client.get_lock(name.clone()));
    wait_subscribers(&mut raw, &lock_channel(&name), 1);
    let ttl = pttl(&mut raw, &name);
    let killed = Instant::now();
    java.kill();
    let took = waiter.acquired_at(HANG).duration_since(killed);
    println!(
        "scenario 10 version {v}: rust took over {:.0} ms after the JVM was killed ({ttl} ms of a 2000 ms lease left)",
        ms(took)
    );
    assert!(
        ms(took) >= ttl as f64 - 50.0,
        "acquired before the TTL ended"
    );
    assert!(took < Duration::from_millis(ttl as u64) + Duration::from_secs(5));
    waiter.release().unwrap();

    // A Rust holder process is killed, a Java waiter takes over (by its TTL-bounded retry).
    let java = Peer::start(v, &server.url(), WATCHDOG_MS);
    let name = unique("s10r");
    let mut holder = Holder::holding(&server.url(), &name, 2_000, &[]);
    let waiting = java.send("w", &format!("lock {name}"));
    wait_subscribers(&mut raw, &lock_channel(&name), 1);
    let ttl = pttl(&mut raw, &name);
    let killed = Instant::now();
    holder.child.kill().unwrap();
    holder.child.wait().unwrap();
    let (reply, at) = waiting.wait_timed(HANG);
    assert_eq!(reply, Ok(String::new()));
    let took = at.duration_since(killed);
    println!(
        "scenario 10 version {v}: java took over {:.0} ms after the rust holder was killed ({ttl} ms of a 2000 ms lease left)",
        ms(took)
    );
    assert!(
        ms(took) >= ttl as f64 - 50.0,
        "acquired before the TTL ended"
    );
    assert!(took < Duration::from_millis(ttl as u64) + Duration::from_secs(5));
    java.ok("w", &format!("unlock {name}"));
    java.quit();
}
