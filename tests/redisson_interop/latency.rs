//! Cross-language wake-up latency, measured and printed (scenario 9).

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serial_test::serial;

use crate::peer::Peer;
use crate::support::raw::lock_channel;
use crate::support::{TestServer, unique};
use crate::{HANG, WATCHDOG_MS, ms, run_versions, wait_subscribers};

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    assert!(!sorted.is_empty());
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

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
