//! The string-token peers of `tests/interop`: real go-redsync/redsync v4 mutexes over
//! go-redis v9 (`tests/interop/go`) and real redis-py `Lock`s (`tests/interop/python`).
//! Both speak the Java peer's line protocol, so a [`Peer`] drives them; their commands are
//! listed in `tests/interop/go/README.md` and `tests/interop/python/README.md`.
//!
//! Each peer is built once per test process (its `build.sh`, under
//! `<target>/interop/{go,python}`), on first use.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use crate::peer::{Peer, on_path, run_build, target_dir};

const GO_HINT: &str = "the redsync peer needs a `go` on PATH (Go 1.25+, or any older release, \
     which fetches Go 1.25 from the Go module proxy: tests/interop/go/toolchain.sh) and the \
     module proxy (or a filled module cache) for its first build; scripts/setup.sh installs it";
const PYTHON_HINT: &str = "the redis-py peer needs python3 (3.10+, with venv and pip) on \
     PATH and PyPI (or a filled pip cache) for its first build; scripts/setup.sh installs it";

/// Builds the peer in `tests/interop/<kind>` once per process; returns `<target>/interop/<kind>`.
fn built(kind: &'static str, cell: &'static OnceLock<PathBuf>, tool: &str, hint: &str) -> PathBuf {
    cell.get_or_init(|| {
        assert!(on_path(tool), "`{tool}` is not on PATH: {hint}");
        let outdir = target_dir().join("interop").join(kind);
        run_build(
            &format!("the {kind} peer"),
            &format!("tests/interop/{kind}/build.sh"),
            &[outdir.as_os_str()],
            hint,
        );
        outdir
    })
    .clone()
}

/// A Go peer running go-redsync over one pool per URL: one URL is a single-server mutex,
/// several are redsync's quorum (the counter of `section` lives on the first URL). Its
/// [`Peer::client_id`] names the versions compiled in, e.g.
/// `redsync@v4.17.0,go-redis@v9.21.0`.
pub fn redsync(urls: &[String]) -> Peer {
    assert!(
        !urls.is_empty(),
        "the redsync peer needs at least one redis URL"
    );
    let mut cmd = Command::new(redsync_program());
    cmd.args(urls);
    Peer::launch("redsync", cmd, GO_HINT)
}

/// A Python peer running redis-py `Lock`s on one server. Its [`Peer::client_id`] is
/// `redis-py@<version>`.
pub fn redis_py(url: &str) -> Peer {
    let mut cmd = Command::new(redis_py_program());
    cmd.arg(url);
    Peer::launch("redis-py", cmd, PYTHON_HINT)
}

/// The redsync peer's program (built on first use); its `history` mode is the
/// verification harness's go-redsync worker.
pub fn redsync_program() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    built("go", &BUILT, "go", GO_HINT).join("redsyncpeer")
}

/// The redis-py peer's launcher (built on first use); its `history` mode is the
/// verification harness's redis-py worker.
pub fn redis_py_program() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    built("python", &BUILT, "python3", PYTHON_HINT).join("peer")
}

/// The number at `"key":` in a one-line JSON object from `bench` or `handoff`; `None` when
/// the key is missing or its value is `null`.
pub fn json_number(json: &str, key: &str) -> Option<f64> {
    let at = json.find(&format!("\"{key}\":"))? + key.len() + 3;
    let rest = &json[at..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    rest[..end].trim().parse().ok()
}
