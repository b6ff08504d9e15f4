//! A bounded soak: two worker processes (clients × threads each) run random lock,
//! try_lock, lease, unlock and force_unlock operations on a few names, through the fault
//! proxy, while this test flips the proxy between pass, delay, reset, blackhole and
//! freeze. Every critical section is recorded by an occupancy counter on a direct
//! connection. Zero overlaps, and no thread starves: every thread completes sections in
//! every 10 s window. The output shows each process's and each thread's share of the
//! sections.
//!
//! `REDMUTEX_SOAK_SECS` sets the length (default 60 s, what CI runs: the proxy flips every
//! 0.2-0.5 s, so a minute meets each fault dozens of times; soak longer by hand).

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::support::proxy::FaultProxy;
use crate::support::{TestServer, redmutex_bin, report_field, unique};
use serial_test::serial;

#[test]
#[serial]
fn soak_under_flipping_faults_keeps_exclusion_and_progress() {
    let seconds: u64 = std::env::var("REDMUTEX_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let server = TestServer::start();
    let proxy = FaultProxy::start(server.port());
    let prefix = unique("soak");
    let children: Vec<_> = (0..2)
        .map(|_| {
            Command::new(redmutex_bin())
                .args([
                    "soak-worker",
                    "--url",
                    &proxy.url(),
                    "--direct",
                    &server.url(),
                    "--prefix",
                    &prefix,
                ])
                .args([
                    "--clients",
                    "2",
                    "--threads",
                    "3",
                    "--seconds",
                    &seconds.to_string(),
                ])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // The faults start once every worker has connected: a proxy faulted while a
    // worker fills its pools fails that worker's start-up ("cannot fill the connection
    // pool"), which tests nothing of the soak. Each worker says `ready` when its
    // clients are built.
    let children: Vec<(Child, BufReader<ChildStdout>)> = children
        .into_iter()
        .map(|mut child| {
            let mut out = BufReader::new(child.stdout.take().expect("piped stdout"));
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            if line.trim() != "ready" {
                let status = child.wait().unwrap();
                panic!("a soak worker did not start ({status}): {line:?}");
            }
            (child, out)
        })
        .collect();
    let stop = AtomicBool::new(false);
    let faults = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut x: u64 = 0x2545_F491_4F6C_DD1D;
            while !stop.load(Ordering::Relaxed) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                match x % 20 {
                    0..=9 => proxy.pass(),
                    10..=14 => proxy.delay(
                        Duration::from_millis(x % 20),
                        Duration::from_millis((x >> 8) % 30),
                    ),
                    15..=16 => proxy.reset(),
                    17..=18 => {
                        proxy.blackhole();
                        std::thread::sleep(Duration::from_millis(150));
                        proxy.pass();
                    }
                    _ => {
                        proxy.freeze();
                        std::thread::sleep(Duration::from_millis(150));
                        proxy.resume();
                    }
                }
                if x % 20 >= 10 {
                    faults.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(200 + (x >> 16) % 300));
            }
            proxy.pass();
        });
        let mut totals = [0u64; 5];
        let mut lines = Vec::new();
        for (mut child, mut out) in children {
            let mut line = String::new();
            out.read_to_string(&mut line).unwrap();
            let line = line.trim().to_owned();
            let status = child.wait().unwrap();
            assert!(status.success(), "a soak worker failed: {line}");
            lines.push(line);
        }
        let all: u64 = lines.iter().map(|l| report_field(l, "sections")).sum();
        for line in &lines {
            let share = report_field(line, "sections") as f64 / all.max(1) as f64;
            println!("worker ({:.1} % of all sections): {line}", share * 100.0);
        }
        for line in &lines {
            assert_eq!(
                report_field(line, "idle_workers"),
                0,
                "a worker made no progress: {line}"
            );
            // No thread starves: each completes sections in every 10 s window, faults
            // and the other process's threads notwithstanding.
            assert_eq!(
                report_field(line, "starved_windows"),
                0,
                "a thread went a whole 10 s window without a section: {line}"
            );
            for (i, name) in ["sections", "overlaps", "losses", "errors", "forced"]
                .iter()
                .enumerate()
            {
                totals[i] += report_field(line, name);
            }
        }
        stop.store(true, Ordering::Relaxed);
        println!(
            "soak {seconds} s: {} critical sections, {} faults injected, {} overlaps, {} reported losses, {} errors, {} force unlocks",
            totals[0],
            faults.load(Ordering::Relaxed),
            totals[1],
            totals[2],
            totals[3],
            totals[4]
        );
        assert_eq!(
            totals[1], 0,
            "critical sections overlapped while their holders trusted their leases"
        );
        assert!(totals[0] > 0);
    });
}
