//! `RFairLock`: one queue for waiters of both languages.

use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use crate::support::raw::fair_queue_key;
use crate::support::{eventually, unique};

use super::{HANG, Topology, WAKE_BOUND, WATCHDOG_MS, java_ok, run_versions};

/// A Rust holder of a fair lock, then four waiters queued alternately Java, Rust, Java,
/// Rust (each enqueued only after the one before it is in the queue): they acquire in
/// that order, each soon after the previous one's unlock.
pub(crate) fn fair_lock_waiters_of_both_languages_acquire_in_arrival_order<T: Topology>(t: &T) {
    run_versions(t, "fair-lock order", WATCHDOG_MS, |peer| {
        let client = t.yaml_client(WATCHDOG_MS);
        let name = unique("ri-fair");
        let queue = fair_queue_key(&name);
        let mut raw = t.raw(&name);
        let queued = |raw: &mut redis::Connection| -> i64 {
            redis::cmd("LLEN").arg(&queue).query(raw).unwrap()
        };
        let fair = client.get_fair_lock(name.clone());
        let guard = fair.lock().unwrap();
        // (who, when it got the lock, when the one before it released)
        let order = Mutex::new(Vec::new());
        let released = Mutex::new(Vec::new());
        thread::scope(|s| {
            let mut java = Vec::new();
            for (i, who) in ["java-1", "rust-1", "java-2", "rust-2"]
                .into_iter()
                .enumerate()
            {
                if who.starts_with("java") {
                    java.push((who, peer.send(who, &format!("fair.trylock {name} 30000"))));
                } else {
                    let (fair, order, released) = (&fair, &order, &released);
                    s.spawn(move || {
                        let g = fair
                            .try_lock_for(Duration::from_secs(30))
                            .unwrap()
                            .expect("the Rust fair waiter got the lock");
                        order.lock().unwrap().push((who, Instant::now()));
                        released.lock().unwrap().push(Instant::now());
                        g.unlock().unwrap();
                    });
                }
                eventually(HANG, &format!("{who} queued"), || {
                    queued(&mut raw) == i as i64 + 1
                });
            }
            released.lock().unwrap().push(Instant::now());
            guard.unlock().unwrap();
            // Each Java waiter is released by the test once it got the lock, which is
            // what lets the Rust waiter behind it in.
            for (who, p) in java {
                let (reply, at) = java_ok(p);
                assert_eq!(reply, "true", "{who}");
                order.lock().unwrap().push((who, at));
                released.lock().unwrap().push(Instant::now());
                peer.ok(who, &format!("fair.unlock {name}"));
            }
        });
        let mut order = order.into_inner().unwrap();
        order.sort_by_key(|(_, at)| *at);
        let names: Vec<&str> = order.iter().map(|(who, _)| *who).collect();
        assert_eq!(names, ["java-1", "rust-1", "java-2", "rust-2"]);
        let mut released = released.into_inner().unwrap();
        released.sort();
        // The i-th acquire follows the i-th release (the holder's, then each waiter's).
        let hand_offs: Vec<Duration> = order
            .iter()
            .zip(&released)
            .map(|((_, got), freed)| got.duration_since(*freed))
            .collect();
        for (i, d) in hand_offs.iter().enumerate() {
            assert!(
                *d < WAKE_BOUND,
                "{}: got the lock {d:?} after the release before it",
                names[i]
            );
        }
        assert!(!fair.is_locked().unwrap());
        println!("  Redisson {}: hand-offs {hand_offs:?}", peer.version());
    });
}
