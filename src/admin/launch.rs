//! Starting `redmutex worker` processes and reading the one line each prints.
//!
//! The demo starts workers through it, and so do the multi-process tests (through the test
//! harness), so both spell the command line the same way.

use std::path::Path;
use std::process::{Command, Stdio};

/// The options of one `redmutex worker` process (see `worker.rs`).
pub struct Worker<'a> {
    pub url: &'a str,
    pub lock: &'a str,
    pub counter: &'a str,
    pub clients: u64,
    pub threads: u64,
    pub iterations: u64,
}

impl Worker<'_> {
    /// The command that runs this worker with the `redmutex` binary at `exe`, its report
    /// line piped back to the caller.
    pub fn command(&self, exe: &Path) -> Command {
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
pub fn report_field(line: &str, name: &str) -> Option<u64> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
}
