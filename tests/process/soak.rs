//! A bounded soak: two worker processes (clients × threads each) run random lock,
//! try_lock, lease, unlock and force_unlock operations on a few names, through the fault
//! proxy, while this test flips the proxy between pass, delay, reset, blackhole and
//! freeze. Every thread records a history of its operations and critical sections (the
//! verification harness's format, `docs/verify.md`), each section with entry and exit
//! snapshots of the lock read on a direct connection, and `redmutex verify-check`
//! judges it: no exclusion violation (each holder judged by its own hold) and no loss
//! the guard failed to report. And no thread starves: every thread completes sections in
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
use serde_json::Value;
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
    let run = std::env::temp_dir().join(prefix.replace(':', "-"));
    let history = run.join("history");
    std::fs::create_dir_all(&history).unwrap();
    let children: Vec<_> = (0..2)
        .map(|w| {
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
                    "--label",
                    &format!("w{w}"),
                ])
                .arg("--history")
                .arg(&history)
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
        let mut totals = [0u64; 4];
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
            for (i, name) in ["sections", "losses", "errors", "forced"]
                .iter()
                .enumerate()
            {
                totals[i] += report_field(line, name);
            }
        }
        stop.store(true, Ordering::Relaxed);
        // The history judged by the harness's checkers, as a verification run's is.
        let check = Command::new(redmutex_bin())
            .arg("verify-check")
            .arg(&run)
            .output()
            .unwrap();
        let text = std::fs::read_to_string(run.join("report.json")).unwrap_or_else(|e| {
            panic!(
                "no report.json ({e}): {}",
                String::from_utf8_lossy(&check.stderr)
            )
        });
        let report: Value = serde_json::from_str(&text).unwrap();
        let cell = "single-soak-lock-mixed";
        let figure = |checker: &str, field: &str| {
            report["checkers"][checker][cell][field]
                .as_u64()
                .unwrap_or_else(|| panic!("no {checker}.{field} in {report:#}"))
        };
        println!(
            "soak {seconds} s: {} critical sections, {} faults injected, {} history operations, \
             {} overlaps ({} overstays, {} violations), {} sections whose hold Redis had lost, \
             {} reported losses, {} errors, {} force unlocks",
            totals[0],
            faults.load(Ordering::Relaxed),
            figure("exclusion", "operations"),
            figure("exclusion", "overlaps"),
            figure("exclusion", "overstays"),
            figure("exclusion", "violations"),
            figure("loss_honesty", "overstays"),
            totals[1],
            totals[2],
            totals[3]
        );
        assert_eq!(
            figure("exclusion", "violations"),
            0,
            "critical sections overlapped while both holders held: {:#}",
            report["checkers"]["exclusion"]
        );
        assert_eq!(
            figure("loss_honesty", "violations"),
            0,
            "a guard trusted a hold Redis no longer had: {:#}",
            report["checkers"]["loss_honesty"]
        );
        assert!(check.status.success(), "verify-check failed: {report:#}");
        assert!(totals[0] > 0);
        assert_eq!(report["cells"][cell]["sections"].as_u64(), Some(totals[0]));
        println!("history: {} bytes", dir_bytes(&history));
        let _ = std::fs::remove_dir_all(&run);
    });
}

/// The bytes of every file in `dir`.
fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}
