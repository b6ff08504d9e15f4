//! The ShedLock-compatible task lock (`TaskLock`) on one server and on the local
//! cluster: ShedLock's key and value, skip-while-held, `lock_at_least_for` after an early
//! finish, the compare-first release, nesting, panics and extension. With the `interop`
//! feature, the same against real ShedLock Java jobs run through its
//! `DefaultLockingTaskExecutor` on its Redis providers (`tests/interop/shedlock`):
//! `shedlock-provider-redis-spring` on Lettuce and `shedlock-provider-redis-jedis4`
//! (`REDMUTEX_SHEDLOCK_PEERS`, default `spring-7.10.1,jedis-5.12.0`).
//!
//! No assertion depends on timing: "held" and "free" are read from Redis, and a job that
//! must overlap another's run waits for it by an event.

#[cfg(feature = "interop")]
use redmutex_harness::peer;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::support::deploy::Deployment;
use crate::support::raw::pttl;
use crate::support::{eventually, unique};
use redmutex::{Error, TaskLock};

/// Hang guard.
const HANG: Duration = Duration::from_secs(30);
/// A `lock_at_most_for` no test outlives: the key's TTL while a job runs.
const LONG: Duration = Duration::from_secs(120);

fn get(raw: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(raw).unwrap()
}

/// Runs `f` on another thread: a run of the same task on the thread that runs it counts
/// as nested (ShedLock's rule) and runs at once, so another run's view needs a thread of
/// its own.
fn elsewhere<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| s.spawn(f).join().unwrap())
}

/// Runs each case on a server of its own and on the shared cluster.
macro_rules! on_every_deployment {
    ($($name:ident),* $(,)?) => {
        mod server {
            $(
                #[test]
                fn $name() {
                    super::$name(&crate::support::TestServer::start())
                }
            )*
        }
        mod cluster {
            $(
                #[test]
                fn $name() {
                    super::$name(crate::support::cluster::shared())
                }
            )*
        }
    };
}

on_every_deployment!(
    the_key_and_value_are_shedlocks_and_a_held_task_is_skipped,
    lock_at_least_for_keeps_the_task_after_an_early_finish,
    environment_and_prefix_make_the_key,
    a_release_never_touches_another_runs_lock,
    nested_runs_panics_and_extension,
    runs_of_two_clients_never_overlap,
);

/// While a job runs, the key is `job-lock:default:<name>`, a string `ADDED:<time>@<host>:<uuid>`
/// whose TTL is `lock_at_most_for`; a run of another client meanwhile is skipped without
/// running its job; the run's end deletes the key (no `lock_at_least_for`), and the next
/// run runs.
fn the_key_and_value_are_shedlocks_and_a_held_task_is_skipped<D: Deployment>(d: &D) {
    let (a, b) = (d.client(), d.client());
    let name = unique("job");
    let key = format!("job-lock:default:{name}");
    let mut raw = d.raw(&key);
    let task = a.get_task_lock(name.as_str()).lock_at_most_for(LONG);
    assert_eq!(task.key(), key);
    let other = b.get_task_lock(name.as_str()).lock_at_most_for(LONG);

    let ran = task
        .run_if_free(|| {
            TaskLock::assert_locked().unwrap();
            let value = get(&mut raw, &key).expect("the key exists while the job runs");
            let rest = value.strip_prefix("ADDED:").expect(&value);
            let (time, host_id) = rest.split_once('@').expect(&value);
            assert!(time.ends_with('Z') && time.contains('T'), "{value}");
            assert_eq!(host_id.rsplit_once(':').unwrap().1.len(), 36, "{value}");
            let ttl = pttl(&mut raw, &key);
            assert!(
                ttl > 60_000 && ttl <= 120_000,
                "the TTL is lock_at_most_for: {ttl}"
            );
            let skipped = elsewhere(|| {
                other
                    .run_if_free(|| panic!("ran while another client held it"))
                    .unwrap()
            });
            assert_eq!(skipped, None);
            7
        })
        .unwrap();
    assert_eq!(ran, Some(7));
    assert_eq!(get(&mut raw, &key), None, "deleted at the end");
    assert_eq!(other.run_if_free(|| 8).unwrap(), Some(8));
    assert!(matches!(
        TaskLock::assert_locked(),
        Err(Error::NotHeld { .. })
    ));
}

