//! The verification harness proves itself (see docs/verify.md): short runs of the
//! history-checked matrix on one server, a Sentinel set and a Redis Cluster, under their
//! nemeses (a failover on each replicated topology), have no violation; so do the
//! fair-lock, read-write-lock, semaphore, latch and hand-off workloads; and builds with a
//! seeded bug (a release that skips the owner check, on one server and on a cluster; a
//! guard that dates its lease from the reply; an unlock that publishes nothing; a fair
//! waiter that jumps the queue; a semaphore release that gives back twice) are flagged by
//! the checkers. A checker that has never failed proves nothing. The CI-sized matrix of
//! every nemesis is `scripts/verify.sh --quick`; these tests keep to a few cells each.
//!
//! They run `#[parallel]` with each other: every run starts its own servers (single
//! server on an OS-picked port, Sentinel set and Cluster on ports the harness hands out
//! once per process), writes into its own directory (`unique`), and its workers and
//! nemesis signal only the pids they started. The checkers judge the histories, with
//! faults and scheduling gaps cut out, not durations, so a second run on the host does
//! not change their verdicts. `#[parallel]` rather than no attribute, so that none runs
//! beside the binary's `#[serial]` tests, which count the process's threads,
//! connections and metrics.

#[cfg(feature = "interop")]
use redmutex_harness::peer;

use std::path::Path;

use crate::support::redmutex_bin;
use redmutex_harness::verify_run;
use serde_json::Value;
use serial_test::{parallel, serial};

/// Runs the verification runner into a fresh directory with `args` (the runner's command
/// line, without `--out`); returns whether it found no violation, and its report.
fn verify_run(dir: &Path, args: &[&str], broken: Option<&str>) -> (bool, Value) {
    let _ = std::fs::remove_dir_all(dir);
    let out = dir.to_str().unwrap();
    let mut argv = vec!["--out", out];
    argv.extend_from_slice(args);
    if let Some(b) = broken {
        argv.extend(["--broken", b]);
    }
    let mut options = verify_run::parse(&argv).unwrap();
    options.redmutex = Some(redmutex_bin().to_owned());
    let violations = verify_run::run(&options).unwrap_or_else(|e| panic!("the run failed: {e}"));
    let text = std::fs::read_to_string(dir.join("report.json")).unwrap();
    (violations == 0, serde_json::from_str(&text).unwrap())
}

/// The sum of one field over every cell of one checker.
fn total(report: &Value, checker: &str, field: &str) -> u64 {
    report["checkers"][checker]
        .as_object()
        .unwrap_or_else(|| panic!("no checker {checker} in {report}"))
        .values()
        .map(|cell| cell[field].as_u64().unwrap())
        .sum()
}

fn run_dir(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(crate::support::unique(name).replace(':', "-"))
}

/// Asserts that no checker found a violation and that the run did real work.
fn assert_clean(ok: bool, report: &Value) {
    for checker in ["exclusion", "loss_honesty", "fencing"] {
        if report["checkers"][checker].is_object() {
            assert_eq!(
                total(report, checker, "violations"),
                0,
                "{checker}: {:#}",
                report["checkers"][checker]
            );
        }
    }
    assert!(ok, "violations without a checker naming them: {report:#}");
    assert!(total(report, "exclusion", "operations") > 0, "{report:#}");
}

/// The faults the run's nemesis injected (its `invoke` records).
fn faults(report: &Value) -> u64 {
    report["cells"]
        .as_object()
        .unwrap()
        .values()
        .map(|c| c["faults"].as_u64().unwrap())
        .sum()
}

