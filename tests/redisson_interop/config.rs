//! Configuration as Redisson reads it: a Redisson client and a redmutex client on the
//! same database exclude each other (scenario 25), Redisson's own `Config.fromYAML` and
//! redmutex's reader give the same verdict on the same files (scenario 26), and the
//! key lists redmutex checks files against are what each Redisson version accepts
//! (scenario 27).

use std::path::{Path, PathBuf};
use std::process::Command;

use redmutex::{Config, Error};
use serial_test::parallel;

use crate::peer::{Peer, classpath};
use crate::support::raw::exists;
use crate::support::{TestServer, unique};
use crate::{WATCHDOG_MS, run_versions};

/// A Redisson client configured with `database: 3` and a redmutex client built with
/// `.database(3)` contend on the same lock (before, the Rust side took its locks in
/// database 0 and the two never saw each other).
#[test]
#[parallel]
fn scenario_25_a_database_other_than_0_is_shared_with_redisson() {
    run_versions(25, shared_database);
}

fn shared_database(v: &str) {
    let server = TestServer::start();
    let dir = std::env::temp_dir().join(unique("redmutex-db3").replace(':', "-"));
    std::fs::create_dir_all(&dir).unwrap();
    let yaml = dir.join("redisson.yaml");
    std::fs::write(
        &yaml,
        format!(
            "singleServerConfig:\n  address: \"{}\"\n  database: 3\n",
            server.url()
        ),
    )
    .unwrap();
    let peer = Peer::start_yaml(v, &yaml, WATCHDOG_MS);
    let client = server.client_with(|b| b.database(3));
    let mut raw = server.conn();
    let name = unique("s25");

    // Java holds: Rust is refused, in database 3.
    peer.ok("j", &format!("lock {name}"));
    let lock = client.get_lock(name.clone());
    assert!(
        lock.try_lock().unwrap().is_none(),
        "Rust got a lock Java holds"
    );
    let _: () = redis::cmd("SELECT").arg(3).query(&mut raw).unwrap();
    assert!(exists(&mut raw, &name), "Java's lock is not in database 3");
    peer.ok("j", &format!("unlock {name}"));

    // Rust holds: Java is refused.
    let guard = lock.lock().unwrap();
    assert!(
        !peer.bool("j", &format!("trylock {name} -1")),
        "Java got a lock Rust holds"
    );
    guard.unlock().unwrap();
    assert!(peer.bool("j", &format!("trylock {name} -1")));
    peer.ok("j", &format!("unlock {name}"));
    let _: () = redis::cmd("SELECT").arg(0).query(&mut raw).unwrap();
    assert!(
        !exists(&mut raw, &name),
        "something was written to database 0"
    );
    peer.quit();
    std::fs::remove_dir_all(&dir).unwrap();
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/redisson")
}

/// The files whose verdict is compared, with the verdict expected of Redisson 4.7.0:
/// Redisson's documented examples and `verdicts/accepted/` load, `verdicts/rejected/`
/// (misspelt or misplaced keys) do not.
fn verdict_files() -> Vec<(PathBuf, bool)> {
    let mut files = Vec::new();
    for (dir, accepted) in [
        ("", true),
        ("verdicts/accepted", true),
        ("verdicts/rejected", false),
    ] {
        let mut found: Vec<PathBuf> = std::fs::read_dir(fixtures().join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        found.sort();
        files.extend(found.into_iter().map(|p| (p, accepted)));
    }
    files
}

/// Runs the Java peer of Redisson `version` with `args` and returns its stdout lines.
fn java(version: &str, args: &[&std::ffi::OsStr]) -> Vec<String> {
    let out = Command::new("java")
        .arg("-cp")
        .arg(classpath(version))
        .arg("dev.redmutex.interop.Peer")
        .args(args)
        .output()
        .expect("java runs");
    assert!(
        out.status.success(),
        "peer {version} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The same files through Redisson 4.7.0's `Config.fromYAML` and through redmutex's
/// reader: both accept the same ones and refuse the same ones, and redmutex's refusal
/// names the key and the one meant. Redisson 3.23.5 refuses every misspelt file too.
#[test]
#[parallel]
fn scenario_26_redisson_and_redmutex_judge_yaml_files_alike() {
    let files = verdict_files();
    assert!(files.len() >= 10, "{files:?}");
    let mut args: Vec<&std::ffi::OsStr> = vec!["--check-yaml".as_ref()];
    args.extend(files.iter().map(|(p, _)| p.as_os_str()));
    let mut failures = Vec::new();
    for version in ["4.7.0", "3.23.5"] {
        let lines = java(version, &args);
        assert_eq!(lines.len(), files.len(), "{lines:?}");
        for ((path, expected), line) in files.iter().zip(&lines) {
            let shown = path.strip_prefix(fixtures()).unwrap().display().to_string();
            let java_ok = line.ends_with(" ok");
            let rust = Config::from_redisson_yaml_file(path);
            let rust_ok = match &rust {
                Ok(_) => true,
                Err(Error::Config(msg)) if !expected => {
                    if !msg.contains("is not a Redisson setting") {
                        failures.push(format!(
                            "{shown}: redmutex refused it, but not for a key: {msg}"
                        ));
                    }
                    false
                }
                Err(e) => {
                    failures.push(format!("{shown}: {e}"));
                    false
                }
            };
            println!("scenario 26 {version} {shown}: Redisson {java_ok}, redmutex {rust_ok}");
            if version == "4.7.0" && (java_ok != *expected || rust_ok != *expected) {
                failures.push(format!(
                    "{shown}: expected {expected}, Redisson 4.7.0 {java_ok} ({line}), redmutex {rust:?}"
                ));
            }
            if version == "3.23.5" && !expected && java_ok {
                failures.push(format!("{shown}: Redisson 3.23.5 accepted it"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The key lists kept in `tests/fixtures/redisson/keys-<version>.txt`, which a unit test
/// holds redmutex's lists to, are what each Redisson version's `Config.fromYAML`
/// accepts now.
#[test]
#[parallel]
fn scenario_27_the_key_lists_are_what_redisson_accepts() {
    run_versions(27, |v| {
        let printed = java(v, &["--yaml-keys".as_ref()]);
        let kept = std::fs::read_to_string(fixtures().join(format!("keys-{v}.txt")))
            .unwrap_or_else(|e| panic!("keys-{v}.txt: {e} (write it with the peer's --yaml-keys)"));
        let kept: Vec<&str> = kept.lines().collect();
        assert_eq!(
            printed, kept,
            "Redisson {v}'s keys changed: rewrite keys-{v}.txt"
        );
    });
}