/// A job that ends before `lock_at_least_for` leaves the key with what is left of it as
/// TTL: other runs are skipped until it expires, then they run.
fn lock_at_least_for_keeps_the_task_after_an_early_finish<D: Deployment>(d: &D) {
    let (a, b) = (d.client(), d.client());
    let name = unique("job-least");
    let at_least = Duration::from_secs(2);
    let task = a
        .get_task_lock(name.as_str())
        .lock_at_most_for(LONG)
        .lock_at_least_for(at_least);
    let key = task.key();
    let mut raw = d.raw(&key);
    assert_eq!(task.run_if_free(|| ()).unwrap(), Some(()));
    let ttl = pttl(&mut raw, &key);
    assert!(
        ttl > 0 && ttl <= 2_000,
        "the TTL is what is left of lock_at_least_for: {ttl}"
    );
    let other = b.get_task_lock(name.as_str()).lock_at_most_for(LONG);
    assert_eq!(
        other.run_if_free(|| ()).unwrap(),
        None,
        "skipped inside lock_at_least_for"
    );
    eventually(HANG, "the key expires", || get(&mut raw, &key).is_none());
    assert_eq!(other.run_if_free(|| ()).unwrap(), Some(()));
}

/// ShedLock's `environment` and `keyPrefix` are the key's parts; tasks of different
/// environments do not exclude each other.
fn environment_and_prefix_make_the_key<D: Deployment>(d: &D) {
    let client = d.client();
    let name = unique("job-env");
    let prod = client.get_task_lock(name.as_str()).environment("prod");
    assert_eq!(prod.key(), format!("job-lock:prod:{name}"));
    let custom = client
        .get_task_lock(name.as_str())
        .environment("prod")
        .key_prefix("shedlock");
    assert_eq!(custom.key(), format!("shedlock:prod:{name}"));
    let mut raw = d.raw(&prod.key());
    let ran = prod.run_if_free(|| {
        assert!(get(&mut raw, &prod.key()).is_some());
        // Another key altogether: it runs even while `prod` is held.
        let staging = d
            .client()
            .get_task_lock(name.as_str())
            .environment("staging");
        let prod_elsewhere = d.client().get_task_lock(name.as_str()).environment("prod");
        elsewhere(|| {
            assert_eq!(prod_elsewhere.run_if_free(|| ()).unwrap(), None);
            staging.run_if_free(|| ()).unwrap()
        })
    });
    assert_eq!(ran.unwrap(), Some(Some(())));
}

/// A job that outlives `lock_at_most_for` finds at its end that another run holds the
/// key: its release is `LockLost` and leaves the other's lock as it was (ShedLock's
/// default release would delete it).
fn a_release_never_touches_another_runs_lock<D: Deployment>(d: &D) {
    let (a, b) = (d.client(), d.client());
    let name = unique("job-overrun");
    let short = a
        .get_task_lock(name.as_str())
        .lock_at_most_for(Duration::from_millis(200));
    let key = short.key();
    let mut raw = d.raw(&key);
    let other = b.get_task_lock(name.as_str()).lock_at_most_for(LONG);
    let mut others_value: Option<String> = None;
    let overran = short.run_if_free(|| {
        eventually(HANG, "the short lock expires", || {
            get(&mut raw, &key).is_none()
        });
        assert!(
            matches!(TaskLock::assert_locked(), Err(Error::LockLost { .. })),
            "assert_locked knows the lease ran out"
        );
        // Another client's run takes the task and is still inside when ours ends.
        let inside = elsewhere(|| {
            let mut raw = d.raw(&key);
            other.run_if_free(|| get(&mut raw, &key)).unwrap()
        });
        others_value = inside.flatten();
        // Its end deleted the key; hold it the way a run in progress would.
        let value = others_value.clone().unwrap();
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg(&value)
            .arg("PX")
            .arg(60_000)
            .query(&mut raw)
            .unwrap();
    });
    assert!(
        matches!(overran, Err(Error::LockLost { .. })),
        "{overran:?}"
    );
    assert_eq!(
        get(&mut raw, &key),
        others_value,
        "the other run's lock is untouched"
    );
}

