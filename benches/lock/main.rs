//! Lock benchmarks against a throwaway `redis-server`: redmutex side by side with the
//! physical floor, Java Redisson and a polling crate (`redlock`), all in one run and
//! against the same server, reported as absolute figures and ratios.
//!
//! ```text
//! cargo bench --bench lock                                  # full run (a few minutes)
//! cargo bench --bench lock -- --quick                       # a few seconds, for CI
//! cargo bench --bench lock -- --json out.json --plot h.png  # also write JSON and a plot
//! ```
//!
//! Flags: `--no-cluster` (skip the cluster rows, which start a local 3 + 3 Redis
//! Cluster with `redis-cli`), `--no-sentinel` (skip the sentinel rows, which start a
//! local master, 2 replicas and 3 sentinels), `--only-topology` (diagnostics: only the
//! cluster and sentinel sections), `--quick` (short spans, 1,000 watchdog locks, no Java
//! unless `--java`), `--java` / `--no-java` (Java Redisson, and the string-token
//! lock's Go and Python peers), `--only-uncontended` / `--only-string` / `--only-fairness` / `--only-rtt` (diagnostics:
//! one section alone), `--only-scaling` / `--no-scaling` (the scaling sweep alone, or
//! without it; quick mode sweeps only up to 1,000), `--only-burst` (diagnostics: the
//! sweep's burst of new waiters alone), `--only-server-row` (the server matrix's row for
//! the server `REDMUTEX_SERVER` names: the uncontended cycle over that server's floor
//! and the two-thread hand-off p50 in its round trips), `--json PATH` (all figures; the hand-off samples go to
//! `PATH` with the extension `.samples.csv`, the table to `.table.md`), `--plot PATH`
//! (a PNG of the hand-off latency distributions, drawn by `scripts/plot_bench.py`).
//!
//! Each phase starts with a line `progress: <done>/<total> <phase>` on stderr, which
//! `redmutex bench` turns into a progress bar.
//!
//! Ratios in the table are time ratios: redmutex's time per operation divided by the
//! other's, so below 1 means redmutex is faster. Against the floor, latencies are given in
//! floor round trips (one acquire-shaped `EVALSHA` on one connection).

mod alloc;
mod cluster;
mod fairness;
mod family;
mod figures;
mod handoff;
mod measure;
mod overhead;
mod recorder;
mod redisson;
mod report;
mod rtt;
mod scaling;
mod sentinel;
mod server;
mod settings;
mod string_lock;
mod uncontended;

// The test harness's cluster, sentinel set and string-token peers, for those rows.
use redmutex_harness as support;
use redmutex_harness::{peer, token_peer};

use std::sync::atomic::{AtomicUsize, Ordering};

use figures::Figures;
use server::Server;
use settings::Settings;

/// Thread counts of the hand-off scenarios.
pub(crate) const THREADS: [usize; 3] = [2, 4, 16];
pub(crate) const POLLING_CRATE: &str = "redlock 2.0.0";
pub(crate) const REDISSON_VERSION: &str = "4.7.0";

/// Phases started so far, and how many the run has.
static DONE: AtomicUsize = AtomicUsize::new(0);
static TOTAL: AtomicUsize = AtomicUsize::new(0);

/// Announces the next phase on stderr (see the module docs).
pub(crate) fn phase(name: &str) {
    let done = DONE.fetch_add(1, Ordering::Relaxed);
    eprintln!("progress: {done}/{} {name}", TOTAL.load(Ordering::Relaxed));
}

