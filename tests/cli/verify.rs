//! `redmutex verify` against a single server, the shared Cluster and the shared Sentinel
//! set: short runs (2 s per kind; every kind on one server, a few elsewhere, to keep the
//! file short) whose report names each kind with its figures and no violation, whose
//! keys are gone afterwards, and whose bad options and unreachable servers fail in one
//! line with their documented exit codes; a login, and a seeded bug that must fail it.

use serde_json::Value;

use crate::support::cluster;
use crate::support::sentinel::{self, MASTER_NAME};
use crate::support::{TestServer, supervised, unique};
use crate::{fails, run, stderr, stdout};

/// Every key of one connection matching `pattern`.
fn keys(conn: &mut redis::Connection, pattern: &str) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS").arg(pattern).query(conn).unwrap();
    keys.sort();
    keys
}

/// A fresh `--out` directory path (the command creates it).
fn fresh_out() -> std::path::PathBuf {
    std::env::temp_dir().join(unique("verify-out"))
}

/// `redmutex verify --json ...`, which must succeed; its summary. Without `--out` in
/// `args`, the run's directory is deleted afterwards.
fn verify_json(args: &[&str]) -> Value {
    let mut all = vec!["verify", "--json", "--seconds", "2", "--threads", "3"];
    all.extend_from_slice(args);
    let own = fresh_out();
    let own_str = own.to_str().unwrap().to_owned();
    if !args.contains(&"--out") {
        all.extend(["--out", own_str.as_str()]);
    }
    let out = run(&all, "");
    let _ = std::fs::remove_dir_all(&own);
    assert!(
        out.status.success(),
        "{all:?} failed ({}): {}{}",
        out.status,
        stdout(&out),
        stderr(&out)
    );
    serde_json::from_str(&stdout(&out)).unwrap()
}

/// Asserts that `summary` reports each of `kinds` with sections, its checkers' figures
/// and no violation, and that the cleanup deleted what the run left and left nothing.
fn assert_clean_run(summary: &Value, kinds: &[&str]) {
    assert_eq!(summary["violations"], 0, "{summary:#}");
    let reported = summary["kinds"].as_array().unwrap();
    assert_eq!(reported.len(), kinds.len(), "{summary:#}");
    for (k, kind) in reported.iter().zip(kinds) {
        assert_eq!(k["kind"], *kind, "{k:#}");
        assert!(k["sections"].as_u64().unwrap() > 0, "{k:#}");
        assert_eq!(k["violations"], 0, "{k:#}");
        let checkers = &k["checkers"];
        assert_eq!(checkers["exclusion"]["violations"], 0, "{k:#}");
        assert!(
            checkers["exclusion"]["operations"].as_u64().unwrap() > 0,
            "{k:#}"
        );
        assert_eq!(checkers["loss_honesty"]["violations"], 0, "{k:#}");
        let own = match *kind {
            "fenced" => "fencing",
            "semaphore" => "permits",
            "fair" => "fair_order",
            _ => "exclusion",
        };
        assert_eq!(checkers[own]["violations"], 0, "{k:#}");
        if *kind != "semaphore" {
            // Wake-ups: the liveness checker judged the waiters of every lock kind.
            assert_eq!(checkers["liveness"]["violations"], 0, "{k:#}");
            assert!(
                checkers["liveness"]["bound_ms"].as_u64().unwrap() > 0,
                "{k:#}"
            );
        }
        assert!(k["hand_off"]["count"].is_u64(), "{k:#}");
    }
    // The occupancy counter and the protected counter outlive every section: the run
    // did leave keys, and deleted them.
    assert!(
        summary["keys"]["removed"].as_u64().unwrap() >= 2,
        "{summary:#}"
    );
    assert_eq!(summary["keys"]["left"], 0, "{summary:#}");
    let not_tested = summary["not_tested"].as_array().unwrap();
    assert!(
        not_tested
            .iter()
            .any(|l| l.as_str().unwrap().starts_with("no faults were injected")),
        "{summary:#}"
    );
}