/// A nested run of the same task on the same thread runs at once (ShedLock's
/// `alreadyLockedBy`); a panicking job releases its lock; `extend_active_lock` sets the
/// TTL to the new `lock_at_most_for`; a key of another type is `WrongType`; ShedLock's
/// duration rules are `Config` errors.
fn nested_runs_panics_and_extension<D: Deployment>(d: &D) {
    let client = d.client();
    let name = unique("job-nest");
    let task = client
        .get_task_lock(name.as_str())
        .lock_at_most_for(Duration::from_secs(30));
    let key = task.key();
    let mut raw = d.raw(&key);
    let nested = task.run_if_free(|| task.run_if_free(|| "inner").unwrap());
    assert_eq!(nested.unwrap(), Some(Some("inner")));

    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        task.run_if_free(|| panic!("the job fails")).unwrap();
    }));
    assert!(panicked.is_err());
    assert_eq!(get(&mut raw, &key), None, "released when the job panicked");
    assert!(matches!(
        TaskLock::assert_locked(),
        Err(Error::NotHeld { .. })
    ));

    task.run_if_free(|| {
        TaskLock::extend_active_lock(LONG, Duration::ZERO).unwrap();
        let ttl = pttl(&mut raw, &key);
        assert!(ttl > 60_000, "extended to lock_at_most_for from now: {ttl}");
    })
    .unwrap();

    let _: () = redis::cmd("RPUSH")
        .arg(&key)
        .arg("x")
        .query(&mut raw)
        .unwrap();
    assert!(matches!(
        task.run_if_free(|| ()),
        Err(Error::WrongType { .. })
    ));
    let bad = client
        .get_task_lock(name.as_str())
        .lock_at_most_for(Duration::from_secs(1))
        .lock_at_least_for(Duration::from_secs(2));
    assert!(matches!(bad.run_if_free(|| ()), Err(Error::Config(_))));
}