fn main() {
    if fairness::child() {
        return;
    }
    let settings = Settings::parse();
    // watchdog, idle, uncontended, 3 + 3 hand-offs, subscription, fairness, string lock (+ its
    // peers), Java, report
    let topology_phases = 3 * usize::from(settings.cluster)
        + usize::from(settings.cluster && settings.java)
        + sentinel::phases(&settings);
    let phases = if settings.only_uncontended {
        1
    } else if settings.only_server_row {
        2
    } else if settings.only_topology {
        topology_phases + 1
    } else {
        3 + 2 * THREADS.len()
            + 1
            + 1
            + 1
            + 4 * usize::from(settings.java)
            + rtt::RTTS_US.len()
            + topology_phases
            + 2 * usize::from(settings.scaling)
            + 1
    };
    TOTAL.store(phases, Ordering::Relaxed);
    let server = Server::start();
    if settings.only_scaling {
        TOTAL.store(2, Ordering::Relaxed);
        let mut fig = Figures::default();
        scaling::scaling(&server, &settings, &mut fig);
        println!("{}", scaling::table(&fig));
        if let Some(path) = &settings.json {
            std::fs::write(path, fig.to_json()).unwrap();
        }
        return;
    }
    if settings.only_fairness {
        let mut fig = Figures::default();
        fairness::two_process_shares(&server, &settings, &mut fig);
        if settings.java {
            fairness::java_rust_shares(&server, &settings, &mut fig);
        }
        println!("{}", fig.to_json());
        return;
    }
    if settings.only_rtt {
        TOTAL.store(rtt::RTTS_US.len(), Ordering::Relaxed);
        let mut fig = Figures::default();
        rtt::rtt(&server, &settings, &mut fig);
        println!("{}", fig.to_json());
        return;
    }
    if settings.only_string {
        let mut fig = Figures::default();
        string_lock::string_lock(&server, &server.client(), &settings, &mut fig);
        println!("{}", fig.to_json());
        return;
    }
    let mut fig = Figures::default();
    let mut samples = Vec::new();
    fig.text("mode", if settings.quick { "quick" } else { "full" });
    fig.text("polling_crate", POLLING_CRATE);
    fig.text("redisson_version", REDISSON_VERSION);
    fig.set(
        "cpus",
        std::thread::available_parallelism().map_or(0, |n| n.get()) as f64,
    );

    if settings.only_topology {
        topology(&settings, &mut fig, &mut samples);
        report(&settings, &mut fig, &samples);
        return;
    }

    // First, while the heap is fresh: the watchdog's cost and memory per held lock.
    if !settings.only_uncontended {
        phase("watchdog and memory");
        overhead::watchdog_cost(&server, &settings, &mut fig);

        // An idle client (holding nothing): commands sent in a quiet period.
        phase("idle client");
        overhead::idle_client(&server, &settings, &mut fig);
    }

    phase("floors and redmutex uncontended, interleaved");
    let client = server.client();
    uncontended::floors(&server, &settings, &mut fig);
    uncontended::uncontended(&server, &client, &settings, &mut fig);
    if settings.only_uncontended {
        DONE.store(phases, Ordering::Relaxed);
        println!("{}", fig.to_json());
        return;
    }
    if settings.only_server_row {
        // The matrix row: the cycle against this server's own floor, the hand-off in
        // this server's own round trips.
        phase("redmutex hand-off, 2 threads");
        let lat = handoff::redmutex_handoff(&client, 2, settings.handoff_span());
        fig.set(
            "handoff_2t_p50_rtt",
            measure::percentile(&lat.handoff, 0.5) / fig.get("floor_rtt_us"),
        );
        fig.text("server", support::server_name());
        DONE.store(phases, Ordering::Relaxed);
        println!("{}", fig.to_json());
        if let Some(path) = &settings.json {
            std::fs::write(path, fig.to_json()).unwrap();
        }
        return;
    }

    eprintln!("lock family: fenced lock, fenced write, RedLock over 5 servers...");
    family::fenced(&server, &client, &settings, &mut fig);
    family::redlock(&client, &settings, &mut fig);
    eprintln!("metrics: the cycle with a recorder installed...");
    recorder::recorder_cost(&client, &settings, &mut fig);
    string_lock::string_lock(&server, &client, &settings, &mut fig);

    handoff::handoffs(&server, &client, &settings, &mut fig, &mut samples);
    fairness::two_process_shares(&server, &settings, &mut fig);

    if settings.java {
        phase(&format!("Java Redisson {REDISSON_VERSION}"));
        if let Some(mut java) = redisson::redisson(&server, &settings, &mut fig, &mut samples) {
            fairness::handoff_rounds(&client, &mut java, &settings, &mut fig);
        }
        fairness::java_rust_shares(&server, &settings, &mut fig);
    } else {
        eprintln!("Java Redisson skipped (quick mode; pass --java to include it)");
    }
    rtt::rtt(&server, &settings, &mut fig);

    drop(client);
    topology(&settings, &mut fig, &mut samples);
    if settings.scaling {
        scaling::scaling(&server, &settings, &mut fig);
    }
    report(&settings, &mut fig, &samples);
}

/// The cluster and sentinel sections, each unless its `--no-` flag says otherwise.
fn topology(settings: &Settings, fig: &mut Figures, samples: &mut Vec<figures::Sample>) {
    if settings.cluster {
        cluster::cluster(settings, fig, samples);
    }
    if settings.sentinel {
        sentinel::sentinel(settings, fig, samples);
    }
}

/// Ratios, the table on stdout, and the files.
fn report(settings: &Settings, fig: &mut Figures, samples: &[figures::Sample]) {
    phase("report");
    report::ratios(fig);
    let table = report::table(fig) + &scaling::table(fig);
    println!("{table}");
    report::write_files(settings, fig, samples, &table);
}