#[test]
fn verify_checks_every_kind_on_one_server_and_deletes_every_key_it_wrote() {
    let server = TestServer::start();
    let mut conn = server.conn();
    // The operator's own data, which the cleanup must leave alone.
    redis::cmd("SET")
        .arg("app:data")
        .arg("1")
        .query::<()>(&mut conn)
        .unwrap();
    let before = keys(&mut conn, "*");
    assert_eq!(before, ["app:data"]);
    let out_dir = fresh_out();
    let prefix = unique("verify-single");
    let url = server.url();
    let summary = verify_json(&[
        "--url",
        &url,
        "--prefix",
        &prefix,
        "--out",
        out_dir.to_str().unwrap(),
        // No classpath there: the Java worker is skipped, with the reason.
        "--java",
        "4.7.0=/nonexistent/classpath.txt",
    ]);
    assert_clean_run(&summary, &["lock", "fair", "rw", "fenced", "semaphore"]);
    assert_eq!(summary["topology"], "single", "{summary:#}");
    let java = summary["java"].as_str().unwrap();
    assert!(
        java.starts_with("skipped") || java.starts_with("not run"),
        "{java}"
    );
    assert!(
        java.contains("/nonexistent/classpath.txt") || java.contains("Java"),
        "{java}"
    );
    assert_eq!(keys(&mut conn, "*"), before);
    // The history and the checkers' reports stay for the operator.
    for file in ["report.json", "report.md", "summary.json"] {
        assert!(out_dir.join(file).is_file(), "{file}");
    }
    assert!(out_dir.join("history").read_dir().unwrap().count() > 5);
    // A second run there would mix two histories.
    let (code, text) = fails(&["verify", "--url", &url, "--out", out_dir.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("another run's history"), "{text}");
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn verify_runs_on_a_cluster_and_prints_a_table() {
    // Each kind's snapshots are one MULTI over the lock and its side keys: a name whose
    // keys spread over slots would fail the run with CROSSSLOT.
    let cluster = cluster::shared();
    let prefix = unique("verify-cluster");
    let pattern = format!("*{{{prefix}:*");
    let listed = || -> Vec<String> {
        cluster
            .masters()
            .iter()
            .flat_map(|m| keys(&mut m.conn(), &pattern))
            .collect()
    };
    assert!(listed().is_empty());
    let seed = cluster.masters()[0].addr();
    let out_dir = fresh_out();
    let out_str = out_dir.to_str().unwrap().to_owned();
    let all = [
        "verify",
        "--cluster",
        &seed,
        "--prefix",
        &prefix,
        "--kinds",
        "lock,semaphore",
        "--seconds",
        "2",
        "--threads",
        "3",
        "--out",
        out_str.as_str(),
    ];
    let out = run(&all, "");
    let _ = std::fs::remove_dir_all(&out_dir);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}{}", stderr(&out));
    assert!(text.contains("(cluster, user default)"), "{text}");
    for kind in ["lock ", "semaphore "] {
        let line = text
            .lines()
            .find(|l| l.starts_with(kind))
            .unwrap_or_else(|| panic!("no {kind} line: {text}"));
        assert!(line.contains(" 0 viol"), "{line}");
    }
    assert!(text.contains("0 left now"), "{text}");
    assert!(text.contains("not tested here:"), "{text}");
    assert!(text.contains("pub/sub:"), "{text}");
    assert!(text.trim_end().ends_with("0 violations"), "{text}");
    assert!(listed().is_empty(), "{:?}", listed());
}

#[test]
fn verify_finds_the_master_through_the_sentinels() {
    let set = sentinel::shared();
    let prefix = unique("verify-sentinel");
    let pattern = format!("*{{{prefix}:*");
    let sentinels = set.sentinel_urls().join(",");
    let summary = verify_json(&[
        "--sentinel",
        &sentinels,
        "--master",
        MASTER_NAME,
        "--prefix",
        &prefix,
        "--kinds",
        "fenced",
    ]);
    assert_clean_run(&summary, &["fenced"]);
    assert_eq!(summary["topology"], "sentinel", "{summary:#}");
    assert!(keys(&mut set.master().conn(), &pattern).is_empty());
}

#[test]
fn verify_refuses_bad_options_a_used_prefix_and_an_unreachable_server_in_one_line() {
    let server = TestServer::start();
    let url = server.url();
    for (extra, says) in [
        (&["--kinds", "lock,nosuch"][..], "unknown kind \"nosuch\""),
        (&["--kinds", "lock,fair,lock"][..], "lock named twice"),
        (&["--mode", "forever"][..], "unknown mode \"forever\""),
        (&["--seconds", "0"][..], "--seconds"),
        (&["--prefix", "a{b"][..], "--prefix"),
        (&["--seconds", "many"][..], "many"),
    ] {
        let mut args = vec!["verify", "--url", &url];
        args.extend_from_slice(extra);
        let out = run(&args, "");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
    // A login the workers could not carry to a cluster's announced nodes.
    let (code, text) = fails(&["verify", "--cluster", "127.0.0.1:1", "--password", "x"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("one server only"), "{text}");

    // A Redisson YAML file's password, which the library keeps write-only.
    let yaml = std::env::temp_dir().join(format!("{}.yaml", unique("verify-login")));
    std::fs::write(
        &yaml,
        format!("singleServerConfig:\n  address: \"{url}\"\n  password: \"s3cret\"\n"),
    )
    .unwrap();
    let (code, text) = fails(&["verify", "--redisson-yaml", yaml.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("--url with --user and --password"), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
    let _ = std::fs::remove_file(&yaml);

    // A prefix that has keys already: refused, and the key stays.
    let prefix = unique("verify-used");
    let mut conn = server.conn();
    let taken = format!("{{{prefix}:lock}}");
    redis::cmd("SET")
        .arg(&taken)
        .arg("mine")
        .query::<()>(&mut conn)
        .unwrap();
    let (code, text) = fails(&["verify", "--url", &url, "--prefix", &prefix]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("choose another --prefix"), "{text}");
    let kept: Option<String> = redis::cmd("GET").arg(&taken).query(&mut conn).unwrap();
    assert_eq!(kept.as_deref(), Some("mine"));

    // Nothing listens on a port just handed out and closed again.
    let dead = format!("redis://127.0.0.1:{}/", supervised::free_port());
    let (code, text) = fails(&["verify", "--url", &dead, "--timeout-ms", "500"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains(dead.trim_end_matches('/')), "{text}");
}

#[cfg(feature = "interop")]
#[test]
fn verify_runs_redisson_workers_beside_the_rust_ones_on_the_lock_kind() {
    let server = TestServer::start();
    let prefix = unique("verify-java");
    let java = format!("4.7.0={}", crate::peer::classpath("4.7.0"));
    let summary = verify_json(&[
        "--url",
        &server.url(),
        "--prefix",
        &prefix,
        "--kinds",
        "lock",
        "--java",
        &java,
    ]);
    assert_clean_run(&summary, &["lock"]);
    assert!(
        summary["java"].as_str().unwrap().contains("Redisson 4.7.0"),
        "{summary:#}"
    );
    assert!(
        summary["kinds"][0]["java_sections"].as_u64().unwrap() > 0,
        "{summary:#}"
    );
    assert!(keys(&mut server.conn(), "*").is_empty());
}

#[test]
fn verify_carries_an_acl_login_to_its_workers_and_never_prints_it() {
    let server = TestServer::start();
    let mut raw = server.protect("ops", "ops pw/1", "default-pw-1");
    let url = server.url();
    let summary = verify_json(&[
        "--url",
        &url,
        "--user",
        "ops",
        // A space and a slash: the workers' URL must carry them encoded.
        "--password",
        "ops pw/1",
        "--kinds",
        "lock",
        "--prefix",
        &unique("verify-login"),
    ]);
    assert_clean_run(&summary, &["lock"]);
    assert_eq!(summary["user"], "ops", "{summary:#}");
    let text = summary.to_string();
    assert!(
        !text.contains("ops pw") && !text.contains("ops%20pw"),
        "{text}"
    );
    // `raw` logged in before requirepass was set; it lists what the run left.
    assert!(keys(&mut raw, "*").is_empty());
}

/// The seeded bug `verify-broken-no-owner-check` (docs/verify.md, the self-test): a
/// release that deletes the lock without the owner check. In lease mode one section in
/// ten outlives its lease, and that holder's release deletes the next holder's lock.
#[cfg(feature = "verify-broken-no-owner-check")]
#[test]
fn verify_exits_3_with_the_evidence_when_the_checkers_find_a_violation() {
    let server = TestServer::start();
    let out_dir = fresh_out();
    let out = std::process::Command::new(crate::support::redmutex_bin())
        .args([
            "verify",
            "--json",
            "--url",
            &server.url(),
            "--kinds",
            "lock",
        ])
        .args(["--mode", "lease", "--lease-ms", "300", "--seconds", "3"])
        .arg("--out")
        .arg(&out_dir)
        .env_remove("REDMUTEX_URL")
        .env_remove("REDMUTEX_PASSWORD")
        .env("REDMUTEX_VERIFY_BROKEN", "no-owner-check")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&out_dir);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("violations; see"), "{}", stderr(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let lock = &summary["kinds"][0];
    assert!(lock["violations"].as_u64().unwrap() > 0, "{summary:#}");
    assert!(
        !lock["evidence"].as_array().unwrap().is_empty(),
        "{summary:#}"
    );
    // A failing run cleans up too.
    assert_eq!(summary["keys"]["left"], 0, "{summary:#}");
    assert!(keys(&mut server.conn(), "*").is_empty());
}