/// Threads of two clients run the task in a loop: no two jobs are ever inside at once
/// (checked with an in-process flag), every run either ran or skipped, and some ran.
fn runs_of_two_clients_never_overlap<D: Deployment>(d: &D) {
    let name = unique("job-race");
    let inside = Arc::new(AtomicBool::new(false));
    let (ran, overlaps) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    std::thread::scope(|s| {
        for _ in 0..2 {
            let client = d.client();
            for _ in 0..2 {
                let task = client.get_task_lock(name.as_str()).lock_at_most_for(LONG);
                let (inside, ran, overlaps) = (&inside, &ran, &overlaps);
                s.spawn(move || {
                    for _ in 0..50 {
                        let done = task.run_if_free(|| {
                            if inside.swap(true, Ordering::SeqCst) {
                                overlaps.fetch_add(1, Ordering::SeqCst);
                            }
                            std::thread::sleep(Duration::from_millis(1));
                            inside.store(false, Ordering::SeqCst);
                        });
                        if done.unwrap().is_some() {
                            ran.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                });
            }
        }
    });
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    assert!(ran.load(Ordering::SeqCst) > 0);
}

/// `redmutex unlock --force` knows a ShedLock key for a lock (its value's shape) and
/// deletes it; the job that held it learns at its end that it did not run alone.
#[cfg(feature = "cli")]
#[test]
fn the_tool_force_unlocks_a_task_lock() {
    let server = crate::support::TestServer::start();
    let client = server.client();
    let task = client
        .get_task_lock(unique("job-cli"))
        .lock_at_most_for(LONG);
    let key = task.key();
    let mut raw = server.conn();
    let outcome = task.run_if_free(|| {
        let out = std::process::Command::new(crate::support::redmutex_bin())
            .args(["unlock", "--url", &server.url(), &key, "--force", "--yes"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(get(&mut raw, &key), None);
    });
    assert!(
        matches!(outcome, Err(Error::LockLost { .. })),
        "{outcome:?}"
    );
}

/// Real ShedLock jobs in a Java process (`tests/interop/shedlock`) against Rust runs of
/// the same task.
#[cfg(feature = "interop")]
mod shedlock {
    use std::time::Duration;

    use super::peer::{self, Peer};
    use super::{HANG, LONG, get};
    use crate::support::cluster::Cluster;
    use crate::support::deploy::Deployment;
    use crate::support::raw::pttl;
    use crate::support::{TestServer, eventually, unique};

    const HINT: &str = "the ShedLock tests need a JDK (17+) and Maven on PATH, and Maven \
         Central (or a filled ~/.m2) for the first build";

    /// The peers to run against: `<provider>-<ShedLock version>`.
    fn peers() -> Vec<String> {
        std::env::var("REDMUTEX_SHEDLOCK_PEERS")
            .ok()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| "spring-7.10.1,jedis-5.12.0".to_owned())
            .split(',')
            .map(|s| s.trim().to_owned())
            .collect()
    }

    /// How the peer reaches a deployment: `single host:port` or `cluster host:port,...`.
    trait Target: Deployment {
        fn peer_args(&self) -> [String; 2];
    }

    impl Target for TestServer {
        fn peer_args(&self) -> [String; 2] {
            ["single".into(), format!("127.0.0.1:{}", self.port())]
        }
    }

    impl Target for Cluster {
        fn peer_args(&self) -> [String; 2] {
            let nodes: Vec<String> = self
                .ports()
                .iter()
                .map(|p| format!("127.0.0.1:{p}"))
                .collect();
            ["cluster".into(), nodes.join(",")]
        }
    }

    /// Builds (once per process and peer) and starts the ShedLock peer `spec`.
    fn start(spec: &str, target: &impl Target) -> Peer {
        use std::collections::HashMap;
        use std::sync::{Mutex, OnceLock};
        static BUILT: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
        let cp = {
            let mut built = BUILT
                .get_or_init(Default::default)
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            built
                .entry(spec.to_owned())
                .or_insert_with(|| {
                    let out = peer::target_dir()
                        .join("interop")
                        .join(format!("shedlock-{spec}"));
                    peer::run_build(
                        &format!("the ShedLock {spec} peer"),
                        "tests/interop/build.sh",
                        &["--shedlock".as_ref(), spec.as_ref(), out.as_os_str()],
                        HINT,
                    );
                    std::fs::read_to_string(out.join("classpath.txt"))
                        .unwrap()
                        .trim()
                        .to_owned()
                })
                .clone()
        };
        let mut java = std::process::Command::new("java");
        java.arg("-cp")
            .arg(cp)
            .arg("dev.redmutex.shedlock.ShedPeer")
            .args(target.peer_args());
        Peer::launch(&format!("shedlock-{spec}"), java, HINT)
    }

    fn every_peer(target: &impl Target, case: impl Fn(&Peer, &str)) {
        for spec in peers() {
            let peer = start(&spec, target);
            case(&peer, &spec);
            peer.quit();
        }
    }

    /// A Java job inside keeps a Rust run out (its job never runs), and a Rust job inside
    /// keeps the Java executor out; each runs once the other is done.
    fn each_side_skips_while_the_other_holds(target: &impl Target) {
        let client = target.client();
        every_peer(target, |peer, spec| {
            let name = unique("shed-hold");
            let task = client.get_task_lock(name.as_str()).lock_at_most_for(LONG);
            let java = peer.send("job", &format!("begin {name} 120000 0"));
            assert_eq!(
                peer.ok("probe", &format!("entered {name} 30000")),
                "true",
                "{spec}"
            );
            let mut raw = target.raw(&task.key());
            let value = get(&mut raw, &task.key()).expect("the Java run holds the key");
            assert!(
                value.starts_with("ADDED:"),
                "{spec}: ShedLock's value: {value}"
            );
            assert_eq!(
                task.run_if_free(|| panic!("{spec}: ran while the Java job ran"))
                    .unwrap(),
                None
            );
            peer.ok("probe", &format!("end {name}"));
            assert_eq!(java.wait(HANG).unwrap(), "ran");
            assert_eq!(
                get(&mut raw, &task.key()),
                None,
                "{spec}: the Java run deleted it"
            );

            let inner = task
                .run_if_free(|| peer.ok("job", &format!("run {name} 120000 0 0 {name}:inside")));
            assert_eq!(inner.unwrap().as_deref(), Some("skipped"), "{spec}");
            assert_eq!(
                peer.ok("job", &format!("run {name} 120000 0 0 {name}:inside")),
                "ran"
            );
        });
    }

    /// lockAtLeastFor after an early finish keeps the other side out, both ways.
    fn lock_at_least_for_keeps_the_other_side_out(target: &impl Target) {
        let client = target.client();
        every_peer(target, |peer, spec| {
            let name = unique("shed-least");
            let task = client
                .get_task_lock(name.as_str())
                .lock_at_most_for(LONG)
                .lock_at_least_for(Duration::from_secs(2));
            let mut raw = target.raw(&task.key());
            assert_eq!(task.run_if_free(|| ()).unwrap(), Some(()));
            let ttl = pttl(&mut raw, &task.key());
            assert!(ttl > 0 && ttl <= 2_000, "{spec}: {ttl}");
            assert_eq!(
                peer.ok("job", &format!("run {name} 120000 0 0 {name}:in")),
                "skipped"
            );
            eventually(HANG, "the Rust run's key expires", || {
                get(&mut raw, &task.key()).is_none()
            });

            assert_eq!(
                peer.ok("job", &format!("run {name} 120000 2000 0 {name}:in")),
                "ran"
            );
            let ttl = pttl(&mut raw, &task.key());
            assert!(
                ttl > 0 && ttl <= 2_000,
                "{spec}: Java kept lockAtLeastFor: {ttl}"
            );
            assert_eq!(task.run_if_free(|| ()).unwrap(), None, "{spec}");
            eventually(HANG, "the Java run's key expires", || {
                get(&mut raw, &task.key()).is_none()
            });
            assert_eq!(task.run_if_free(|| ()).unwrap(), Some(()), "{spec}");
        });
    }

    /// A Rust thread and a Java thread run the task in loops: no two jobs are ever inside
    /// at once (each side's job marks itself with `SET <inside> NX` and sees the other's
    /// mark), and both sides ran.
    fn rust_and_java_runs_never_overlap(target: &impl Target) {
        let client = target.client();
        every_peer(target, |peer, spec| {
            let name = unique("shed-race");
            let inside = format!("{{{name}}}:inside");
            let task = client.get_task_lock(name.as_str()).lock_at_most_for(LONG);
            let rounds = 40;
            let java = (0..rounds)
                .map(|_| peer.send("job", &format!("run {name} 120000 0 5 {inside}")))
                .collect::<Vec<_>>();
            let mut raw = target.raw(&inside);
            let (mut rust_ran, mut overlaps) = (0, 0);
            for _ in 0..rounds {
                let ran = task.run_if_free(|| {
                    let alone: Option<String> = redis::cmd("SET")
                        .arg(&inside)
                        .arg("rust")
                        .arg("NX")
                        .arg("PX")
                        .arg(60_000)
                        .query(&mut raw)
                        .unwrap();
                    if alone.is_none() {
                        overlaps += 1;
                    } else {
                        std::thread::sleep(Duration::from_millis(5));
                        let _: i64 = redis::cmd("DEL").arg(&inside).query(&mut raw).unwrap();
                    }
                });
                rust_ran += usize::from(ran.unwrap().is_some());
                // Paces the loop so that the Java side's attempts find the task free
                // half of the time; nothing waits on it.
                std::thread::sleep(Duration::from_millis(5));
            }
            let replies: Vec<String> = java.into_iter().map(|p| p.wait(HANG).unwrap()).collect();
            let java_ran = replies.iter().filter(|r| *r == "ran").count();
            assert!(
                !replies.iter().any(|r| r == "overlap"),
                "{spec}: {replies:?}"
            );
            assert_eq!(overlaps, 0, "{spec}: a Rust job saw the Java job inside");
            eprintln!("{spec}: Rust ran {rust_ran}, Java ran {java_ran} of {rounds} each");
            assert!(
                rust_ran > 0 && java_ran > 0,
                "{spec}: rust {rust_ran}, java {java_ran}"
            );
        });
    }

    macro_rules! java_cases {
        ($($name:ident),* $(,)?) => {
            mod server {
                $(
                    #[test]
                    fn $name() {
                        super::$name(&crate::support::TestServer::start())
                    }
                )*
            }
            mod cluster {
                $(
                    #[test]
                    #[::serial_test::serial(shedlock_cluster)]
                    fn $name() {
                        super::$name(crate::support::cluster::shared())
                    }
                )*
            }
        };
    }

    java_cases!(
        each_side_skips_while_the_other_holds,
        lock_at_least_for_keeps_the_other_side_out,
        rust_and_java_runs_never_overlap,
    );
}
