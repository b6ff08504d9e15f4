//! The crate docs stay a first page a user can work from: every cargo feature has a row in
//! the crate docs' feature table, and every public method of `redmutex::Lock` and
//! `redmutex::LockGuard` (the methods a user calls most) shows an example. The doctests
//! compile those examples; this checks that they exist.

use std::path::Path;

fn source(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// The `[features]` of Cargo.toml, `default` left out.
fn features() -> Vec<String> {
    let manifest = source("Cargo.toml");
    let section = manifest
        .split("\n[features]\n")
        .nth(1)
        .expect("Cargo.toml has a [features] section");
    section
        .lines()
        .take_while(|l| !l.starts_with('['))
        .filter_map(|l| l.split_once(" = ").map(|(name, _)| name.trim()))
        .filter(|name| !name.starts_with('#') && *name != "default")
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_feature_has_a_row_in_the_crate_docs() {
    let lib = source("src/lib.rs");
    let features = features();
    assert!(features.iter().any(|f| f == "tls"), "{features:?}");
    let missing: Vec<&String> = features
        .iter()
        .filter(|f| !lib.contains(&format!("//! | `{f}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "features without a row in src/lib.rs's table: {missing:?}"
    );
}

/// The public methods of the `impl` blocks opened by `impl_line` in `text` whose doc comment has
/// no code block.
fn methods_without_example(text: &str, impl_line: &str) -> (usize, Vec<String>) {
    let mut found = 0;
    let mut missing = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut inside = false;
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with("impl") {
            inside = line.starts_with(impl_line);
            continue;
        }
        let Some(rest) = line.trim_start().strip_prefix("pub fn ") else {
            continue;
        };
        if !inside {
            continue;
        }
        found += 1;
        let doc: Vec<&str> = lines[..i]
            .iter()
            .rev()
            .map(|l| l.trim_start())
            .take_while(|l| l.starts_with("///") || l.starts_with("#["))
            .collect();
        if !doc.iter().any(|l| l.starts_with("/// ```")) {
            let name = rest.split(['(', '<']).next().unwrap_or(rest);
            missing.push(name.to_owned());
        }
    }
    (found, missing)
}

#[test]
fn every_public_method_of_lock_and_its_guard_has_an_example() {
    // `Lock`'s methods live in the safe layer (its public methods and its guard) and in
    // the files that add a style of them (the closure, the cancellable and the
    // explicit-owner forms).
    let files = [
        "safe/lock.rs",
        "safe/guard.rs",
        "scoped.rs",
        "interruptible.rs",
        "owned.rs",
    ];
    let all: String = files
        .iter()
        .map(|f| source(&format!("src/lock/{f}")))
        .collect::<Vec<_>>()
        .join("\n");
    // Each type's methods sit in two blocks: those of every kind (`LockKind`) and those of
    // the thread-owned kinds (`HeldLock`).
    for ty in ["Lock<K> {", "LockGuard<K> {"] {
        let mut found = 0;
        for bound in ["LockKind", "HeldLock"] {
            let impl_line = format!("impl<K: {bound}> {ty}");
            let (n, missing) = methods_without_example(&all, &impl_line);
            found += n;
            assert!(
                missing.is_empty(),
                "`{impl_line}` methods without an example: {missing:?}"
            );
        }
        assert!(found >= 5, "{ty}: found only {found} public methods");
    }
}
