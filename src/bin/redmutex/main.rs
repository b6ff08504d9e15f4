//! `redmutex`: a contention demo, and the worker processes that the demo and the
//! multi-process tests start.
//!
//! ```text
//! redmutex demo   [--url URL] [--processes 2] [--clients 2] [--threads 8] [--iterations 200]
//! redmutex worker --url URL --lock NAME --counter KEY [--clients 2] [--threads 8] [--iterations 200]
//! redmutex hold   --url URL --lock NAME [--lease-ms N] [--watchdog-ms N] [--log KEY | --fenced-counter KEY] [--kind token]
//! redmutex soak-worker --url URL --direct URL --prefix P [--clients N] [--threads N] [--seconds N]
//! ```
//!
//! Without `--url` the demo starts a throwaway `redis-server` on a free loopback port.

mod args;
mod demo;
mod hold;
mod launch;
mod server;
mod soak;
mod worker;

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut argv = std::env::args().skip(1);
    let command = argv.next().unwrap_or_else(|| "demo".to_owned());
    let args = match args::Args::parse(argv) {
        Ok(args) => args,
        Err(e) => return usage(&e),
    };
    let result = match command.as_str() {
        "demo" => demo::run(&args),
        "worker" => worker::run(&args),
        "hold" => hold::run(&args),
        "soak-worker" => soak::run(&args),
        "help" | "--help" | "-h" => return usage(""),
        other => return usage(&format!("unknown command `{other}`")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("redmutex: {e}");
            ExitCode::FAILURE
        }
    }
}

fn usage(problem: &str) -> ExitCode {
    if !problem.is_empty() {
        eprintln!("redmutex: {problem}");
    }
    eprintln!(
        "usage:\n  redmutex demo   [--url URL] [--processes N] [--clients N] [--threads N] [--iterations N]\n  \
         redmutex worker --url URL --lock NAME --counter KEY [--clients N] [--threads N] [--iterations N]\n  \
         redmutex hold   --url URL --lock NAME [--lease-ms N] [--watchdog-ms N] [--log KEY | --fenced-counter KEY] [--kind token]\n  \
         redmutex soak-worker --url URL --direct URL --prefix P [--clients N] [--threads N] [--seconds N]"
    );
    if problem.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    }
}
