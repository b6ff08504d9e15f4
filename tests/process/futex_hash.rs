//! Sizing the process's futex hash (`redmutex::futex_hash`) on this machine's kernel:
//! the sizes it reports, the inputs it refuses, and waiters that sleep through a resize.
//! Each test binary is its own process, so the sizes set here touch no other target;
//! inside this one the tests run one at a time, since each reads or sets the size.
#![cfg(feature = "futex-hash")]

use std::io::ErrorKind;
use std::time::Duration;

use crate::support::{TestServer, unique};
use redmutex::futex_hash::{self, MAX_GROWN_SLOTS};
use serial_test::serial;

#[test]
#[serial]
fn sizes_that_are_not_powers_of_two_are_refused_and_change_nothing() {
    let before = futex_hash::slots().unwrap();
    for bad in [1, 3, 100, 10_000, usize::MAX] {
        let err = futex_hash::set_slots(bad).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad}: {err}");
        assert!(err.to_string().contains(&bad.to_string()), "{err}");
    }
    assert_eq!(futex_hash::slots().unwrap(), before);
}

#[test]
#[serial]
fn growing_gives_one_slot_per_thread_within_the_bounds() {
    let Some(_) = futex_hash::slots().unwrap() else {
        // No per-process hash on this kernel (before 6.16): nothing can be sized.
        assert_eq!(futex_hash::grow_for(10_000).unwrap(), None);
        assert!(!futex_hash::set_slots(64).unwrap());
        return;
    };
    assert!(futex_hash::set_slots(16).unwrap());
    assert_eq!(futex_hash::slots().unwrap(), Some(16));
    assert_eq!(futex_hash::grow_for(10_000).unwrap(), Some(16_384));
    assert_eq!(futex_hash::slots().unwrap(), Some(16_384));
    // Never shrinks, and never asks for more than the cap.
    assert_eq!(futex_hash::grow_for(10).unwrap(), Some(16_384));
    assert_eq!(
        futex_hash::grow_for(usize::MAX).unwrap(),
        Some(MAX_GROWN_SLOTS)
    );
    // Shrinking is allowed when asked for explicitly.
    assert!(futex_hash::set_slots(64).unwrap());
    assert_eq!(futex_hash::grow_for(0).unwrap(), Some(64));
}

/// Threads asleep in `lock()` (on futexes) while the hash is replaced are moved to the
/// new one by the kernel: each is still woken by its unlock message.
#[test]
#[serial]
fn waiters_asleep_during_a_resize_are_still_woken() {
    let server = TestServer::start();
    let holder = server.client();
    let waiter = server.client();
    let names: Vec<String> = (0..8).map(|_| unique("futex")).collect();
    let held: Vec<_> = names
        .iter()
        .map(|n| holder.get_lock(n.clone()).lock().unwrap())
        .collect();
    let (got, took) = crossbeam_channel::unbounded();
    let threads: Vec<_> = names
        .iter()
        .map(|n| {
            let lock = waiter.get_lock(n.clone());
            let got = got.clone();
            std::thread::spawn(move || {
                let guard = lock.lock().unwrap();
                got.send(lock.name().to_owned()).unwrap();
                guard.unlock().unwrap();
            })
        })
        .collect();
    // Every waiter subscribed (the server counts each channel's subscriber), so each is
    // asleep or about to be, after its retry.
    let mut raw = server.conn();
    for name in &names {
        let channel = format!("redisson_lock__channel:{{{name}}}");
        loop {
            let counts: Vec<redis::Value> = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(&channel)
                .query(&mut raw)
                .unwrap();
            if matches!(counts.get(1), Some(redis::Value::Int(n)) if *n > 0) {
                break;
            }
            std::thread::yield_now();
        }
    }
    // Twice the current size (the global hash, 0, stays out: the kernel makes that
    // choice final for the process).
    if let Some(now) = futex_hash::slots().unwrap() {
        let bigger = (now * 2).max(32);
        assert!(futex_hash::set_slots(bigger).unwrap());
        assert_eq!(futex_hash::slots().unwrap(), Some(bigger));
    }
    for guard in held {
        let name = guard.lock().name().to_owned();
        guard.unlock().unwrap();
        assert_eq!(took.recv_timeout(Duration::from_secs(10)).unwrap(), name);
    }
    for t in threads {
        t.join().unwrap();
    }
}

/// Warnings logged in this process, for the test below.
static WARNINGS: parking_lot::Mutex<Vec<String>> = parking_lot::Mutex::new(Vec::new());

struct Recorder;

impl log::Log for Recorder {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Warn
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            WARNINGS.lock().push(r.args().to_string());
        }
    }
    fn flush(&self) {}
}

/// 1,024 threads waiting at once with a 16-slot hash: one warning names the call that
/// makes room; the waiters then all get the lock in turn.
#[test]
#[serial]
fn a_thousand_waiters_on_a_small_hash_draw_one_warning_naming_the_fix() {
    if futex_hash::slots().unwrap().is_none() {
        return; // No per-process hash on this kernel: nothing to warn of.
    }
    log::set_logger(&Recorder).unwrap();
    log::set_max_level(log::LevelFilter::Warn);
    assert!(futex_hash::set_slots(16).unwrap());
    let server = TestServer::start();
    let holder = server.client();
    let waiter = server.client();
    let name = unique("futex-warn");
    let held = holder.get_lock(name.clone()).lock().unwrap();
    let (done, finished) = crossbeam_channel::unbounded();
    let threads: Vec<_> = (0..1_100)
        .map(|_| {
            let lock = waiter.get_lock(name.clone());
            let done = done.clone();
            std::thread::Builder::new()
                .stack_size(128 * 1024)
                .spawn(move || {
                    lock.lock().unwrap().unlock().unwrap();
                    done.send(()).unwrap();
                })
                .unwrap()
        })
        .collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let warning = loop {
        let found = WARNINGS
            .lock()
            .iter()
            .find(|w| w.contains("futex hash"))
            .cloned();
        if let Some(w) = found {
            break w;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no warning with 1,100 threads waiting: {:?}",
            WARNINGS.lock()
        );
        std::thread::yield_now();
    };
    assert!(warning.contains("16 slots"), "{warning}");
    assert!(
        warning.contains("redmutex::futex_hash::grow_for(1024)"),
        "{warning}"
    );
    held.unlock().unwrap();
    for _ in 0..threads.len() {
        finished.recv_timeout(Duration::from_secs(60)).unwrap();
    }
    for t in threads {
        t.join().unwrap();
    }
    let warned = WARNINGS
        .lock()
        .iter()
        .filter(|w| w.contains("futex hash"))
        .count();
    assert_eq!(warned, 1, "{:?}", WARNINGS.lock());
}
