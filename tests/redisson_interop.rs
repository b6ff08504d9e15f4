//! Interoperability with real Redisson clients.
//!
//! Every scenario runs against every Redisson version in `REDMUTEX_REDISSON_VERSIONS`
//! (default `4.7.0,3.23.5`), each on its own `redis-server`, with the Java peer of
//! `tests/interop` (driven by `support/peer.rs`) as the other side. Each version prints a
//! line `scenario N version V: ok`; a failing version does not hide the others' results.
//!
//! Needs `redis-server`, a JDK and Maven on PATH (the peer is built on first use);
//! scenario 12 also runs the JDK's `jstack` on the peer.
//! Timing assertions are hang guards only (far below the 30 s lease where a message is
//! what must wake a waiter); measured latencies are printed, not asserted.
//!
//! The two heavy scenarios (1: 16,000 critical sections, 9: latency measurement) run
//! `#[serial]`, alone; the others `#[parallel]` with each other.

#[path = "support/peer.rs"]
mod peer;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use redmutex::{Client, Error, PermitId, RLock};
use serial_test::{parallel, serial};

use peer::{Peer, Pending};
use support::raw::{
    exists, fair_queue_key, fair_timeouts_key, fair_wait_channel, hgetall, latch_channel,
    lock_channel, lrange, numsub, permit_leases, permit_timeouts_key, pttl, read_timeout_key,
    rwlock_channel, semaphore_channel, zcard,
};
use support::{TestServer, eventually, unique};

/// Hang guard for anything that should take milliseconds.
const HANG: Duration = Duration::from_secs(60);
/// Default lease (Redisson's and ours): a waiter woken well before it can only have been
/// woken by the unlock message.
const WATCHDOG_MS: u64 = 30_000;
/// "Well before the TTL could expire": the bound asserted on message wake-ups.
const WAKE_BOUND: Duration = Duration::from_secs(5);

// ------------------------------------------------------------------------------ helpers

/// Runs `f` once per Redisson version, prints one result line per version and fails at
/// the end if any version failed.
fn run_versions(scenario: u32, f: impl Fn(&str)) {
    let mut failed = Vec::new();
    for v in peer::versions() {
        let started = Instant::now();
        match catch_unwind(AssertUnwindSafe(|| f(&v))) {
            Ok(()) => println!(
                "scenario {scenario} version {v}: ok ({:.1}s)",
                started.elapsed().as_secs_f64()
            ),
            Err(e) => {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                println!("scenario {scenario} version {v}: FAILED: {msg}");
                failed.push(v);
            }
        }
    }
    assert!(
        failed.is_empty(),
        "scenario {scenario} failed for Redisson {failed:?}"
    );
}

fn latches(conn: &mut redis::Connection, name: &str) -> Vec<String> {
    redis::cmd("KEYS")
        .arg(format!("redisson_unlock_latch:{{{name}}}:*"))
        .query(conn)
        .unwrap()
}

/// Waits (event-driven, polling Redis) until `channel` has at least `n` subscribers.
fn wait_subscribers(conn: &mut redis::Connection, channel: &str, n: i64) {
    let end = Instant::now() + HANG;
    while numsub(conn, channel) < n {
        assert!(
            Instant::now() < end,
            "nobody subscribed {channel} within {HANG:?}"
        );
        thread::sleep(Duration::from_millis(2));
    }
}

/// Asserts that `reply` is Redisson's refusal to release a lock it does not hold.
fn assert_imse(reply: &str) {
    assert!(
        reply.starts_with("IllegalMonitorStateException"),
        "expected IllegalMonitorStateException, got {reply:?}"
    );
}

/// The only field of the lock hash, which must start with `prefix` and hold `count`.
fn assert_single_field(conn: &mut redis::Connection, name: &str, prefix: &str, count: &str) {
    let h = hgetall(conn, name);
    assert_eq!(h.len(), 1, "lock hash {name}: {h:?}");
    let (field, value) = h.iter().next().unwrap();
    let thread = field.strip_prefix(prefix);
    assert!(
        thread.is_some_and(|t| t.parse::<u64>().is_ok()),
        "field {field:?} is not {prefix}<thread number>"
    );
    assert_eq!(value, count, "hold count in {h:?}");
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A Rust thread that takes `lock` with `lock()`, reports when it got it, holds it until
/// told to release, and returns the release's result.
struct RustHolder {
    acquired: Receiver<Instant>,
    got: Option<Instant>,
    release: Sender<()>,
    handle: JoinHandle<redmutex::Result<()>>,
}

impl RustHolder {
    fn spawn(lock: RLock) -> Self {
        let (acq_tx, acquired) = mpsc::channel();
        let (release, rel_rx) = mpsc::channel::<()>();
        let handle = thread::spawn(move || {
            let guard = lock.lock()?;
            let _ = acq_tx.send(Instant::now());
            let _ = rel_rx.recv();
            guard.unlock()
        });
        Self {
            acquired,
            got: None,
            release,
            handle,
        }
    }

    /// When the thread acquired, waiting at most `timeout` (panics past it).
    fn acquired_at(&mut self, timeout: Duration) -> Instant {
        if let Some(t) = self.got {
            return t;
        }
        match self.acquired.recv_timeout(timeout) {
            Ok(t) => {
                self.got = Some(t);
                t
            }
            Err(RecvTimeoutError::Timeout) => panic!("rust waiter not acquired within {timeout:?}"),
            Err(RecvTimeoutError::Disconnected) => {
                panic!("rust waiter thread ended without the lock")
            }
        }
    }

    /// Whether it has acquired by now (no waiting).
    fn has_acquired(&mut self) -> bool {
        if self.got.is_none() {
            self.got = self.acquired.try_recv().ok();
        }
        self.got.is_some()
    }

    fn release(self) -> redmutex::Result<()> {
        let _ = self.release.send(());
        self.handle.join().expect("rust holder thread panicked")
    }
}

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

/// The pid of the peer JVM that this process started against `server` (its command line
/// names the server's URL, which is unique per test server).
fn peer_pid(server: &TestServer) -> u32 {
    let url = server.url();
    let me = std::process::id();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let has = |s: &str| args.contains(&s.as_bytes());
        if !has("dev.redmutex.interop.Peer") || !has(&url) {
            continue;
        }
        // stat: `pid (comm) state ppid ...`
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(me) {
            return pid;
        }
    }
    panic!("no peer JVM of this process runs against {url}");
}

