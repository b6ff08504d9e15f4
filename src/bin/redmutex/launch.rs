//! Starting `redmutex worker` processes and reading the one line each prints.
//!
//! The demo starts workers here; the multi-process tests include this file with
//! `#[path]` (from `tests/support`), so both spell the command line the same way.

use std::path::Path;
use std::process::{Command, Stdio};

/// The options of one `redmutex worker` process (see `worker.rs`).
pub(crate) struct Worker<'a> {
    pub(crate) url: &'a str,
    pub(crate) lock: &'a str,
    pub(crate) counter: &'a str,
    pub(crate) clients: u64,
    pub(crate) threads: u64,
    pub(crate) iterations: u64,
}

impl Worker<'_> {
    /// The command that runs this worker with the `redmutex` binary at `exe`, its report
    /// line piped back to the caller.
    pub(crate) fn command(&self, exe: &Path) -> Command {
        let mut command = Command::new(exe);
        command
            .args(["worker", "--url", self.url, "--lock", self.lock])
            .args(["--counter", self.counter])
            .args(["--clients", &self.clients.to_string()])
            .args(["--threads", &self.threads.to_string()])
            .args(["--iterations", &self.iterations.to_string()])
            .stdout(Stdio::piped());
        command
    }
}

/// The number after `name=` in a worker's `key=value ...` report line.
pub(crate) fn report_field(line: &str, name: &str) -> Option<u64> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
}
