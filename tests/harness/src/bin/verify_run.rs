//! `redmutex-verify-run`: the verification harness's runner (see `docs/verify.md` and the
//! `redmutex_harness::verify_run` module). Exits 1 on any violation, 2 when the run
//! itself failed.

use clap::Parser;
use redmutex_harness::verify_run::{Options, run};

/// Runs the history-checked verification matrix and checks its history.
#[derive(Debug, Parser)]
#[command(name = "redmutex-verify-run")]
struct Cli {
    #[command(flatten)]
    options: Options,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match run(&cli.options) {
        Ok(0) => std::process::ExitCode::SUCCESS,
        Ok(n) => {
            eprintln!(
                "redmutex-verify-run: {n} violations; see {}",
                cli.options.out.join("report.md").display()
            );
            std::process::ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("redmutex-verify-run: {e}");
            std::process::ExitCode::from(2)
        }
    }
}