/// Waits until every named Java thread of the peer is parked on its lock entry's latch
/// inside `RedissonLock.lock` (per `jstack`): past its last attempt, asleep until a
/// message or the TTL. Redisson leaves no trace of that in Redis, and its `"1"` message
/// (write unlock) releases only as many latch permits as threads are parked at that
/// moment, so a thread that is about to park misses it and sleeps the whole TTL. Returns
/// the number of `jstack` runs.
fn wait_parked_in_lock(pid: u32, threads: &[String]) -> usize {
    let end = Instant::now() + HANG;
    let mut runs = 0;
    loop {
        let out = std::process::Command::new("jstack")
            .arg(pid.to_string())
            .output()
            .expect("jstack (from the JDK) must be on PATH");
        runs += 1;
        let dump = String::from_utf8_lossy(&out.stdout);
        let parked = |t: &String| {
            dump.split("\n\n").any(|block| {
                block.starts_with(&format!("\"{t}\" "))
                    && block.contains("java.util.concurrent.Semaphore.tryAcquire")
                    && block.contains("org.redisson.RedissonLock.lock")
            })
        };
        if threads.iter().all(parked) {
            return runs;
        }
        assert!(
            Instant::now() < end,
            "java threads {threads:?} not all parked in lock() within {HANG:?}:\n{dump}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// The members of a permit-expirable semaphore's `{name}:timeout` zset, as permit ids.
fn acquired_ids(conn: &mut redis::Connection, name: &str) -> BTreeSet<PermitId> {
    permit_leases(conn, name)
        .into_iter()
        .map(|(m, _)| PermitId::from_bytes(m.try_into().expect("a permit id is 16 bytes")))
        .collect()
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    assert!(!sorted.is_empty());
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

// ---------------------------------------------------------------------------- scenario 1

/// 4 Java threads and 4 Rust threads each run 2,000 non-atomic GET/SET increments under
/// one lock: the counter must be exactly 16,000.
#[test]
#[serial]
fn scenario_1_mixed_mutual_exclusion() {
    run_versions(1, mixed_mutual_exclusion);
}

fn mixed_mutual_exclusion(v: &str) {
    const THREADS: usize = 4;
    const PER_THREAD: u64 = 2_000;
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();
    let name = unique("s1-lock");
    let counter = unique("s1-counter");

    let started = Instant::now();
    let java: Vec<Pending> = (0..THREADS)
        .map(|i| {
            peer.send(
                &format!("incr{i}"),
                &format!("incr {name} {counter} {PER_THREAD}"),
            )
        })
        .collect();
    let max_rust_wait = thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let lock = client.get_lock(name.clone());
                let mut conn = server.conn();
                let counter = &counter;
                s.spawn(move || {
                    let mut max_wait = Duration::ZERO;
                    for _ in 0..PER_THREAD {
                        let asked = Instant::now();
                        let guard = lock.lock().expect("rust lock()");
                        max_wait = max_wait.max(asked.elapsed());
                        // Deliberately non-atomic: only the lock protects it.
                        let value: Option<u64> =
                            redis::cmd("GET").arg(counter).query(&mut conn).unwrap();
                        redis::cmd("SET")
                            .arg(counter)
                            .arg(value.unwrap_or(0) + 1)
                            .exec(&mut conn)
                            .unwrap();
                        guard.unlock().expect("rust unlock");
                    }
                    max_wait
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("rust worker panicked"))
            .max()
            .unwrap()
    });
    let rust_done = started.elapsed();
    for p in java {
        assert_eq!(
            p.wait(Duration::from_secs(1_200)),
            Ok(PER_THREAD.to_string())
        );
    }
    let elapsed = started.elapsed();

    let total: u64 = redis::cmd("GET").arg(&counter).query(&mut raw).unwrap();
    assert_eq!(
        total,
        2 * THREADS as u64 * PER_THREAD,
        "lost updates: mutual exclusion broken"
    );
    let lock = client.get_lock(name.clone());
    assert!(!lock.is_locked().unwrap());
    assert!(!peer.bool("check", &format!("islocked {name}")));
    assert_eq!(client.renewing_count(), 0);
    println!(
        "scenario 1 version {v}: counter {total} after {:.1}s (rust threads done at {:.1}s, \
         longest rust lock() wait {:.0} ms)",
        elapsed.as_secs_f64(),
        rust_done.as_secs_f64(),
        ms(max_rust_wait)
    );
    peer.quit();
}

// ---------------------------------------------------------------------------- scenario 2

/// Rust holds; Java sees it held by someone else; a blocked Java `lock()` acquires right
/// after the Rust unlock (only the unlock message can explain that).
#[test]
#[parallel]
fn scenario_2_rust_holds_java_waits() {
    run_versions(2, rust_holds_java_waits);
}

fn rust_holds_java_waits(v: &str) {
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();
    let name = unique("s2");
    let lock = client.get_lock(name.clone());

    let guard = lock.lock().unwrap();
    assert_single_field(&mut raw, &name, &format!("{}:", client.id()), "1");
    assert!(!peer.bool("j", &format!("trylock {name} -1")));
    assert!(peer.bool("j", &format!("islocked {name}")));
    assert_eq!(peer.num("j", &format!("holdcount {name}")), 0);
    assert!(!peer.bool("j", &format!("isheld {name}")));

    let waiter = peer.send("w", &format!("lock {name}"));
    wait_subscribers(&mut raw, &lock_channel(&name), 1);
    assert_eq!(
        waiter.try_wait(Duration::ZERO),
        None,
        "java lock() returned while rust holds"
    );

    let unlocked = Instant::now();
    guard.unlock().unwrap();
    let (reply, at) = waiter.wait_timed(HANG);
    assert_eq!(reply, Ok(String::new()));
    let latency = at.duration_since(unlocked);
    println!(
        "scenario 2 version {v}: java lock() returned {:.2} ms after the rust unlock call",
        ms(latency)
    );
    assert!(
        latency < WAKE_BOUND,
        "java waiter woke after {latency:?}: not by the message"
    );

    assert!(peer.bool("w", &format!("isheld {name}")));
    assert_eq!(peer.num("w", &format!("holdcount {name}")), 1);
    let tid = peer.thread_id("w");
    assert_eq!(
        hgetall(&mut raw, &name),
        BTreeMap::from([(peer.field(&tid), "1".to_owned())])
    );
    assert!(lock.is_locked().unwrap());
    assert!(!lock.is_held_by_current_thread().unwrap());
    assert!(lock.try_lock().unwrap().is_none());
    peer.ok("w", &format!("unlock {name}"));
    assert!(!lock.is_locked().unwrap());
    assert!(!peer.bool("w", &format!("islocked {name}")));
    peer.quit();
}

// ---------------------------------------------------------------------------- scenario 3

/// Java holds twice; the first Java unlock keeps it held, the second wakes a blocked Rust
/// waiter.
#[test]
#[parallel]
fn scenario_3_java_reentrant_rust_waits() {
    run_versions(3, java_reentrant_rust_waits);
}

fn java_reentrant_rust_waits(v: &str) {
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();
    let name = unique("s3");
    let lock = client.get_lock(name.clone());

    peer.ok("h", &format!("lock {name}"));
    peer.ok("h", &format!("lock {name}"));
    assert_eq!(peer.num("h", &format!("holdcount {name}")), 2);
    let tid = peer.thread_id("h");
    assert_eq!(
        hgetall(&mut raw, &name),
        BTreeMap::from([(peer.field(&tid), "2".to_owned())])
    );
    assert!(lock.try_lock().unwrap().is_none());

    let mut waiter = RustHolder::spawn(client.get_lock(name.clone()));
    wait_subscribers(&mut raw, &lock_channel(&name), 1);

    peer.ok("h", &format!("unlock {name}"));
    assert!(
        lock.try_lock().unwrap().is_none(),
        "acquired after a partial java unlock"
    );
    assert!(lock.is_locked().unwrap());
    assert_eq!(lock.hold_count().unwrap(), 0);
    assert_eq!(peer.num("h", &format!("holdcount {name}")), 1);
    assert!(pttl(&mut raw, &name) > 0);
    assert!(
        !waiter.has_acquired(),
        "rust waiter acquired after a partial java unlock"
    );

    let unlocked = Instant::now();
    peer.ok("h", &format!("unlock {name}"));
    let latency = waiter.acquired_at(HANG).duration_since(unlocked);
    println!(
        "scenario 3 version {v}: rust lock() returned {:.2} ms after the second java unlock was sent",
        ms(latency)
    );
    assert!(
        latency < WAKE_BOUND,
        "rust waiter woke after {latency:?}: not by the message"
    );

    assert!(peer.bool("h", &format!("islocked {name}")));
    assert!(!peer.bool("h", &format!("isheld {name}")));
    assert_eq!(peer.num("h", &format!("holdcount {name}")), 0);
    assert_single_field(&mut raw, &name, &format!("{}:", client.id()), "1");
    waiter.release().unwrap();
    assert!(!exists(&mut raw, &name));
    assert!(!peer.bool("h", &format!("islocked {name}")));
    peer.quit();
}

// ---------------------------------------------------------------------------- scenario 4

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

// ---------------------------------------------------------------------------- scenario 5

/// `force_unlock` on either side wakes the other side's waiter.
#[test]
#[parallel]
fn scenario_5_force_unlock_wakes_other_side() {
    run_versions(5, force_unlock_wakes_other_side);
}

fn force_unlock_wakes_other_side(v: &str) {
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();

    // A Rust thread holds, Java waits, Rust force-unlocks.
    let name = unique("s5-rust-force");
    let lock = client.get_lock(name.clone());
    let mut holder = RustHolder::spawn(client.get_lock(name.clone()));
    holder.acquired_at(HANG);
    let waiter = peer.send("w", &format!("lock {name}"));
    wait_subscribers(&mut raw, &lock_channel(&name), 1);
    assert_eq!(waiter.try_wait(Duration::ZERO), None);
    let forced = Instant::now();
    assert!(lock.force_unlock().unwrap());
    let (reply, at) = waiter.wait_timed(HANG);
    assert_eq!(reply, Ok(String::new()));
    let latency = at.duration_since(forced);
    println!(
        "scenario 5 version {v}: rust force_unlock -> java lock() returned after {:.2} ms",
        ms(latency)
    );
    assert!(
        latency < WAKE_BOUND,
        "java waiter woke after {latency:?}: not by the message"
    );
    assert!(peer.bool("w", &format!("isheld {name}")));
    // The forced-out Rust holder learns it lost the lock and does not touch Java's hold.
    let released = holder.release();
    assert!(
        matches!(&released, Err(e) if e.is_not_held()),
        "release after force_unlock: {released:?}"
    );
    let tid = peer.thread_id("w");
    assert_eq!(
        hgetall(&mut raw, &name),
        BTreeMap::from([(peer.field(&tid), "1".to_owned())])
    );
    peer.ok("w", &format!("unlock {name}"));
    assert!(!exists(&mut raw, &name));

    // Java holds, Rust waits, Java force-unlocks.
    let name = unique("s5-java-force");
    peer.ok("h", &format!("lock {name}"));
    let mut waiter = RustHolder::spawn(client.get_lock(name.clone()));
    wait_subscribers(&mut raw, &lock_channel(&name), 1);
    assert!(!waiter.has_acquired());
    let forced = Instant::now();
    assert!(peer.bool("f", &format!("forceunlock {name}")));
    let latency = waiter.acquired_at(HANG).duration_since(forced);
    println!(
        "scenario 5 version {v}: java forceUnlock -> rust lock() returned after {:.2} ms",
        ms(latency)
    );
    assert!(
        latency < WAKE_BOUND,
        "rust waiter woke after {latency:?}: not by the message"
    );
    assert_imse(&peer.err("h", &format!("unlock {name}")));
    assert!(!peer.bool("h", &format!("isheld {name}")));
    assert_single_field(&mut raw, &name, &format!("{}:", client.id()), "1");
    waiter.release().unwrap();
    assert!(!exists(&mut raw, &name));
    peer.quit();
}

// ---------------------------------------------------------------------------- scenario 6

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

// ---------------------------------------------------------------------------- scenario 7

/// Releasing the other side's lock is refused on both sides and leaves the key alone.
#[test]
#[parallel]
fn scenario_7_unlocking_the_other_sides_lock() {
    run_versions(7, unlocking_the_other_sides_lock);
}

fn unlocking_the_other_sides_lock(v: &str) {
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();
    let name = unique("s7");
    let lock = client.get_lock(name.clone());
    let snapshot = |conn: &mut redis::Connection| (hgetall(conn, &name), pttl(conn, &name));
    let same = |before: &(BTreeMap<String, String>, i64),
                after: &(BTreeMap<String, String>, i64)| {
        assert_eq!(after.0, before.0, "lock hash changed");
        assert!(after.1 > 0, "PTTL after: {}", after.1);
        assert!(
            (before.1 - after.1).abs() < 1_000,
            "PTTL {} -> {}",
            before.1,
            after.1
        );
    };

    // Java holds; Rust unlock is refused.
    peer.ok("h", &format!("lock {name}"));
    let tid = peer.thread_id("h");
    let before = snapshot(&mut raw);
    assert_eq!(
        before.0,
        BTreeMap::from([(peer.field(&tid), "1".to_owned())])
    );
    let e = lock.unlock().unwrap_err();
    assert!(
        e.is_not_held() && matches!(e, Error::NotHeld { .. }),
        "{e:?}"
    );
    let after = snapshot(&mut raw);
    same(&before, &after);
    assert!(latches(&mut raw, &name).is_empty());
    assert!(peer.bool("h", &format!("isheld {name}")));
    assert_eq!(peer.num("h", &format!("holdcount {name}")), 1);
    peer.ok("h", &format!("unlock {name}"));
    assert!(!exists(&mut raw, &name));

    // Rust holds; Java unlock is refused.
    let guard = lock.lock().unwrap();
    let before = snapshot(&mut raw);
    assert_single_field(&mut raw, &name, &format!("{}:", client.id()), "1");
    assert_imse(&peer.err("x", &format!("unlock {name}")));
    let after = snapshot(&mut raw);
    same(&before, &after);
    assert_eq!(lock.hold_count().unwrap(), 1);
    assert!(lock.is_held_by_current_thread().unwrap());
    assert!(peer.bool("x", &format!("islocked {name}")));
    assert!(!guard.is_lost());
    guard.unlock().unwrap();
    assert!(!exists(&mut raw, &name));
    peer.quit();
}

// ---------------------------------------------------------------------------- scenario 8

/// Hold counts and remaining TTL read from both sides agree.
#[test]
#[parallel]
fn scenario_8_hold_count_and_ttl_agree() {
    run_versions(8, hold_count_and_ttl_agree);
}

fn hold_count_and_ttl_agree(v: &str) {
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();
    let name = unique("s8");
    let lock = client.get_lock(name.clone());

    let ttls_agree = |who: &str| {
        let java = peer.num("j", &format!("ttl {name}"));
        let rust = lock.remain_time_to_live().unwrap().expect("lock has a ttl");
        let rust = i64::try_from(rust.as_millis()).unwrap();
        assert!(java > 0, "java ttl {java}");
        assert!(
            (java - rust).abs() < 1_000,
            "{who}: java ttl {java} vs rust {rust}"
        );
        println!("scenario 8 version {v}: {who} holds: java ttl {java} ms, rust {rust} ms");
    };

    // Rust holds three times.
    let g1 = lock.lock().unwrap();
    let g2 = lock.lock().unwrap();
    let g3 = lock.lock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 3);
    assert_eq!(peer.num("j", &format!("holdcount {name}")), 0);
    assert!(peer.bool("j", &format!("islocked {name}")));
    assert!(!peer.bool("j", &format!("isheld {name}")));
    assert_single_field(&mut raw, &name, &format!("{}:", client.id()), "3");
    ttls_agree("rust");
    g3.unlock().unwrap();
    g2.unlock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 1);
    g1.unlock().unwrap();
    assert!(!peer.bool("j", &format!("islocked {name}")));

    // Java holds twice.
    peer.ok("j", &format!("lock {name}"));
    peer.ok("j", &format!("lock {name}"));
    assert_eq!(peer.num("j", &format!("holdcount {name}")), 2);
    assert!(lock.is_locked().unwrap());
    assert_eq!(lock.hold_count().unwrap(), 0);
    assert!(!lock.is_held_by_current_thread().unwrap());
    ttls_agree("java");
    let tid = peer.thread_id("j");
    assert_eq!(
        hgetall(&mut raw, &name),
        BTreeMap::from([(format!("{}:{tid}", peer.client_id()), "2".to_owned())])
    );
    peer.ok("j", &format!("unlock {name}"));
    peer.ok("j", &format!("unlock {name}"));
    assert!(!lock.is_locked().unwrap());
    assert_eq!(lock.remain_time_to_live().unwrap(), None);
    assert_eq!(peer.num("j", &format!("ttl {name}")), -2);
    peer.quit();
}

// ---------------------------------------------------------------------------- scenario 9

const HANDOFFS: usize = 200;

struct Latencies {
    version: String,
    direction: &'static str,
    /// The first hand-off of the direction (a cold JVM / fresh connections).
    first: Duration,
    sorted: Vec<Duration>,
}

impl Latencies {
    fn new(version: &str, direction: &'static str, mut samples: Vec<Duration>) -> Self {
        assert_eq!(
            samples.len(),
            HANDOFFS,
            "{direction}: not every hand-off completed"
        );
        let first = samples[0];
        samples.sort();
        Self {
            version: version.to_owned(),
            direction,
            first,
            sorted: samples,
        }
    }

    fn row(&self) -> String {
        format!(
            "{:<8} | {:<12} | {:>4} | {:>8.2} | {:>8.2} | {:>8.2} | {:>8.2}",
            self.version,
            self.direction,
            self.sorted.len(),
            ms(percentile(&self.sorted, 50.0)),
            ms(percentile(&self.sorted, 99.0)),
            ms(*self.sorted.last().unwrap()),
            ms(self.first)
        )
    }
}

/// Cross-language wake-up latency, 200 hand-offs each way. A measurement: only the
/// completion of every hand-off is asserted.
#[test]
#[serial]
fn scenario_9_wake_up_latency() {
    let results = std::sync::Mutex::new(Vec::new());
    run_versions(9, |v| {
        let (r2j, j2r) = wake_up_latency(v);
        let r2j = Latencies::new(v, "rust->java", r2j);
        let j2r = Latencies::new(v, "java->rust", j2r);
        for l in [&r2j, &j2r] {
            println!("scenario 9 version {v}: {}", l.row());
        }
        results.lock().unwrap().extend([r2j, j2r]);
    });
    let results = results.into_inner().unwrap();
    println!("\nscenario 9 summary: unlock -> other side's lock() returns, ms");
    println!("version  | direction    |    n |      p50 |      p99 |      max |    first");
    println!("---------+--------------+------+----------+----------+----------+---------");
    for l in &results {
        println!("{}", l.row());
    }
}

/// Returns (Rust unlock → Java acquires, Java unlock → Rust acquires) samples. Each
/// hand-off uses a fresh lock name, so a subscriber count on its channel can only be the
/// current waiter.
fn wake_up_latency(v: &str) -> (Vec<Duration>, Vec<Duration>) {
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();
    let base = unique("s9");

    // Rust holds, the Java waiter subscribes, Rust unlocks; until the Java reply arrives.
    let mut r2j = Vec::with_capacity(HANDOFFS);
    for i in 0..HANDOFFS {
        let name = format!("{base}:r2j:{i}");
        let lock = client.get_lock(name.clone());
        let guard = lock.lock().unwrap();
        let waiter = peer.send("w", &format!("lock {name}"));
        wait_subscribers(&mut raw, &lock_channel(&name), 1);
        let unlocked = Instant::now();
        guard.unlock().unwrap();
        let (reply, at) = waiter.wait_timed(HANG);
        assert_eq!(reply, Ok(String::new()), "hand-off {i}");
        r2j.push(at.duration_since(unlocked));
        peer.ok("w", &format!("unlock {name}"));
    }

    // Java holds, a Rust waiter subscribes, Java unlock is sent; until Rust's lock() returns.
    let (go_tx, go_rx) = mpsc::channel::<String>();
    let (acq_tx, acq_rx) = mpsc::channel::<Instant>();
    let (rel_tx, rel_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<redmutex::Result<()>>();
    let rust_client = client.clone();
    let waiter = thread::spawn(move || {
        for name in go_rx {
            let lock = rust_client.get_lock(name);
            let guard = lock.lock().expect("rust waiter lock()");
            let _ = acq_tx.send(Instant::now());
            let _ = rel_rx.recv();
            let _ = done_tx.send(guard.unlock());
        }
    });
    let mut j2r = Vec::with_capacity(HANDOFFS);
    for i in 0..HANDOFFS {
        let name = format!("{base}:j2r:{i}");
        peer.ok("h", &format!("lock {name}"));
        go_tx.send(name.clone()).unwrap();
        wait_subscribers(&mut raw, &lock_channel(&name), 1);
        let unlock = peer.send("h", &format!("unlock {name}"));
        let unlocked = unlock.sent_at();
        let acquired = acq_rx
            .recv_timeout(HANG)
            .expect("rust waiter did not acquire");
        assert_eq!(unlock.wait(HANG), Ok(String::new()), "hand-off {i}");
        j2r.push(acquired.duration_since(unlocked));
        rel_tx.send(()).unwrap();
        done_rx.recv_timeout(HANG).unwrap().unwrap();
    }
    drop(go_tx);
    waiter.join().unwrap();
    peer.quit();
    (r2j, j2r)
}

// --------------------------------------------------------------------------- scenario 10

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
    let mut holder = support::Holder::holding(&server.url(), &name, 2_000, &[]);
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

// --------------------------------------------------------------------------- scenario 11

/// Waiters queued behind the holder, half Java and half Rust.
const FAIR_WAITERS: usize = 6;

/// Fair lock: Java and Rust waiters queued alternately behind a holder acquire in arrival
/// order, each woken by the previous one's unlock. Twice: a Java holder with waiters in
/// `lock()`, then a Rust holder with waiters in timed `tryLock` (60 s slots).
#[test]
#[parallel]
fn scenario_11_fair_lock_arrival_order() {
    run_versions(11, fair_lock_arrival_order);
}

fn fair_lock_arrival_order(v: &str) {
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();
    for java_holds in [true, false] {
        fair_round(v, &peer, &client, &mut raw, java_holds);
    }
    peer.quit();
}

fn fair_round(
    v: &str,
    peer: &Peer,
    client: &Client,
    raw: &mut redis::Connection,
    java_holds: bool,
) {
    let holder = if java_holds { "java" } else { "rust" };
    let name = unique(&format!("s11-{holder}-holds"));
    let fair = client.get_fair_lock(name.clone());
    let queue = fair_queue_key(&name);
    let timeouts = fair_timeouts_key(&name);
    // From a thread that is not the holder: a fair try_lock never queues.
    let rust_try_lock = || {
        thread::scope(|s| {
            s.spawn(|| fair.try_lock().unwrap().is_some())
                .join()
                .unwrap()
        })
    };

    let guard = if java_holds {
        peer.ok("h", &format!("fair.lock {name}"));
        assert_eq!(
            hgetall(raw, &name),
            BTreeMap::from([(peer.field(&peer.thread_id("h")), "1".to_owned())])
        );
        None
    } else {
        let g = fair.lock().unwrap();
        assert_single_field(raw, &name, &format!("{}:", client.id()), "1");
        Some(g)
    };
    assert!(fair.is_locked().unwrap());
    assert!(peer.bool("x", &format!("fair.islocked {name}")));

    let (tx, rx) = mpsc::channel::<(String, Instant)>();
    let mut arrival = Vec::new();
    let mut java_fields = BTreeMap::new();
    let mut rust_waiters = Vec::new();
    thread::scope(|s| {
        for i in 0..FAIR_WAITERS {
            // Alternately, starting with the side that does not hold.
            let java = (i % 2 == 0) == java_holds;
            let tx = tx.clone();
            if java {
                let label = format!("java{i}");
                let thread = format!("fw{i}");
                java_fields.insert(i, peer.field(&peer.thread_id(&thread)));
                let (cmd, expect) = if java_holds {
                    (format!("fair.lock {name}"), "")
                } else {
                    (format!("fair.trylock {name} 60000"), "true")
                };
                let pending = peer.send(&thread, &cmd);
                let name = &name;
                let label2 = label.clone();
                s.spawn(move || {
                    let (reply, at) = pending.wait_timed(HANG);
                    assert_eq!(reply, Ok(expect.to_owned()), "{label2}: {cmd}");
                    let _ = tx.send((label2, at));
                    peer.ok(&thread, &format!("fair.unlock {name}"));
                });
                arrival.push(label);
            } else {
                let label = format!("rust{i}");
                let lock = client.get_fair_lock(name.clone());
                let label2 = label.clone();
                // Not scoped: a lock() that never returns must not hang the scope.
                rust_waiters.push(thread::spawn(move || -> redmutex::Result<bool> {
                    let guard = if java_holds {
                        lock.lock()?
                    } else {
                        match lock.try_lock_for(HANG)? {
                            Some(g) => g,
                            None => return Ok(false),
                        }
                    };
                    let _ = tx.send((label2, Instant::now()));
                    guard.unlock()?;
                    Ok(true)
                }));
                arrival.push(label);
            }
            eventually(HANG, &format!("waiter {i} in the fair queue"), || {
                lrange(raw, &queue).len() == i + 1
            });
        }

        // The queue lists the waiters in arrival order; each has a slot and listens on
        // its own channel.
        let entries = lrange(raw, &queue);
        for (i, entry) in entries.iter().enumerate() {
            match java_fields.get(&i) {
                Some(field) => assert_eq!(entry, field, "queue entry {i}: {entries:?}"),
                None => {
                    let thread = entry.strip_prefix(&format!("{}:", client.id()));
                    assert!(
                        thread.is_some_and(|t| t.parse::<u64>().is_ok()),
                        "queue entry {i} is not a rust owner: {entries:?}"
                    );
                }
            }
        }
        let distinct: BTreeSet<_> = entries.iter().collect();
        assert_eq!(distinct.len(), FAIR_WAITERS, "{entries:?}");
        assert_eq!(zcard(raw, &timeouts), FAIR_WAITERS as i64);
        for entry in &entries {
            wait_subscribers(raw, &fair_wait_channel(&name, entry), 1);
        }
        // Neither side's tryLock() jumps the queue or joins it.
        assert!(!rust_try_lock(), "rust try_lock took a held fair lock");
        assert!(!peer.bool("x", &format!("fair.trylock {name} -1")));
        assert_eq!(lrange(raw, &queue), entries);

        let released = Instant::now();
        match guard {
            Some(g) => g.unlock().unwrap(),
            None => {
                peer.ok("h", &format!("fair.unlock {name}"));
            }
        }
        let mut order = Vec::new();
        let mut gaps = Vec::new();
        let mut last = released;
        for n in 0..FAIR_WAITERS {
            let (label, at) = rx.recv_timeout(HANG).unwrap_or_else(|_| {
                panic!("only {n} of {FAIR_WAITERS} waiters acquired: {order:?}")
            });
            gaps.push(at.saturating_duration_since(last));
            last = at;
            order.push(label);
        }
        let total = last.duration_since(released);
        let max_gap = gaps.iter().max().copied().unwrap();
        println!(
            "scenario 11 version {v}: {holder} holder; order {order:?}; hand-offs {:?} ms; \
             all {FAIR_WAITERS} in {:.1} ms",
            gaps.iter()
                .map(|g| (ms(*g) * 10.0).round() / 10.0)
                .collect::<Vec<_>>(),
            ms(total)
        );
        assert_eq!(order, arrival, "acquisition order is not the arrival order");
        assert!(
            max_gap < WAKE_BOUND,
            "a hand-off took {max_gap:?}: not by the message"
        );
        for w in rust_waiters.drain(..) {
            assert!(w.join().expect("rust waiter panicked").unwrap());
        }
    });

    assert!(!exists(raw, &name), "lock left: {:?}", hgetall(raw, &name));
    assert!(
        !exists(raw, &queue),
        "queue left: {:?}",
        lrange(raw, &queue)
    );
    assert!(!exists(raw, &timeouts), "timeouts left");
    assert!(!fair.is_locked().unwrap());
    assert!(!peer.bool("x", &format!("fair.islocked {name}")));
}

// --------------------------------------------------------------------------- scenario 12

/// Read-write lock: a Rust and a Java reader share it while a Java writer waits for both;
/// the Java reader's unlock keeps the hash alive for the Rust reader (whose timeout key
/// Redisson's script reads), the Rust reader's unlock wakes the writer; then a Rust
/// writer's unlock wakes three Java readers at once.
#[test]
#[parallel]
fn scenario_12_read_write_lock_interop() {
    run_versions(12, read_write_lock_interop);
}

fn read_write_lock_interop(v: &str) {
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();

    // A Rust reader and a Java reader hold at once; a Java writer waits.
    let name = unique("s12-readers");
    let rw_channel = rwlock_channel(&name);
    let rw = client.get_read_write_lock(name.clone());
    let rust_read = rw.read_lock().lock().unwrap();
    let rust_field = {
        let h = hgetall(&mut raw, &name);
        assert_eq!(h.get("mode").map(String::as_str), Some("read"), "{h:?}");
        let fields: Vec<_> = h.keys().filter(|k| *k != "mode").cloned().collect();
        assert_eq!(fields.len(), 1, "{h:?}");
        let field = fields.into_iter().next().unwrap();
        let thread = field.strip_prefix(&format!("{}:", client.id()));
        assert!(thread.is_some_and(|t| t.parse::<u64>().is_ok()), "{h:?}");
        field
    };
    let rust_timeout = read_timeout_key(&name, &rust_field, 1);
    assert!(exists(&mut raw, &rust_timeout), "{rust_timeout} missing");

    peer.ok("r", &format!("read.lock {name}"));
    let java_field = peer.field(&peer.thread_id("r"));
    assert_eq!(
        hgetall(&mut raw, &name),
        BTreeMap::from([
            ("mode".to_owned(), "read".to_owned()),
            (rust_field.clone(), "1".to_owned()),
            (java_field.clone(), "1".to_owned()),
        ]),
        "both readers hold"
    );
    assert!(peer.bool("r", &format!("read.isheld {name}")));
    assert_eq!(peer.num("r", &format!("read.holdcount {name}")), 1);
    assert!(rw.read_lock().is_held_by_current_thread().unwrap());
    assert!(rw.read_lock().is_locked().unwrap());
    assert!(!rw.write_lock().is_locked().unwrap());
    assert!(peer.bool("x", &format!("read.islocked {name}")));
    assert!(!peer.bool("x", &format!("write.islocked {name}")));
    assert!(!peer.bool("x", &format!("write.trylock {name} -1")));

    let writer = peer.send("w", &format!("write.lock {name}"));
    wait_subscribers(&mut raw, &rw_channel, 1);
    assert_eq!(
        writer.try_wait(Duration::ZERO),
        None,
        "java write.lock returned while two readers hold"
    );

    // The Java reader leaves: the Rust reader's live timeout key keeps the hash.
    peer.ok("r", &format!("read.unlock {name}"));
    assert_eq!(
        hgetall(&mut raw, &name),
        BTreeMap::from([
            ("mode".to_owned(), "read".to_owned()),
            (rust_field.clone(), "1".to_owned()),
        ]),
        "java read unlock with a rust reader left"
    );
    assert!(exists(&mut raw, &rust_timeout), "{rust_timeout} missing");
    let ttl = pttl(&mut raw, &name);
    assert!(
        (1..=WATCHDOG_MS as i64).contains(&ttl),
        "hash PTTL after the java read unlock: {ttl}"
    );
    assert!(!peer.bool("r", &format!("read.isheld {name}")));
    assert!(rw.read_lock().is_held_by_current_thread().unwrap());
    assert_eq!(
        writer.try_wait(Duration::from_millis(300)),
        None,
        "java write.lock returned while the rust reader holds"
    );

    // The Rust reader leaves: the writer wakes.
    let unlocked = Instant::now();
    rust_read.unlock().unwrap();
    let (reply, at) = writer.wait_timed(HANG);
    assert_eq!(reply, Ok(String::new()));
    let latency = at.duration_since(unlocked);
    println!(
        "scenario 12 version {v}: java write.lock returned {:.2} ms after the last (rust) \
         read unlock (hash PTTL was {ttl} ms)",
        ms(latency)
    );
    assert!(
        latency < WAKE_BOUND,
        "java writer woke after {latency:?}: not by the message"
    );
    let writer_field = format!("{}:write", peer.field(&peer.thread_id("w")));
    assert_eq!(
        hgetall(&mut raw, &name),
        BTreeMap::from([
            ("mode".to_owned(), "write".to_owned()),
            (writer_field, "1".to_owned()),
        ])
    );
    assert!(!exists(&mut raw, &rust_timeout));
    assert!(rw.write_lock().is_locked().unwrap());
    assert!(rw.read_lock().try_lock().unwrap().is_none());
    assert!(rw.write_lock().try_lock().unwrap().is_none());
    peer.ok("w", &format!("write.unlock {name}"));
    assert!(!exists(&mut raw, &name));

    // A Rust writer holds; three Java threads block in read.lock; its unlock wakes them all.
    const READERS: usize = 3;
    let name = unique("s12-writer");
    let rw_channel = rwlock_channel(&name);
    let rw = client.get_read_write_lock(name.clone());
    let write = rw.write_lock().lock().unwrap();
    let h = hgetall(&mut raw, &name);
    assert_eq!(h.len(), 2, "{h:?}");
    assert_eq!(h.get("mode").map(String::as_str), Some("write"), "{h:?}");
    assert!(
        h.iter()
            .any(|(k, c)| k.starts_with(&format!("{}:", client.id()))
                && k.ends_with(":write")
                && c == "1"),
        "{h:?}"
    );
    assert!(peer.bool("x", &format!("write.islocked {name}")));
    assert!(!peer.bool("x", &format!("read.trylock {name} -1")));

    let fields: Vec<String> = (0..READERS)
        .map(|i| peer.field(&peer.thread_id(&format!("r{i}"))))
        .collect();
    let readers: Vec<Pending> = (0..READERS)
        .map(|i| peer.send(&format!("r{i}"), &format!("read.lock {name}")))
        .collect();
    // One Redisson client shares one subscription among its threads, so NUMSUB says 1;
    // each thread must also be parked on the latch, or Redisson itself would not wake it
    // (see wait_parked_in_lock).
    wait_subscribers(&mut raw, &rw_channel, 1);
    let threads: Vec<String> = (0..READERS).map(|i| format!("r{i}")).collect();
    let runs = wait_parked_in_lock(peer_pid(&server), &threads);
    for (i, r) in readers.iter().enumerate() {
        assert_eq!(
            r.try_wait(Duration::ZERO),
            None,
            "java reader {i} returned while rust writes"
        );
    }
    assert!(rw.write_lock().is_held_by_current_thread().unwrap());

    let unlocked = Instant::now();
    write.unlock().unwrap();
    let latencies: Vec<Duration> = readers
        .into_iter()
        .map(|r| {
            let (reply, at) = r.wait_timed(HANG);
            assert_eq!(reply, Ok(String::new()));
            at.duration_since(unlocked)
        })
        .collect();
    println!(
        "scenario 12 version {v}: {READERS} java read.lock calls (parked per jstack run \
         {runs}) returned {:?} ms after the rust write unlock",
        latencies
            .iter()
            .map(|d| (ms(*d) * 100.0).round() / 100.0)
            .collect::<Vec<_>>()
    );
    for l in &latencies {
        assert!(
            *l < WAKE_BOUND,
            "a java reader woke after {l:?}: not by the message"
        );
    }
    let mut expected = BTreeMap::from([("mode".to_owned(), "read".to_owned())]);
    expected.extend(fields.iter().map(|f| (f.clone(), "1".to_owned())));
    assert_eq!(hgetall(&mut raw, &name), expected);
    for f in &fields {
        assert!(exists(&mut raw, &read_timeout_key(&name, f, 1)));
    }
    // Rust reads alongside them, but cannot write.
    let shared = rw.read_lock().try_lock().unwrap();
    assert!(shared.is_some(), "rust reader shut out by java readers");
    drop(shared);
    assert!(rw.write_lock().try_lock().unwrap().is_none());
    for i in 0..READERS {
        peer.ok(&format!("r{i}"), &format!("read.unlock {name}"));
    }
    assert!(!exists(&mut raw, &name));
    peer.quit();
}

// --------------------------------------------------------------------------- scenario 13

/// Semaphore and permit-expirable semaphore: a release on one side wakes the other side's
/// blocked acquire, and permits taken on one side are released on the other.
#[test]
#[parallel]
fn scenario_13_semaphores_across_sides() {
    run_versions(13, semaphores_across_sides);
}

fn semaphores_across_sides(v: &str) {
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();
    semaphore_part(v, &peer, &client, &mut raw);
    permit_semaphore_part(v, &peer, &client, &mut raw);
    peer.quit();
}

fn semaphore_part(v: &str, peer: &Peer, client: &Client, raw: &mut redis::Connection) {
    let name = unique("s13-sem");
    let chan = semaphore_channel(&name);
    let sem = client.get_semaphore(name.clone());
    let available = |raw: &mut redis::Connection, n: i64| {
        assert_eq!(sem.available_permits().unwrap(), n, "rust available");
        assert_eq!(
            peer.num("x", &format!("sem.available {name}")),
            n,
            "java available"
        );
        let stored: Option<i64> = redis::cmd("GET").arg(&name).query(raw).unwrap();
        assert_eq!(stored, Some(n), "stored count");
    };

    assert!(peer.bool("j", &format!("sem.trysetpermits {name} 2")));
    assert!(!sem.try_set_permits(5).unwrap());
    available(raw, 2);

    // Rust takes both; a Java acquire blocks until a Rust release.
    sem.acquire_many(2).unwrap().forget();
    available(raw, 0);
    assert!(!peer.bool("j", &format!("sem.tryacquire {name} 1 -1")));
    let java = peer.send("jw", &format!("sem.acquire {name} 1"));
    wait_subscribers(raw, &chan, 1);
    assert_eq!(
        java.try_wait(Duration::ZERO),
        None,
        "java acquired 0 permits"
    );
    let released = Instant::now();
    sem.release().unwrap();
    let (reply, at) = java.wait_timed(HANG);
    assert_eq!(reply, Ok(String::new()));
    let latency = at.duration_since(released);
    println!(
        "scenario 13 version {v}: semaphore: java acquire returned {:.2} ms after the rust release",
        ms(latency)
    );
    assert!(
        latency < WAKE_BOUND,
        "java waiter woke after {latency:?}: not by the message"
    );
    available(raw, 0);

    // A Rust acquire blocks until the Java thread releases its permit.
    eventually(HANG, "the java waiter unsubscribed", || {
        numsub(raw, &chan) == 0
    });
    thread::scope(|s| {
        let waiter = s.spawn(|| {
            let permit = sem.try_acquire_for(HANG).unwrap();
            (permit, Instant::now())
        });
        wait_subscribers(raw, &chan, 1);
        assert!(!waiter.is_finished(), "rust acquired 0 permits");
        let released = Instant::now();
        peer.ok("jw", &format!("sem.release {name} 1"));
        let (permit, at) = waiter.join().unwrap();
        let permit = permit.expect("rust acquire timed out");
        let latency = at.duration_since(released);
        println!(
            "scenario 13 version {v}: semaphore: rust acquire returned {:.2} ms after the java \
             release was sent",
            ms(latency)
        );
        assert!(
            latency < WAKE_BOUND,
            "rust waiter woke after {latency:?}: not by the message"
        );
        permit.forget();
    });
    available(raw, 0);
    // Rust holds two permits; Java gives them back.
    peer.ok("j", &format!("sem.release {name} 2"));
    available(raw, 2);
}

fn permit_semaphore_part(v: &str, peer: &Peer, client: &Client, raw: &mut redis::Connection) {
    let name = unique("s13-pes");
    let chan = semaphore_channel(&name);
    let pes = client.get_permit_expirable_semaphore(name.clone());
    let available = |raw: &mut redis::Connection, n: i64, acquired: &[PermitId]| {
        assert_eq!(pes.available_permits().unwrap(), n, "rust available");
        assert_eq!(
            peer.num("x", &format!("pes.available {name}")),
            n,
            "java available"
        );
        assert_eq!(pes.acquired_permits().unwrap(), acquired.len() as i64);
        assert_eq!(
            acquired_ids(raw, &name),
            acquired.iter().copied().collect::<BTreeSet<_>>(),
            "acquired permit ids in the zset"
        );
    };
    let java_id = |reply: String| -> PermitId {
        assert!(
            reply.len() == 32
                && reply
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "java permit id {reply:?}"
        );
        let id: PermitId = reply.parse().unwrap();
        assert_eq!(id.to_string(), reply);
        id
    };

    assert!(peer.bool("j", &format!("pes.trysetpermits {name} 2")));
    assert!(!pes.try_set_permits(9).unwrap());
    available(raw, 2, &[]);
    let rust_id = pes.acquire().unwrap();
    available(raw, 1, &[rust_id]);
    let java_id1 = java_id(peer.ok("j", &format!("pes.acquire {name}")));
    available(raw, 0, &[rust_id, java_id1]);
    assert_eq!(
        peer.ok("j", &format!("pes.tryacquire {name} -1")),
        "null",
        "java acquired from an empty semaphore"
    );

    // A Java acquire blocks; Rust releases the Java-created permit.
    let java = peer.send("pw", &format!("pes.acquire {name}"));
    wait_subscribers(raw, &chan, 1);
    assert_eq!(java.try_wait(Duration::ZERO), None);
    let released = Instant::now();
    pes.release(java_id1).unwrap();
    let (reply, at) = java.wait_timed(HANG);
    let java_id2 = java_id(reply.expect("java pes.acquire"));
    let latency = at.duration_since(released);
    println!(
        "scenario 13 version {v}: permit semaphore: java acquire returned {:.2} ms after rust \
         released java's permit",
        ms(latency)
    );
    assert!(
        latency < WAKE_BOUND,
        "java waiter woke after {latency:?}: not by the message"
    );
    available(raw, 0, &[rust_id, java_id2]);
    assert!(!pes.try_release(java_id1).unwrap(), "released twice");
    assert!(!peer.bool("j", &format!("pes.tryrelease {name} {java_id1}")));
    available(raw, 0, &[rust_id, java_id2]);

    // A Rust acquire blocks; Java releases the Rust-created permit.
    eventually(HANG, "the java waiter unsubscribed", || {
        numsub(raw, &chan) == 0
    });
    let rust_id2 = thread::scope(|s| {
        let waiter = s.spawn(|| {
            let id = pes.try_acquire_for(HANG).unwrap();
            (id, Instant::now())
        });
        wait_subscribers(raw, &chan, 1);
        assert!(
            !waiter.is_finished(),
            "rust acquired from an empty semaphore"
        );
        let released = Instant::now();
        peer.ok("j", &format!("pes.release {name} {rust_id}"));
        let (id, at) = waiter.join().unwrap();
        let latency = at.duration_since(released);
        println!(
            "scenario 13 version {v}: permit semaphore: rust acquire returned {:.2} ms after \
             java's release of rust's permit was sent",
            ms(latency)
        );
        assert!(
            latency < WAKE_BOUND,
            "rust waiter woke after {latency:?}: not by the message"
        );
        id.expect("rust acquire timed out")
    });
    available(raw, 0, &[java_id2, rust_id2]);
    assert!(!peer.bool("j", &format!("pes.tryrelease {name} {rust_id}")));
    let again = pes.release(rust_id);
    assert!(
        matches!(&again, Err(e) if e.is_not_held()),
        "rust release of a permit java released: {again:?}"
    );
    available(raw, 0, &[java_id2, rust_id2]);

    // Each side releases the other's permit: the counts follow on both sides.
    peer.ok("j", &format!("pes.release {name} {rust_id2}"));
    available(raw, 1, &[java_id2]);
    pes.release(java_id2).unwrap();
    available(raw, 2, &[]);
    assert!(!exists(raw, &permit_timeouts_key(&name)));
}

// --------------------------------------------------------------------------- scenario 14

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
        assert!(
            latency < WAKE_BOUND,
            "rust waiter woke after {latency:?}: not by the message"
        );
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
    assert!(
        latency < WAKE_BOUND,
        "java waiter woke after {latency:?}: not by the message"
    );
    assert_eq!(peer.num("j", &format!("latch.count {name}")), 0);
    assert!(!exists(&mut raw, &name));
    assert!(peer.bool("j", &format!("latch.await {name} 0")));
    peer.quit();
}
