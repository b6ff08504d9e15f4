//! The manifest tells the truth about what building the crate takes: `rust-version` is
//! at least every dependency's own `rust-version` (as `cargo metadata` reads them from the
//! locked dependency graph), and no crate of the library's graph is built in two versions
//! (parking_lot was, once: 0.12 through r2d2 and 0.13 directly).
//!
//! The graph walked is the one a build of the library and the `redmutex` binary compiles:
//! every feature on, normal and build dependencies, the package's dev-dependencies left
//! out (they build only its tests).
//!
//! And plain `cargo test` needs no Java, Go or Python: a test target can start a peer only
//! through the harness's `peer` module, so every target that imports that module needs the
//! `interop` feature, as a whole or on the import.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// Crates that may appear in two versions, each with the reason it cannot be helped.
const ALLOWED_TWICE: &[(&str, &str)] = &[
    (
        "getrandom",
        "ring 0.17 (rustls) needs getrandom 0.2; uuid 1.x and the crate itself need 0.4",
    ),
    (
        "windows-sys",
        "Windows builds only: ring 0.17 needs windows-sys 0.52, the others 0.61",
    ),
];

/// `cargo metadata` of this package, every feature on, from the committed lock file.
fn metadata() -> Value {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--all-features",
            "--locked",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

/// `1.89`, `1.89.0` as comparable numbers (a missing part is 0).
fn version(text: &str) -> (u64, u64, u64) {
    let mut parts = text.split('.').map(|p| {
        p.parse::<u64>()
            .unwrap_or_else(|_| panic!("rust-version {text:?}"))
    });
    let mut next = || parts.next().unwrap_or(0);
    (next(), next(), next())
}

/// The packages a build of the library and binary compiles, by id (the root excluded).
fn built_packages(meta: &Value) -> BTreeSet<String> {
    let root = meta["resolve"]["root"].as_str().expect("a root package");
    let nodes: BTreeMap<&str, &Value> = meta["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].as_str().unwrap(), n))
        .collect();
    let mut seen = BTreeSet::new();
    let mut stack = vec![root];
    while let Some(id) = stack.pop() {
        for dep in nodes[id]["deps"].as_array().unwrap() {
            // A dependency reached only as a dev-dependency builds tests, not the crate.
            let built = dep["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k["kind"] != "dev");
            let pkg = dep["pkg"].as_str().unwrap();
            if built && seen.insert(pkg.to_owned()) {
                stack.push(pkg);
            }
        }
    }
    seen
}

#[test]
fn rust_version_covers_every_dependency_and_no_crate_is_built_twice() {
    let meta = metadata();
    let packages: BTreeMap<&str, &Value> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p))
        .collect();
    let root = packages[meta["resolve"]["root"].as_str().unwrap()];
    let ours = root["rust_version"]
        .as_str()
        .expect("Cargo.toml declares a rust-version");
    let built = built_packages(&meta);
    assert!(
        built
            .iter()
            .any(|id| packages[id.as_str()]["name"] == "redis"),
        "the walk found the library's dependencies: {built:?}"
    );

    let mut newer: Vec<String> = Vec::new();
    let mut versions: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for id in &built {
        let p = packages[id.as_str()];
        let name = p["name"].as_str().unwrap();
        versions
            .entry(name)
            .or_default()
            .insert(p["version"].as_str().unwrap());
        if let Some(needs) = p["rust_version"].as_str()
            && version(needs) > version(ours)
        {
            newer.push(format!(
                "{name} {} needs {needs}",
                p["version"].as_str().unwrap()
            ));
        }
    }
    assert!(
        newer.is_empty(),
        "Cargo.toml says rust-version = {ours:?}, but: {}",
        newer.join(", ")
    );

    let twice: Vec<String> = versions
        .iter()
        .filter(|(name, v)| v.len() > 1 && !ALLOWED_TWICE.iter().any(|(a, _)| a == *name))
        .map(|(name, v)| format!("{name} {v:?}"))
        .collect();
    assert!(
        twice.is_empty(),
        "built in more than one version (see `cargo tree -d -e normal,build --all-features`): {}",
        twice.join(", ")
    );
    // The allowance is for what cannot be helped; one that no longer applies goes.
    for (name, why) in ALLOWED_TWICE {
        assert!(
            versions.get(name).is_some_and(|v| v.len() > 1),
            "{name} is built once now; drop its allowance ({why})"
        );
    }
}

#[test]
fn only_interop_targets_can_start_a_peer() {
    let meta = metadata();
    let root = meta["resolve"]["root"].as_str().unwrap();
    let package = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == root)
        .unwrap();
    let mut checked = 0;
    let mut open = Vec::new();
    for target in package["targets"].as_array().unwrap() {
        if !target["kind"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k == "test")
        {
            continue;
        }
        let gated = target["required-features"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f == "interop"));
        let path = std::path::Path::new(target["src_path"].as_str().unwrap());
        // A binary of one folder (`tests/<name>/main.rs`) imports the peer in any of its
        // modules; a single-file binary in itself.
        let mut files = vec![path.to_path_buf()];
        if path.ends_with("main.rs") {
            files = std::fs::read_dir(path.parent().unwrap())
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "rs"))
                .collect();
        }
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                if !matches!(
                    line.trim(),
                    "use redmutex_harness::peer;" | "use redmutex_harness::token_peer;"
                ) {
                    continue;
                }
                checked += 1;
                // The attributes right above the declaration.
                let cfg = lines[..i]
                    .iter()
                    .rev()
                    .take_while(|l| l.trim_start().starts_with("#["))
                    .any(|l| l.trim() == "#[cfg(feature = \"interop\")]");
                // A `cfg` on the module's own declaration covers the whole module.
                let module = file.file_stem().unwrap().to_str().unwrap();
                let declared_gated = path != file.as_path()
                    && std::fs::read_to_string(path)
                        .unwrap()
                        .lines()
                        .collect::<Vec<_>>()
                        .windows(2)
                        .any(|w| {
                            w[0].trim().starts_with("#[cfg(feature = \"interop\")]")
                                && w[1].trim() == format!("mod {module};")
                        });
                if !gated && !cfg && !declared_gated {
                    open.push(format!(
                        "{}: {}: {}",
                        target["name"],
                        file.display(),
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(checked > 0, "no test target imports the peer module");
    assert!(
        open.is_empty(),
        "test targets that can start a peer without the interop feature: {}",
        open.join(", ")
    );
}

#[test]
fn versions_compare_by_number() {
    assert!(version("1.95") > version("1.89.0"));
    assert!(version("1.100") > version("1.95"));
    assert_eq!(version("1.89"), version("1.89.0"));
}
