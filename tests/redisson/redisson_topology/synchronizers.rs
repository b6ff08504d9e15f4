//! The read-write lock, the semaphore and the count-down latch: wake-ups both ways.

use std::time::{Duration, Instant};

use crate::support::raw::{latch_channel, rwlock_channel, semaphore_channel};
use crate::support::unique;

use super::{
    HANG, Topology, WAKE_BOUND, WATCHDOG_MS, await_waiters, java_ok, run_versions, woken_after,
};

/// A Java write hold wakes a Rust reader at its unlock, a Rust write hold wakes a Java
/// reader; a Java semaphore release wakes a Rust acquirer and the reverse; a Java
/// count-down opens a Rust latch wait and the reverse.
pub(crate) fn rwlock_semaphore_and_latch_wake_ups_both_ways<T: Topology>(t: &T) {
    run_versions(
        t,
        "rwlock, semaphore, latch wake-ups",
        WATCHDOG_MS,
        |peer| {
            let client = t.yaml_client(WATCHDOG_MS);
            let mut woke = Vec::new();

            let name = unique("ri-rw");
            let rw = client.get_read_write_lock(name.clone());
            let channel = rwlock_channel(&name);
            peer.ok("w", &format!("write.lock {name}"));
            woke.push((
                "java write -> rust read",
                woken_after(
                    t,
                    &channel,
                    || {
                        let g = rw
                            .read_lock()
                            .try_lock_for(Duration::from_secs(20))
                            .unwrap()
                            .expect("read");
                        let at = Instant::now();
                        g.unlock().unwrap();
                        at
                    },
                    || {
                        peer.ok("w", &format!("write.unlock {name}"));
                    },
                ),
            ));
            let g = rw.write_lock().lock().unwrap();
            let java = peer.send("r", &format!("read.trylock {name} 20000"));
            await_waiters(t, &channel, 1);
            // A write unlock's message wakes only readers already parked on Redisson's
            // latch (see Peer::wait_parked): one still between attempts would sleep its
            // whole 20 s, with a Java writer too.
            peer.wait_parked(&["r"], "org.redisson.RedissonLock.tryLock", HANG);
            let released = Instant::now();
            g.unlock().unwrap();
            let (reply, at) = java_ok(java);
            assert_eq!(reply, "true");
            woke.push(("rust write -> java read", at.duration_since(released)));
            peer.ok("r", &format!("read.unlock {name}"));

            let name = unique("ri-sem");
            let sem = client.get_semaphore(name.clone());
            let channel = semaphore_channel(&name);
            assert!(sem.try_set_permits(0).unwrap());
            woke.push((
                "java release -> rust acquire",
                woken_after(
                    t,
                    &channel,
                    || {
                        let p = sem
                            .try_acquire_for(Duration::from_secs(20))
                            .unwrap()
                            .expect("permit");
                        let at = Instant::now();
                        p.detach();
                        at
                    },
                    || {
                        peer.ok("s", &format!("sem.release {name} 1"));
                    },
                ),
            ));
            let java = peer.send("s", &format!("sem.tryacquire {name} 1 20000"));
            await_waiters(t, &channel, 1);
            let released = Instant::now();
            sem.release().unwrap();
            let (reply, at) = java_ok(java);
            assert_eq!(reply, "true");
            woke.push(("rust release -> java acquire", at.duration_since(released)));
            assert_eq!(sem.available_permits().unwrap(), 0);

            let name = unique("ri-latch");
            let latch = client.get_count_down_latch(name.clone());
            let channel = latch_channel(&name);
            assert!(latch.try_set_count(1).unwrap());
            woke.push((
                "java count-down -> rust wait",
                woken_after(
                    t,
                    &channel,
                    || {
                        assert!(latch.wait_for(Duration::from_secs(20)).unwrap());
                        Instant::now()
                    },
                    || {
                        peer.ok("l", &format!("latch.countdown {name}"));
                    },
                ),
            ));
            assert!(latch.try_set_count(1).unwrap());
            let java = peer.send("l", &format!("latch.await {name} 20000"));
            await_waiters(t, &channel, 1);
            let released = Instant::now();
            latch.count_down().unwrap();
            let (reply, at) = java_ok(java);
            assert_eq!(reply, "true");
            woke.push(("rust count-down -> java wait", at.duration_since(released)));

            for (what, after) in &woke {
                assert!(*after < WAKE_BOUND, "{what}: woke after {after:?}");
            }
            println!("  Redisson {}: {woke:?}", peer.version());
        },
    );
}