#[test]
#[parallel]
fn a_quick_single_server_run_has_no_violation() {
    let dir = run_dir("verify-quick");
    let args = ["--cells", "single/sigstop/lock-lease", "--quick"];
    let (ok, report) = verify_run(&dir, &args, None);
    assert_clean(ok, &report);
    assert!(faults(&report) > 0, "no SIGSTOP ran: {report:#}");
    // The nemesis made overstays that the checker classified (a holder stopped past its
    // lease).
    assert!(total(&report, "exclusion", "overstays") > 0, "{report:#}");
    assert!(dir.join("report.md").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The largest value of one field over every cell of one checker.
fn most(report: &Value, checker: &str, field: &str) -> u64 {
    report["checkers"][checker]
        .as_object()
        .unwrap_or_else(|| panic!("no checker {checker} in {report}"))
        .values()
        .filter_map(|cell| cell[field].as_u64())
        .max()
        .unwrap_or(0)
}

/// The other workloads, with and without proxy faults: fair lock (its grant order
/// judged), read-write lock (readers overlap, never a writer), semaphores (at most their
/// permits inside; the permit-expirable one's holders judged by their leases), count-down latch (no wait opens early) and the hand-off workloads,
/// where every release must reach a waiter (liveness). Every checker judged something,
/// and none found a violation.
#[test]
#[parallel]
fn fair_rw_semaphore_latch_and_handoff_workloads_have_no_violation() {
    let dir = run_dir("verify-kinds");
    let args = [
        "--nemesis",
        "none,proxy",
        "--workloads",
        "fair-handoff,rw-lease,semaphore-plain,semaphore-lease,latch-plain,lock-handoff",
        "--seconds",
        "4",
    ];
    let (ok, report) = verify_run(&dir, &args, None);
    let checkers = [
        "exclusion",
        "loss_honesty",
        "permits",
        "liveness",
        "fair_order",
        "latch",
    ];
    for checker in checkers {
        assert_eq!(
            total(&report, checker, "violations"),
            0,
            "{checker}: {:#}",
            report["checkers"][checker]
        );
        assert!(
            total(&report, checker, "operations") > 0,
            "{checker}: {report:#}"
        );
    }
    assert!(ok, "{report:#}");
    // Readers really overlapped, the semaphores really had two holders at once (three
    // when a leased permit ran out inside, an overstay), and the hand-off cells had free
    // stretches to judge.
    assert!(
        most(&report, "exclusion", "shared_read_overlaps") > 0,
        "{report:#}"
    );
    assert!(most(&report, "permits", "most_inside") >= 2, "{report:#}");
    assert!(total(&report, "liveness", "overlaps") > 0, "{report:#}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Rust and Java (every Redisson version the peer builds, 4.7.0 and 3.23.5 by default)
/// contend on one lock in one history, under both single-server nemeses and a
/// `CLUSTER FAILOVER` (the Java workers in cluster mode, their snapshots on the master of
/// the lock's slot): no violation, and the Java workers really held the lock in every
/// cell (their sections are in the history).
// Alone: each 5 s cell must see sections from JVMs (two Redisson versions) that start
// in it, and a JVM start takes both cores for seconds; beside another run on a 2-core
// host they can come up too late to take the lock in that cell.
#[cfg(feature = "interop")]
#[test]
#[serial]
fn rust_and_redisson_in_one_history_have_no_violation() {
    let java: Vec<String> = peer::versions()
        .iter()
        .map(|v| format!("{v}={}", peer::classpath(v)))
        .collect();
    let java = java.join(",");
    let dir = run_dir("verify-mixed");
    let cells = "single/sigstop/lock-lease,single/sigstop/lock-watchdog,\
single/proxy/lock-lease,single/proxy/lock-watchdog,single/none/latch-plain,\
cluster/failover/lock-lease";
    let args = ["--quick", "--cells", cells, "--java", &java];
    let (ok, report) = verify_run(&dir, &args, None);
    for checker in ["exclusion", "loss_honesty", "latch"] {
        assert_eq!(total(&report, checker, "violations"), 0, "{report:#}");
    }
    assert!(ok, "{report:#}");
    for (cell, figures) in report["cells"].as_object().unwrap() {
        if cell.ends_with("-latch-plain") {
            continue;
        }
        let java = figures["java_sections"].as_u64().unwrap();
        assert!(java > 0, "no Java section in {cell}: {report:#}");
    }
    // The latch cell has no sections: its Java threads' RCountDownLatch rounds must be in
    // the history, judged with the Rust ones (a wait that opened).
    let java_waits = std::fs::read_dir(dir.join("history"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let f = p.file_name().unwrap().to_string_lossy();
            f.starts_with("single-none-latch-plain.java") && f.ends_with(".jsonl")
        })
        .map(|p| std::fs::read_to_string(p).unwrap())
        .map(|text| {
            text.lines()
                .filter(|l| l.contains("\"op\":\"latch-wait\"") && l.contains("\"type\":\"ok\""))
                .count()
        })
        .sum::<usize>();
    assert!(java_waits > 0, "no Java latch wait opened: {report:#}");
    assert!(
        report["cells"]["cluster-failover-lock-lease"]["faults"]
            .as_u64()
            .unwrap()
            > 0,
        "no failover ran: {report:#}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The self-test: with the seeded bug switched on, a holder that overstayed its lease
/// deletes the lock of whoever holds it at its release; the next waiter then enters
/// while that holder's guard still trusts its hold. Exclusion and loss honesty must both
/// flag it, and the run must fail.
#[cfg(feature = "verify-broken-no-owner-check")]
#[test]
#[parallel]
fn the_checkers_flag_a_release_that_skips_the_owner_check() {
    let dir = run_dir("verify-broken");
    let args = [
        "--nemesis",
        "sigstop",
        "--workloads",
        "lock-lease",
        "--seconds",
        "8",
    ];
    let (ok, report) = verify_run(&dir, &args, Some("no-owner-check"));
    assert!(!ok, "verify-run passed a broken build: {report:#}");
    assert!(total(&report, "exclusion", "violations") > 0, "{report:#}");
    assert!(
        total(&report, "loss_honesty", "violations") > 0,
        "{report:#}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same seeded bug on a Redis Cluster: the checkers read the lock's state on the
/// master of its slot, and flag the bug there too.
#[cfg(feature = "verify-broken-no-owner-check")]
#[test]
#[parallel]
fn the_checkers_flag_a_release_that_skips_the_owner_check_on_a_cluster() {
    let dir = run_dir("verify-broken-cluster");
    let args = ["--cells", "cluster/sigstop/lock-lease", "--seconds", "8"];
    let (ok, report) = verify_run(&dir, &args, Some("no-owner-check"));
    assert!(!ok, "verify-run passed a broken build: {report:#}");
    assert!(total(&report, "exclusion", "violations") > 0, "{report:#}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The slow-reply cell the lease-from-reply self-test runs: every reply delayed by half the
/// lease, and every other section long enough to end near the lease.
const SLOW_CELL: [&str; 8] = [
    "--nemesis",
    "slow",
    "--workloads",
    "lock-lease",
    "--seconds",
    "8",
    "--long-every",
    "2",
];

/// The control of the self-test below: the same slow cell with a correct guard is clean.
#[test]
#[parallel]
fn slow_replies_with_a_correct_guard_have_no_violation() {
    let dir = run_dir("verify-slow");
    let (ok, report) = verify_run(&dir, &SLOW_CELL, None);
    assert_eq!(
        total(&report, "loss_honesty", "violations"),
        0,
        "{report:#}"
    );
    assert!(ok, "{report:#}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The second self-test: a guard that dates its lease from the acquire's reply trusts its
/// hold for the reply's delay past Redis's expiry, and loss honesty flags the sections
/// that end in that window.
#[cfg(feature = "verify-broken-lease-from-reply")]
#[test]
#[parallel]
fn the_checkers_flag_a_lease_dated_from_the_reply() {
    let dir = run_dir("verify-broken-lease");
    let (ok, report) = verify_run(&dir, &SLOW_CELL, Some("lease-from-reply"));
    assert!(!ok, "verify-run passed a broken build: {report:#}");
    assert!(
        total(&report, "loss_honesty", "violations") > 0,
        "{report:#}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The third self-test: an unlock that publishes nothing leaves every waiter asleep until
/// the lease it last saw runs out, so in the hand-off cell (releasers rest a lease) the
/// lock stays free while waiters wait, and liveness flags it. No safety checker does: the
/// bug delays, it never lets two in.
#[cfg(feature = "verify-broken-unlock-no-publish")]
#[test]
#[parallel]
fn the_liveness_checker_flags_an_unlock_that_publishes_nothing() {
    let dir = run_dir("verify-broken-publish");
    let args = [
        "--nemesis",
        "none",
        "--workloads",
        "lock-handoff",
        "--seconds",
        "6",
    ];
    let (ok, report) = verify_run(&dir, &args, Some("unlock-no-publish"));
    assert!(!ok, "verify-run passed a broken build: {report:#}");
    assert!(total(&report, "liveness", "violations") > 0, "{report:#}");
    let bound = most(&report, "liveness", "bound_ms");
    assert!(
        most(&report, "liveness", "longest_free_wait_ms") > bound,
        "{report:#}"
    );
    for checker in ["exclusion", "loss_honesty"] {
        assert_eq!(total(&report, checker, "violations"), 0, "{report:#}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A seeded bug for fair order: a queued waiter jumps to the head of the queue, so the
/// unlock tells it ahead of waiters that came before it. Exclusion stays clean.
#[cfg(feature = "verify-broken-fair-queue-jump")]
#[test]
#[parallel]
fn the_fair_order_checker_flags_a_waiter_that_jumps_the_queue() {
    let dir = run_dir("verify-broken-fair");
    let args = [
        "--nemesis",
        "none",
        "--workloads",
        "fair-watchdog",
        "--seconds",
        "4",
    ];
    let (ok, report) = verify_run(&dir, &args, Some("fair-queue-jump"));
    assert!(!ok, "verify-run passed a broken build: {report:#}");
    assert!(total(&report, "fair_order", "violations") > 0, "{report:#}");
    assert_eq!(total(&report, "exclusion", "violations"), 0, "{report:#}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A seeded bug for the permits checker: a semaphore release that gives back twice its
/// permits, so more holders than permits come to be inside at once.
#[cfg(feature = "verify-broken-semaphore-double-release")]
#[test]
#[parallel]
fn the_permits_checker_flags_a_release_that_returns_twice_its_permits() {
    let dir = run_dir("verify-broken-permits");
    let args = [
        "--nemesis",
        "none",
        "--workloads",
        "semaphore-plain",
        "--seconds",
        "3",
    ];
    let (ok, report) = verify_run(&dir, &args, Some("semaphore-double-release"));
    assert!(!ok, "verify-run passed a broken build: {report:#}");
    assert!(total(&report, "permits", "violations") > 0, "{report:#}");
    assert!(most(&report, "permits", "most_inside") > 2, "{report:#}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A SIGKILLed holder (its hold stays in Redis until its lease runs out), the token lock
/// (with the go-redsync and redis-py history workers under `interop`) through the fault
/// proxy, and one count-down latch counted down by the threads of both processes: no
/// violation. The kill cell's liveness judges every killed holder's takeover.
#[test]
#[parallel]
fn kill_worker_token_lease_and_latch_shared_cells_have_no_violation() {
    let dir = run_dir("verify-more");
    let cells = "single/kill_worker/lock-lease,single/proxy/token-lease,single/none/latch-shared";
    #[allow(unused_mut)]
    let mut args = vec!["--cells", cells, "--seconds", "3"];
    #[cfg(feature = "interop")]
    let peers = format!(
        "go={},python={}",
        redmutex_harness::token_peer::redsync_program().display(),
        redmutex_harness::token_peer::redis_py_program().display()
    );
    #[cfg(feature = "interop")]
    args.extend(["--token-peers", &peers]);
    let (ok, report) = verify_run(&dir, &args, None);
    for checker in ["exclusion", "loss_honesty", "liveness", "latch"] {
        assert_eq!(
            total(&report, checker, "violations"),
            0,
            "{checker}: {:#}",
            report["checkers"][checker]
        );
    }
    assert!(ok, "{report:#}");
    let cell = |checker: &str, cell: &str, field: &str| {
        report["checkers"][checker][cell][field]
            .as_u64()
            .unwrap_or(0)
    };
    assert!(
        cell(
            "liveness",
            "single-kill_worker-lock-lease",
            "workers_killed"
        ) > 0,
        "{report:#}"
    );
    assert!(
        cell("loss_honesty", "single-proxy-token-lease", "operations") > 0,
        "{report:#}"
    );
    // Both processes' threads counted down the one latch of each round, and waits opened.
    assert!(
        cell("latch", "single-none-latch-shared", "overlaps") > 0,
        "{report:#}"
    );
    #[cfg(feature = "interop")]
    assert!(
        report["cells"]["single-proxy-token-lease"]["java_sections"]
            .as_u64()
            .unwrap()
            > 0,
        "no go-redsync or redis-py section in the history: {report:#}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A seeded bug for liveness after a SIGKILL (in the worker, not the library): a worker
/// that deletes the lock's key at start-up as a "stale lock". The runner's replacement of
/// a killed holder then frees the dead hold before its lease ends, and the next grant
/// comes early. With one Rust process at a time, nobody else's hold is deleted, so only
/// the takeover rule can see it: exclusion and loss honesty stay clean.
#[cfg(feature = "verify-broken-clear-at-start")]
#[test]
#[parallel]
fn the_liveness_checker_flags_a_grant_before_a_killed_holders_lease_end() {
    let dir = run_dir("verify-broken-takeover");
    let args = [
        "--cells",
        "single/kill_worker/lock-lease",
        "--seconds",
        "4",
        "--processes",
        "1",
    ];
    let (ok, report) = verify_run(&dir, &args, Some("clear-at-start"));
    assert!(!ok, "verify-run passed a broken worker: {report:#}");
    assert!(total(&report, "liveness", "violations") > 0, "{report:#}");
    for checker in ["exclusion", "loss_honesty"] {
        assert_eq!(total(&report, checker, "violations"), 0, "{report:#}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A seeded bug for the latch checker (in the worker): each count-down runs twice, as a
/// non-idempotent count-down resent after a lost reply would, so the shared latch opens
/// when half its count-downs have been sent.
#[cfg(feature = "verify-broken-latch-double-count-down")]
#[test]
#[parallel]
fn the_latch_checker_flags_a_count_down_that_counts_twice() {
    let dir = run_dir("verify-broken-latch");
    let args = ["--cells", "single/none/latch-shared", "--seconds", "2"];
    let (ok, report) = verify_run(&dir, &args, Some("latch-double-count-down"));
    assert!(!ok, "verify-run passed a broken worker: {report:#}");
    assert!(total(&report, "latch", "violations") > 0, "{report:#}");
    let _ = std::fs::remove_dir_all(&dir);
}
