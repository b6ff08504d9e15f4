//! The command-line flags of a run and the measurement spans they imply.

use std::path::PathBuf;
use std::time::Duration;

/// What a run measures and writes (see the flags in `main.rs`).
pub(crate) struct Settings {
    pub(crate) quick: bool,
    /// Diagnostics: only the interleaved floors and uncontended rounds.
    pub(crate) only_uncontended: bool,
    /// `--only-server-row`: the server matrix's row (`REDMUTEX_SERVER`): the floors, the
    /// uncontended cycle and the two-thread hand-off, as JSON.
    pub(crate) only_server_row: bool,
    /// Diagnostics: only the string-token lock's figures (with its peers unless `--no-java`).
    pub(crate) only_string: bool,
    /// `--only-fairness`: the two fairness scenarios (Rust against Rust, and against a
    /// Redisson process when Java is on), their figures as JSON.
    pub(crate) only_fairness: bool,
    /// `--only-rtt`: the rows behind an emulated round trip (`rtt.rs`), as JSON.
    pub(crate) only_rtt: bool,
    /// Only the scaling sweep (`--only-scaling`); `--no-scaling` skips it.
    pub(crate) only_scaling: bool,
    /// Diagnostics: only the scaling sweep's burst (`--only-burst`).
    pub(crate) only_burst: bool,
    pub(crate) scaling: bool,
    pub(crate) java: bool,
    /// The cluster rows (a local 3 + 3 cluster); `--no-cluster` skips them.
    pub(crate) cluster: bool,
    /// The sentinel rows (a local 1 + 2 + 3 sentinel set); `--no-sentinel` skips them.
    pub(crate) sentinel: bool,
    /// Diagnostics: only the cluster and sentinel sections.
    pub(crate) only_topology: bool,
    pub(crate) json: Option<PathBuf>,
    pub(crate) plot: Option<PathBuf>,
}

impl Settings {
    pub(crate) fn parse() -> Self {
        let mut args = std::env::args().skip(1);
        let mut quick = false;
        let mut java = None;
        let mut json = None;
        let mut plot = None;
        let mut only_uncontended = false;
        let mut only_server_row = false;
        let mut only_string = false;
        let mut only_fairness = false;
        let mut only_rtt = false;
        let mut cluster = true;
        let mut sentinel = true;
        let mut only_topology = false;
        let mut only_scaling = false;
        let mut only_burst = false;
        let mut scaling = true;
        while let Some(a) = args.next() {
            match a.as_str() {
                "--quick" => quick = true,
                "--java" => java = Some(true),
                "--no-java" => java = Some(false),
                "--json" => json = args.next().map(PathBuf::from),
                "--plot" => plot = args.next().map(PathBuf::from),
                "--only-uncontended" => only_uncontended = true,
                "--only-server-row" => only_server_row = true,
                "--only-string" => only_string = true,
                "--only-fairness" => only_fairness = true,
                "--only-rtt" => only_rtt = true,
                "--no-cluster" => cluster = false,
                "--no-sentinel" => sentinel = false,
                "--only-topology" => only_topology = true,
                "--only-scaling" => only_scaling = true,
                "--only-burst" => {
                    only_scaling = true;
                    only_burst = true;
                }
                "--no-scaling" => scaling = false,
                _ => {} // cargo passes --bench
            }
        }
        Self {
            quick,
            only_uncontended,
            only_server_row,
            only_string,
            only_fairness,
            only_rtt,
            only_scaling,
            only_burst,
            scaling,
            java: java.unwrap_or(!quick),
            cluster,
            sentinel,
            only_topology,
            json,
            plot,
        }
    }

    /// Throughput measurements.
    pub(crate) fn span(&self) -> Duration {
        if self.quick {
            Duration::from_millis(300)
        } else {
            Duration::from_secs(3)
        }
    }

    /// Hand-off measurements (more samples for the tail).
    pub(crate) fn handoff_span(&self) -> Duration {
        if self.quick {
            Duration::from_millis(300)
        } else {
            Duration::from_secs(5)
        }
    }

    /// The polling crate hands off about once per retry delay: it needs longer.
    pub(crate) fn polling_span(&self) -> Duration {
        if self.quick {
            Duration::from_millis(300)
        } else {
            Duration::from_secs(10)
        }
    }

    /// Measurement time of each Java scenario.
    pub(crate) fn java_ms(&self) -> u64 {
        if self.quick { 1_000 } else { 5_000 }
    }

    /// Interleaved hand-off rounds per thread count (redmutex, then Redisson, each time).
    pub(crate) fn rounds(&self) -> usize {
        if self.quick { 1 } else { 5 }
    }

    /// The span of one side of one hand-off round.
    pub(crate) fn round_span(&self) -> Duration {
        if self.quick {
            Duration::from_millis(300)
        } else {
            Duration::from_secs(2)
        }
    }

    /// The Java warm-up, shared by all scenarios.
    pub(crate) fn java_warmup_ms(&self) -> u64 {
        if self.quick { 2_000 } else { 20_000 }
    }
}
