//! `redmutex`: see who holds which lock, release one safely, watch locks change, check a
//! server for what locks need, run the benchmark and the contention demo.
//!
//! ```text
//! redmutex status NAME... | --scan PATTERN   [--kind KIND] [--json]
//! redmutex unlock NAME (--force | --owner ID:THREAD) [--yes]
//! redmutex run    NAME [--wait D] [--lease D] [--kind KIND] [--grace D] -- CMD [ARGS...]
//! redmutex watch  NAME... [--notify] [--sample-ms 100] [--json] | --leader NAME
//! redmutex doctor [URL] [--name NAME] [--json]
//! redmutex bench  [--quick] [--java | --no-java] [--json PATH] [--plot PATH]
//! redmutex demo   [--url URL] [--processes 2] [--clients 2] [--threads 8] [--iterations 200]
//! redmutex verify [--kinds lock,fair,rw,fenced,semaphore] [--seconds 10] [--threads 4] [--json]
//! ```
//!
//! Every command that talks to Redis takes the same connection options: `--url` (or
//! `REDMUTEX_URL`), `--cluster ADDR,...`, `--sentinel ADDR,... --master NAME`, or
//! `--redisson-yaml PATH`, plus `--user`, `--password` (or `REDMUTEX_PASSWORD`) and
//! `--timeout-ms`; see `connect.rs`. Errors are one line on stderr; exit codes are listed
//! in `fail.rs` and in `--help`. The `worker`, `hold` and `soak-worker` commands are
//! hidden helpers of the test suite; `verify-worker` and `verify-check` are the
//! verification harness's, whose runner is `redmutex-verify-run` in tests/harness
//! (`scripts/verify.sh`, `docs/verify.md`).

// The library's pieces the tool shares with it and with the test harness.
use redmutex::admin::{address, launch, names, server, slots, utc};

mod bench;
mod clock;
mod connect;
mod demo;
mod doctor;
mod fail;
mod hold;
mod inspect;
mod leader_watch;
mod presence;
mod run;
mod sentinels;
mod shape;
mod soak;
mod status;
mod unlock;
mod verify_check;
mod verify_direct;
mod verify_op;
mod verify_progress;
mod verify_worker;
mod watch;
mod worker;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use fail::Failure;

const EXIT_CODES: &str = "\
Connecting (the same options on every command):
  --url URL                      one server (default $REDMUTEX_URL, else redis://127.0.0.1:6379/)
  --cluster ADDR,...             a Redis Cluster, by one or more seed nodes
  --sentinel ADDR,... --master NAME
                                 the master the sentinels name
  --redisson-yaml PATH           a Redisson YAML file (single, cluster or sentinel)
  --user USER, --password PASS   the data nodes' login ($REDMUTEX_PASSWORD); never printed

Exit codes:
  0  done (doctor: no check failed)
  1  runtime failure: Redis unreachable (no cluster seed or sentinel answering), a Redis
     or I/O error; or unlock refused a key that does not look like a lock (application
     data; a doubtful shape needs --kind)
  2  usage error: bad arguments, a URL that does not parse, a kind that does not fit, a
     master name no sentinel monitors, a --cluster seed that is no cluster node, a
     --sentinel address that is no sentinel, a YAML file that is missing or wrong
  3  doctor: at least one check failed; verify: at least one violation
  4  unlock: nothing released (not confirmed, not held, or the owner holds nothing)

run exits with the command's own status (128+N when signal N ended it), or:
  123  the lock was lost (or --lease ran out) while the command ran: the command got
       SIGTERM, and SIGKILL after --grace (or it had finished when the loss was found)
  124  the lock was not acquired within --wait; the command did not run
  125  run itself failed: bad arguments, Redis unreachable, a Redis error
  126  the command could not be started; 127: the command was not found";

/// Operate redmutex and Redisson locks on Redis.
#[derive(Debug, Parser)]
#[command(name = "redmutex", version, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Status(status::StatusArgs),
    Unlock(unlock::UnlockArgs),
    Run(run::RunArgs),
    Watch(watch::WatchArgs),
    Doctor(doctor::DoctorArgs),
    Bench(bench::BenchArgs),
    Demo(demo::DemoArgs),
    Verify(verify_op::VerifyArgs),
    #[command(hide = true)]
    Worker(worker::WorkerArgs),
    #[command(hide = true)]
    Hold(hold::HoldArgs),
    #[command(hide = true, name = "soak-worker")]
    SoakWorker(soak::SoakArgs),
    #[command(hide = true, name = "verify-worker")]
    VerifyWorker(verify_worker::VerifyWorkerArgs),
    #[command(hide = true, name = "verify-check")]
    VerifyCheck(verify_check::VerifyCheckArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with 0; usage errors are clap's, code 2, but
            // `run`'s own: 2 is a code its commands exit with.
            let _ = e.print();
            let usage = if std::env::args().nth(1).as_deref() == Some("run") {
                run::OWN_FAILURE
            } else {
                fail::USAGE
            };
            return ExitCode::from(if e.use_stderr() { usage } else { 0 });
        }
    };
    let helper = |r: Result<(), String>| r.map_err(Failure::runtime);
    let result = match &cli.command {
        Command::Status(args) => status::run(args),
        Command::Unlock(args) => unlock::run(args),
        Command::Run(args) => run::run(args),
        Command::Watch(args) => watch::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Demo(args) => helper(demo::run(args)),
        Command::Verify(args) => verify_op::run(args),
        Command::Worker(args) => helper(worker::run(args)),
        Command::Hold(args) => helper(hold::run(args)),
        Command::SoakWorker(args) => helper(soak::run(args)),
        Command::VerifyWorker(args) => helper(verify_worker::run(args)),
        Command::VerifyCheck(args) => helper(verify_check::run(args)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(),
    }
}
