//! How a command fails: one line on stderr and a documented exit code.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | done (`doctor`: nothing failed, warnings allowed) |
//! | 1 | a runtime failure: Redis unreachable (no cluster seed, no sentinel answers), a Redis error, an I/O error; or a key refused because it has no lock's shape (`unlock` of application data, of a doubtful shape without `--kind`) |
//! | 2 | a usage error: bad arguments, a URL that does not parse, a kind that does not fit; options that name the wrong thing (a master name no sentinel monitors, a `--cluster` seed that is no cluster node, a `--sentinel` address that is no sentinel, a missing or bad Redisson YAML file) |
//! | 3 | `doctor` found at least one check that fails |
//! | 4 | `unlock` did nothing: not confirmed, nothing held, or the owner holds nothing |
//!
//! `run` passes its command's exit status through, so its own outcomes take codes a
//! command rarely uses (123 lost, 124 not acquired, 125 its own failure, usage errors
//! included, 126 and 127 for a command that cannot start); see `run.rs`.

use std::fmt;
use std::process::ExitCode;

/// Exit code of a runtime failure.
pub(crate) const RUNTIME: u8 = 1;
/// Exit code of a usage error (clap uses it too).
pub(crate) const USAGE: u8 = 2;
/// Exit code of a `doctor` run with a failing check.
pub(crate) const DOCTOR_FAILED: u8 = 3;
/// Exit code of an `unlock` that released nothing.
pub(crate) const NOTHING_DONE: u8 = 4;

/// A failed command: what to print, and the exit code.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: u8,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn runtime(message: impl Into<String>) -> Self {
        Self {
            code: RUNTIME,
            message: message.into(),
        }
    }

    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Self {
            code: USAGE,
            message: message.into(),
        }
    }

    /// A key refused because it does not look like a lock: exit 1, as the operator's
    /// command failed on what it found rather than on how it was asked.
    pub(crate) fn not_a_lock(message: impl Into<String>) -> Self {
        Self::runtime(message)
    }

    pub(crate) fn nothing_done(message: impl Into<String>) -> Self {
        Self {
            code: NOTHING_DONE,
            message: message.into(),
        }
    }

    /// A Redis error during a command.
    pub(crate) fn redis(err: redis::RedisError) -> Self {
        Self::runtime(format!("redis: {}", one_line(&err.to_string())))
    }

    /// A Redis error while working on `what`.
    pub(crate) fn redis_on(what: &str, err: redis::RedisError) -> Self {
        Self::runtime(format!("{what}: redis: {}", one_line(&err.to_string())))
    }

    /// Prints the message and returns the exit code.
    pub(crate) fn report(&self) -> ExitCode {
        if !self.message.is_empty() {
            eprintln!("redmutex: {}", one_line(&self.message));
        }
        ExitCode::from(self.code)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<std::io::Error> for Failure {
    fn from(err: std::io::Error) -> Self {
        Self::runtime(err.to_string())
    }
}

impl From<redis::RedisError> for Failure {
    fn from(err: redis::RedisError) -> Self {
        Self::redis(err)
    }
}

/// Errors are one line: newlines inside (a server's multi-line reply) become spaces.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
