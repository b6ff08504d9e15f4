//! `redmutex bench`: the benchmark of `benches/lock`, run through `cargo bench` with a
//! progress bar.
//!
//! The benchmark is not compiled into this binary: its baselines are Java Redisson
//! (built with Maven from `tests/interop`) and the `redlock` crate (a dev-dependency), and
//! every figure is a ratio against a baseline measured in the same run. A copy in the
//! binary without them would be a second benchmark whose numbers mean less. So this
//! command needs a source checkout, runs `cargo bench --bench lock -- <flags>` there, and
//! turns the benchmark's `progress: <done>/<total> <phase>` lines into a bar (shown only
//! on a terminal; elsewhere the lines pass through as they are).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use indicatif::{ProgressBar, ProgressStyle};

use crate::fail::Failure;

/// Run the lock benchmark with a progress bar
///
/// redmutex against the round-trip floor, Java Redisson and a polling crate, through
/// `cargo bench --bench lock` in a source checkout of redmutex.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {
    /// A short run (seconds, without Java unless --java).
    #[arg(long)]
    quick: bool,
    /// Include Java Redisson in a quick run.
    #[arg(long, conflicts_with = "no_java")]
    java: bool,
    /// Leave Java Redisson out of a full run.
    #[arg(long)]
    no_java: bool,
    /// Write every figure as JSON to this file (the table and samples beside it).
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Draw the hand-off latency distributions into this PNG.
    #[arg(long, value_name = "PATH")]
    plot: Option<PathBuf>,
    /// The redmutex source checkout (default: the current directory, else the one this
    /// binary was built from).
    #[arg(long, value_name = "DIR")]
    source: Option<PathBuf>,
}

pub(crate) fn run(args: &BenchArgs) -> Result<(), Failure> {
    let source = source_dir(args.source.as_deref())?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(&cargo);
    command
        .current_dir(&source)
        // The scaling section sizes the futex hash as the library advises, which
        // takes the opt-in `futex-hash` feature.
        .args(["bench", "--bench", "lock", "--features", "futex-hash", "--"])
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped());
    if args.quick {
        command.arg("--quick");
    }
    if args.java {
        command.arg("--java");
    }
    if args.no_java {
        command.arg("--no-java");
    }
    for (flag, path) in [("--json", &args.json), ("--plot", &args.plot)] {
        if let Some(path) = path {
            command.arg(flag).arg(absolute(path)?);
        }
    }
    let mut child = command.spawn().map_err(|e| {
        Failure::runtime(format!(
            "cannot run `{}` in {}: {e}",
            Path::new(&cargo).display(),
            source.display()
        ))
    })?;
    let bar = ProgressBar::new(1);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .map_err(|e| Failure::runtime(e.to_string()))?
            .progress_chars("=> "),
    );
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            match parse_progress(&line) {
                Some((done, total, phase)) => {
                    bar.set_length(total as u64);
                    bar.set_position(done as u64);
                    bar.set_message(phase.to_owned());
                    if bar.is_hidden() {
                        eprintln!("{line}");
                    }
                }
                None if bar.is_hidden() => eprintln!("{line}"),
                None => bar.println(&line),
            }
        }
    }
    let status = child.wait()?;
    if status.success() {
        bar.finish_with_message("done");
        Ok(())
    } else {
        bar.abandon();
        Err(Failure::runtime(format!("the benchmark failed ({status})")))
    }
}

/// `progress: 3/11 redmutex hand-off` → (3, 11, "redmutex hand-off").
fn parse_progress(line: &str) -> Option<(usize, usize, &str)> {
    let rest = line.strip_prefix("progress: ")?;
    let (counts, phase) = rest.split_once(' ').unwrap_or((rest, ""));
    let (done, total) = counts.split_once('/')?;
    Some((done.parse().ok()?, total.parse().ok()?, phase))
}

/// The checkout to run in: one with `benches/lock`.
fn source_dir(given: Option<&Path>) -> Result<PathBuf, Failure> {
    let is_checkout = |dir: &Path| dir.join("benches/lock/main.rs").is_file();
    if let Some(dir) = given {
        return if is_checkout(dir) {
            Ok(dir.to_owned())
        } else {
            Err(Failure::usage(format!(
                "{} is not a redmutex source checkout (no benches/lock/main.rs)",
                dir.display()
            )))
        };
    }
    let here = std::env::current_dir()?;
    let built_from = Path::new(env!("CARGO_MANIFEST_DIR"));
    [here.as_path(), built_from]
        .into_iter()
        .find(|d| is_checkout(d))
        .map(Path::to_owned)
        .ok_or_else(|| {
            Failure::usage(
                "the benchmark runs from a source checkout of redmutex (it compares against \
                 Java Redisson and a Rust crate that are not in this binary): run this in \
                 one, or pass --source DIR",
            )
        })
}

fn absolute(path: &Path) -> Result<PathBuf, Failure> {
    Ok(if path.is_absolute() {
        path.to_owned()
    } else {
        std::env::current_dir()?.join(path)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_lines_parse() {
        assert_eq!(
            parse_progress("progress: 3/11 redmutex hand-off, 4 threads"),
            Some((3, 11, "redmutex hand-off, 4 threads"))
        );
        assert_eq!(parse_progress("redis-server pid 7"), None);
        assert_eq!(parse_progress("progress: x/11 a"), None);
    }
}
