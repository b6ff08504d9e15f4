//! The run's outputs: ratio figures, the Markdown table with its targets, the samples
//! CSV and the plot.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use crate::figures::{Figures, Sample};
use crate::settings::Settings;
use crate::{POLLING_CRATE, REDISSON_VERSION, THREADS};

/// Writes what the flags ask for: the JSON figures with the table beside them, the
/// hand-off samples, the plot. The samples file's path becomes a figure itself.
pub(crate) fn write_files(settings: &Settings, fig: &mut Figures, samples: &[Sample], table: &str) {
    let samples_path = settings
        .json
        .as_ref()
        .or(settings.plot.as_ref())
        .map(|p| p.with_extension("samples.csv"));
    for path in [&settings.json, &settings.plot].into_iter().flatten() {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let _ = std::fs::create_dir_all(dir);
        }
    }
    if let Some(path) = &samples_path {
        write_samples(path, samples);
        fig.text("samples_file", &path.display().to_string());
    }
    if let Some(path) = &settings.json {
        std::fs::write(path, fig.to_json()).unwrap();
        std::fs::write(path.with_extension("table.md"), table).unwrap();
        println!("wrote {}", path.display());
    }
    if let (Some(png), Some(csv)) = (&settings.plot, &samples_path) {
        plot(csv, png, fig);
    }
}

fn write_samples(path: &Path, samples: &[Sample]) {
    let mut out = String::from("library,threads,metric,us\n");
    for (library, threads, metric, values) in samples {
        for v in values {
            let _ = writeln!(out, "{library},{threads},{metric},{v:.3}");
        }
    }
    std::fs::write(path, out).unwrap();
}

fn plot(csv: &Path, png: &Path, fig: &Figures) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/plot_bench.py");
    let title = format!(
        "hand-off latency: redmutex vs Redisson {REDISSON_VERSION} vs {POLLING_CRATE} \
         (floor RTT {:.0} µs, {} cpus)",
        fig.get("floor_rtt_us"),
        fig.get("cpus")
    );
    match Command::new("python3")
        .arg(&script)
        .arg(csv)
        .arg(png)
        .arg(title)
        .arg(format!("{}", fig.get("floor_rtt_us")))
        .status()
    {
        Ok(s) if s.success() => println!("wrote {}", png.display()),
        Ok(s) => eprintln!("plot failed ({s}); is matplotlib installed? (pip install matplotlib)"),
        Err(e) => eprintln!("plot not drawn: cannot run python3: {e}"),
    }
}

/// Ratio figures: redmutex time ÷ other time (below 1: redmutex is faster).
pub(crate) fn ratios(fig: &mut Figures) {
    let rate_ratio = |fig: &Figures, other: &str, ours: &str| fig.get(other) / fig.get(ours);
    let r = rate_ratio(
        fig,
        "redisson_uncontended_1t_cycles_per_sec",
        "uncontended_1t_cycles_per_sec",
    );
    fig.set("ratio_uncontended_1t_over_redisson", r);
    let r = rate_ratio(
        fig,
        "redisson_uncontended_16t_cycles_per_sec",
        "uncontended_16t_cycles_per_sec",
    );
    fig.set("ratio_uncontended_16t_over_redisson", r);
    let r = fig.get("cpu_us_per_cycle_redmutex") / fig.get("cpu_us_per_cycle_redisson");
    fig.set("ratio_cpu_cycle_over_redisson", r);
    let rtt = fig.get("floor_rtt_us");
    for t in THREADS {
        for m in ["", "_takeover"] {
            for p in ["p50", "p99", "p999"] {
                let ours = fig.get(&format!("handoff_{t}t{m}_{p}_us"));
                let key = format!("handoff_{t}t{m}_{p}");
                fig.set(&format!("ratio_{key}_over_rtt"), ours / rtt);
                let other = fig.get(&format!("redisson_handoff_{t}t{m}_{p}_us"));
                fig.set(&format!("ratio_{key}_over_redisson"), ours / other);
                let other = fig.get(&format!("polling_handoff_{t}t{m}_{p}_us"));
                fig.set(&format!("ratio_{key}_over_polling"), ours / other);
            }
        }
    }
}

fn num(v: f64) -> String {
    if !v.is_finite() {
        "—".to_owned()
    } else if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn ratio(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.2}")
    } else {
        "—".to_owned()
    }
}

/// A column with nothing to compare.
const NONE: (f64, f64) = (f64::NAN, f64::NAN);

/// The Markdown table of the run, with the targets below it.
pub(crate) fn table(fig: &Figures) -> String {
    let mut t = String::new();
    t.push_str(
        "| measure | unit | redmutex | floor | redmutex/floor | Redisson | redmutex/Redisson | redlock (polling) | redmutex/redlock |\n",
    );
    t.push_str("|---|---|--:|--:|--:|--:|--:|--:|--:|\n");
    uncontended_rows(&mut t, fig);
    handoff_rows(&mut t, fig);
    overhead_rows(&mut t, fig);
    fairness_rows(&mut t, fig);
    rtt_rows(&mut t, fig);
    cluster_rows(&mut t, fig);
    sentinel_rows(&mut t, fig);
    summary(&mut t, fig);
    sentinel_summary(&mut t, fig);
    t.push_str("\n| target | measured | met |\n|---|---|---|\n");
    targets(&mut t, fig);
    t
}

/// One measure: redmutex's figure, then (value, redmutex ÷ value as a time ratio) for the
/// floor, Redisson and the polling crate.
fn row(t: &mut String, label: &str, unit: &str, ours: f64, cols: [(f64, f64); 3]) {
    let _ = writeln!(
        t,
        "| {label} | {unit} | {} | {} | {} | {} | {} | {} | {} |",
        num(ours),
        num(cols[0].0),
        ratio(cols[0].1),
        num(cols[1].0),
        ratio(cols[1].1),
        num(cols[2].0),
        ratio(cols[2].1),
    );
}

fn uncontended_rows(t: &mut String, fig: &Figures) {
    let g = |k: &str| fig.get(k);
    let c1 = g("uncontended_1t_cycles_per_sec");
    row(
        t,
        "uncontended lock+unlock, 1 thread, 1 key (floor: 2 EVALSHA RTT)",
        "cycles/s",
        c1,
        [
            (
                g("floor_evalsha_per_sec") / 2.0,
                g("uncontended_1t_cycle_over_two_evalsha"),
            ),
            (
                g("redisson_uncontended_1t_cycles_per_sec"),
                g("ratio_uncontended_1t_over_redisson"),
            ),
            NONE,
        ],
    );
    row(
        t,
        "uncontended, 1 thread (floor: raw acquire+release scripts)",
        "cycles/s",
        c1,
        [
            (
                g("floor_script_cycles_per_sec"),
                g("uncontended_1t_cycle_over_raw_scripts"),
            ),
            NONE,
            NONE,
        ],
    );
    row(
        t,
        "client CPU per uncontended cycle, 1 thread (floor: raw scripts' CPU)",
        "CPU µs",
        g("cpu_us_per_cycle_redmutex"),
        [
            (g("cpu_us_per_cycle_raw"), g("cpu_cycle_redmutex_over_raw")),
            (
                g("cpu_us_per_cycle_redisson"),
                g("ratio_cpu_cycle_over_redisson"),
            ),
            NONE,
        ],
    );
    let c16 = g("uncontended_16t_cycles_per_sec");
    row(
        t,
        "uncontended, 16 threads × 1,000 keys (floor: 16 conns, 2 EVALSHA)",
        "cycles/s",
        c16,
        [
            (
                g("floor_16t_evalsha_per_sec") / 2.0,
                g("uncontended_16t_cycle_over_two_evalsha"),
            ),
            (
                g("redisson_uncontended_16t_cycles_per_sec"),
                g("ratio_uncontended_16t_over_redisson"),
            ),
            NONE,
        ],
    );
    row(
        t,
        "uncontended, 16 threads (floor: redis-benchmark -c 16, 2 EVALSHA)",
        "cycles/s",
        c16,
        [
            (
                g("floor_redis_benchmark_evalsha_per_sec") / 2.0,
                (g("floor_redis_benchmark_evalsha_per_sec") / 2.0) / c16,
            ),
            NONE,
            NONE,
        ],
    );
    row(
        t,
        "uncontended, 16 threads (floor: 16 conns, raw scripts)",
        "cycles/s",
        c16,
        [
            (
                g("floor_16t_script_cycles_per_sec"),
                g("uncontended_16t_cycle_over_raw_scripts"),
            ),
            NONE,
            NONE,
        ],
    );
}

fn handoff_rows(t: &mut String, fig: &Figures) {
    let g = |k: &str| fig.get(k);
    for threads in THREADS {
        let key = format!("handoff_{threads}t_per_sec");
        let ours = g(&key);
        row(
            t,
            &format!("hand-offs per second, {threads} threads (lock changing threads)"),
            "/s",
            ours,
            [
                NONE,
                (
                    g(&format!("redisson_{key}")),
                    g(&format!("redisson_{key}")) / ours,
                ),
                (
                    g(&format!("polling_{key}")),
                    g(&format!("polling_{key}")) / ours,
                ),
            ],
        );
    }
    let rtt = g("floor_rtt_us");
    for (m, what) in [
        ("", "hand-off"),
        ("_takeover", "takeover (first unlock while waiting → holds)"),
    ] {
        for threads in THREADS {
            for (p, pl) in [("p50", "p50"), ("p99", "p99"), ("p999", "p99.9")] {
                let key = format!("handoff_{threads}t{m}_{p}");
                row(
                    t,
                    &format!("{what} {pl}, {threads} threads (floor: 1 RTT)"),
                    "µs",
                    g(&format!("{key}_us")),
                    [
                        (rtt, g(&format!("ratio_{key}_over_rtt"))),
                        (
                            g(&format!("redisson_{key}_us")),
                            g(&format!("ratio_{key}_over_redisson")),
                        ),
                        (
                            g(&format!("polling_{key}_us")),
                            g(&format!("ratio_{key}_over_polling")),
                        ),
                    ],
                );
            }
        }
    }
}

fn overhead_rows(t: &mut String, fig: &Figures) {
    let g = |k: &str| fig.get(k);
    let wd = g("watchdog_locks");
    row(
        t,
        &format!(
            "watchdog: renewal EVALs per period ({:.0} ms; ticks seen every {} ms), {wd:.0} \
                 held locks (floor: locks/100)",
            g("watchdog_period_ms"),
            num(g("watchdog_tick_interval_ms")),
        ),
        "EVALs",
        g("watchdog_evals_per_period"),
        [
            (
                (wd / 100.0).ceil(),
                g("watchdog_evals_per_period") / (wd / 100.0).ceil(),
            ),
            NONE,
            NONE,
        ],
    );
    for (label, key) in [
        (
            "client memory per held lock (live heap)",
            "memory_heap_bytes_per_held_lock",
        ),
        (
            "client memory per held lock (RSS delta)",
            "memory_rss_bytes_per_held_lock",
        ),
    ] {
        row(t, label, "bytes", g(key), [NONE, NONE, NONE]);
    }
    row(
        t,
        &format!("idle client, {} s: commands sent", num(g("idle_seconds"))),
        "commands/s",
        g("idle_commands_per_sec"),
        [NONE, NONE, NONE],
    );
    let rtt = g("floor_rtt_us");
    row(
        t,
        "new subscription in effect, p50",
        "µs",
        g("subscribe_p50_us"),
        [(rtt, g("subscribe_p50_rtt")), NONE, NONE],
    );
    row(
        t,
        "new subscription in effect, p99",
        "µs",
        g("subscribe_p99_us"),
        [(rtt, g("subscribe_p99_us") / rtt), NONE, NONE],
    );
}

/// The cluster's rows, against the cluster's own floor (two script round trips on one raw
/// connection to the key's master); absent when the run skipped the cluster.
fn cluster_rows(t: &mut String, fig: &Figures) {
    let g = |k: &str| fig.get(k);
    let rtt = g("cluster_floor_rtt_us");
    if !rtt.is_finite() {
        return;
    }
    row(
        t,
        "cluster: uncontended lock+unlock, 1 thread",
        "µs/cycle",
        g("cluster_uncontended_cycle_us"),
        [
            (2.0 * rtt, g("cluster_uncontended_cycle_over_floor")),
            redisson_col(fig, "cluster_", "uncontended_cycle"),
            NONE,
        ],
    );
    // The release's WAIT (sync_releases, the default) on top of that cycle: its time
    // with the WAIT over its time without, as a ratio to the cycle without.
    let with_wait = g("cluster_sync_releases_cycle_ratio");
    row(
        t,
        "cluster: uncontended, with WAIT after each release (default) ÷ without",
        "µs/cycle",
        g("cluster_uncontended_cycle_us") * with_wait,
        [(g("cluster_uncontended_cycle_us"), with_wait), NONE, NONE],
    );
    for q in ["p50", "p99"] {
        let v = g(&format!("cluster_handoff_2t_{q}_us"));
        row(
            t,
            &format!("cluster: hand-off, 2 threads, {q}"),
            "µs",
            v,
            [
                (rtt, v / rtt),
                redisson_col(fig, "cluster_", &format!("handoff_2t_{q}")),
                NONE,
            ],
        );
    }
    row(
        t,
        &format!(
            "cluster: watchdog script calls per period, {} locks over {} shards",
            num(g("cluster_watchdog_locks")),
            num(g("cluster_watchdog_shards"))
        ),
        "calls",
        g("cluster_watchdog_evals_per_period"),
        [NONE, NONE, NONE],
    );
}

/// The Redisson column of a topology row: Redisson's `<prefix>redisson_<m>_us` and
/// redmutex's `<prefix><m>_over_redisson`.
fn redisson_col(fig: &Figures, prefix: &str, m: &str) -> (f64, f64) {
    (
        fig.get(&format!("{}{m}_us", redisson_prefix(prefix))),
        fig.get(&format!("{prefix}{m}_over_redisson")),
    )
}

/// The prefix of Redisson's figures beside redmutex's `prefix` (`cluster_` →
/// `cluster_redisson_`, `sentinel_nosync_` → `sentinel_redisson_nosync_`).
fn redisson_prefix(prefix: &str) -> String {
    match prefix.strip_suffix("nosync_") {
        Some(p) => format!("{p}redisson_nosync_"),
        None => format!("{prefix}redisson_"),
    }
}

/// The sentinel set's rows, against the floors measured on its master in the same run
/// (the raw two-script cycle; with replica sync, also that cycle plus one `WAIT`);
/// absent when the run skipped the set.
fn sentinel_rows(t: &mut String, fig: &Figures) {
    let g = |k: &str| fig.get(k);
    let rtt = g("sentinel_floor_rtt_us");
    if !rtt.is_finite() {
        return;
    }
    row(
        t,
        "sentinel: raw acquire+release with one WAIT between (floor: raw cycle)",
        "µs/cycle",
        g("sentinel_floor_wait_cycle_us"),
        [(2.0 * rtt, g("sentinel_floor_wait_over_floor")), NONE, NONE],
    );
    for (prefix, what) in [
        ("sentinel_", "replica sync on (WAIT)"),
        ("sentinel_nosync_", "replica sync off"),
    ] {
        row(
            t,
            &format!("sentinel: uncontended lock+unlock, 1 thread, {what} (floor: raw cycle)"),
            "µs/cycle",
            g(&format!("{prefix}uncontended_cycle_us")),
            [
                (
                    2.0 * rtt,
                    g(&format!("{prefix}uncontended_cycle_over_floor")),
                ),
                redisson_col(fig, prefix, "uncontended_cycle"),
                NONE,
            ],
        );
        if prefix == "sentinel_" {
            row(
                t,
                "sentinel: uncontended, replica sync on (floor: raw cycle, a WAIT after each script)",
                "µs/cycle",
                g("sentinel_uncontended_cycle_us"),
                [
                    (
                        g("sentinel_floor_wait_cycle_us"),
                        g("sentinel_uncontended_cycle_over_wait_floor"),
                    ),
                    NONE,
                    NONE,
                ],
            );
        }
        // A time ratio: Redisson's rate over ours.
        let theirs = g(&format!("{}handoff_2t_per_sec", redisson_prefix(prefix)));
        let ours = g(&format!("{prefix}handoff_2t_per_sec"));
        row(
            t,
            &format!("sentinel: hand-offs per second, 2 threads, {what}"),
            "/s",
            ours,
            [NONE, (theirs, theirs / ours), NONE],
        );
        for q in ["p50", "p99"] {
            let v = g(&format!("{prefix}handoff_2t_{q}_us"));
            row(
                t,
                &format!("sentinel: hand-off, 2 threads, {what}, {q}"),
                "µs",
                v,
                [
                    (rtt, v / rtt),
                    redisson_col(fig, prefix, &format!("handoff_2t_{q}")),
                    NONE,
                ],
            );
        }
    }
}

/// What the sentinel rows' sides sent: `WAIT`s per cycle or script call.
fn sentinel_summary(t: &mut String, fig: &Figures) {
    let g = |k: &str| fig.get(k);
    if !g("sentinel_floor_rtt_us").is_finite() {
        return;
    }
    let _ = writeln!(
        t,
        "\nSentinel: {} replicas; floor round trip {} µs (raw cycle ÷ 2). WAITs per redmutex \
         cycle: {} with replica sync on, {} off. WAITs per Redisson script call: {} by \
         default, {} with checkLockSyncedSlaves false (the flag only decides whether no \
         acknowledgement fails the call).",
        num(g("sentinel_replicas")),
        num(g("sentinel_floor_rtt_us")),
        num(g("sentinel_waits_per_cycle")),
        num(g("sentinel_nosync_waits_per_cycle")),
        num(g("sentinel_redisson_waits_per_script")),
        num(g("sentinel_redisson_nosync_waits_per_script")),
    );
}

/// The paragraph under the table: the floor's parts, the cycle's commands, the setup.
fn summary(t: &mut String, fig: &Figures) {
    let g = |k: &str| fig.get(k);
    let _ = writeln!(
        t,
        "\nFloor round trip (acquire-shaped EVALSHA, one connection): {} µs, of which {} µs \
         inside Redis; a raw acquire+release cycle spends {} µs inside Redis (release ≥ {} \
         µs). redmutex sent {} EVALSHA and {} latch DEL batches per uncontended cycle. PING {} /s; redis-benchmark \
         -c 16 EVALSHA {} /s. Redisson: {}. Polling crate: {} (default retry delay 200 \
         ms). Mode: {}.",
        num(g("floor_rtt_us")),
        num(g("server_acquire_shape_us_per_call")),
        num(g("server_script_cycle_us")),
        num(g("server_release_us_at_least")),
        num(g("uncontended_1t_evalsha_per_cycle")),
        num(g("uncontended_1t_latch_dels_per_cycle")),
        num(g("floor_ping_per_sec")),
        num(g("floor_redis_benchmark_evalsha_per_sec")),
        match fig.get_text("redisson_status") {
            Some(s) => format!("{REDISSON_VERSION} ({s})"),
            None => "not run".to_owned(),
        },
        POLLING_CRATE,
        fig.get_text("mode").unwrap_or_default(),
    );
}

/// The cluster's targets (issue 10), when the run measured the cluster.
fn cluster_targets(t: &mut String, fig: &Figures) {
    let g = |k: &str| fig.get(k);
    if !g("cluster_floor_rtt_us").is_finite() {
        return;
    }
    let v = g("cluster_uncontended_cycle_over_floor");
    target(
        t,
        "cluster: uncontended cycle ≤ 1.15 × the cluster's 2-RTT floor",
        format!("{}×", ratio(v)),
        check(v, v <= 1.15),
    );
    let v = g("cluster_handoff_2t_p50_rtt");
    target(
        t,
        "cluster: hand-off p50 ≤ 3 RTT",
        format!("{} RTT", num(v)),
        check(v, v <= 3.0),
    );
    let (v, bound) = (
        g("cluster_watchdog_evals_per_period"),
        g("cluster_watchdog_target"),
    );
    target(
        t,
        "cluster: watchdog calls per period ≤ locks/100 + shards",
        format!("{} (bound {})", num(v), num(bound)),
        check(v, v <= bound),
    );
}

/// The rows behind an emulated round trip (`rtt.rs`), in that round trip's own units.
fn rtt_rows(t: &mut String, fig: &Figures) {
    let g = |k: &str| fig.get(k);
    for rtt in crate::rtt::RTTS_US {
        let p = format!("rtt{rtt}_");
        let floor = g(&format!("{p}floor_us"));
        if !floor.is_finite() {
            continue;
        }
        let _ = writeln!(
            t,
            "| emulated {rtt} µs RTT (measured {}): uncontended cycle / hand-off p50, 2 threads, in RTT; redmutex vs Redisson | RTT | {} / {} | | | {} / {} | | | |",
            num(floor),
            ratio(g(&format!("{p}cycle_over_rtt"))),
            ratio(g(&format!("{p}handoff_2t_p50_over_rtt"))),
            ratio(g(&format!("{p}redisson_cycle_over_rtt"))),
            ratio(g(&format!("{p}redisson_handoff_2t_p50_over_rtt"))),
        );
        row(
            t,
            &format!("emulated {rtt} µs RTT: takeover p99, 2 threads"),
            "µs",
            g(&format!("{p}takeover_2t_p99_us")),
            [
                NONE,
                (
                    g(&format!("{p}redisson_takeover_2t_p99_us")),
                    g(&format!("{p}takeover_2t_p99_over_redisson")),
                ),
                NONE,
            ],
        );
    }
}

/// The two-process split and the interleaved rounds (see `fairness.rs`): rounds are
/// time ratios redmutex ÷ Redisson, one column per round, the median last.
fn fairness_rows(t: &mut String, fig: &Figures) {
    let g = |k: &str| fig.get(k);
    for (prefix, what) in [
        ("fairness_2proc", "default (eventual) policy"),
        ("fairness_2proc_barging", "Fairness::Barging"),
    ] {
        let _ = writeln!(
            t,
            "| 2 processes × 8 threads, {what}: smaller process's share / least thread ÷ even share / sections per s | | {} / {} / {} | | | | | | |",
            ratio(g(&format!("{prefix}_min_share"))),
            ratio(g(&format!("{prefix}_min_thread_share_of_even"))),
            num(g(&format!("{prefix}_sections_per_sec"))),
        );
    }
    for (prefix, what) in [
        ("fairness_java_rust", "default (eventual) policy"),
        ("fairness_java_rust_barging", "Fairness::Barging"),
    ] {
        let _ = writeln!(
            t,
            "| Redisson process + redmutex process × 8 threads, {what}: smaller side's share / Java's share / sections per s | | {} / {} / {} | | | | | | |",
            ratio(g(&format!("{prefix}_min_share"))),
            ratio(g(&format!("{prefix}_java_share"))),
            num(g(&format!("{prefix}_sections_per_sec"))),
        );
    }
    let rounds = g("rounds");
    if !rounds.is_finite() {
        return;
    }
    for threads in THREADS {
        for (name, what) in crate::fairness::NAMES.iter().zip([
            "takeover p99",
            "takeover p99.9",
            "time per hand-off",
        ]) {
            let per: Vec<String> = (0..rounds as usize)
                .map(|r| ratio(g(&format!("rounds_handoff_{threads}t_{name}_r{r}"))))
                .collect();
            let _ = writeln!(
                t,
                "| rounds, {what}, {threads} threads: redmutex/Redisson per round (median) | | {} ({}) | | | | | | |",
                per.join(" "),
                ratio(g(&format!("rounds_handoff_{threads}t_{name}_median"))),
            );
        }
    }
}

/// Whether `v` meets a target, when it was measured at all.
fn check(v: f64, ok: bool) -> Option<bool> {
    v.is_finite().then_some(ok)
}

fn target(t: &mut String, name: &str, measured: String, met: Option<bool>) {
    let met = match met {
        Some(true) => "yes",
        Some(false) => "**no**",
        None => "not measured",
    };
    let _ = writeln!(t, "| {name} | {measured} | {met} |");
}

/// The targets table: each of the project's performance targets, met or not.
fn targets(t: &mut String, fig: &Figures) {
    let g = |k: &str| fig.get(k);
    cluster_targets(t, fig);
    let v = g("uncontended_1t_cycle_over_two_evalsha");
    target(
        t,
        "uncontended cycle ≤ 1.1 × two floor EVALSHA RTT",
        format!("{}×", ratio(v)),
        check(v, v <= 1.1),
    );
    let v = g("uncontended_1t_cycle_over_raw_scripts");
    target(
        t,
        "uncontended cycle ≤ 1.03 × the raw scripts (median of slices)",
        format!("{}×", ratio(v)),
        check(v, v <= 1.03),
    );
    let v = g("cpu_cycle_redmutex_over_raw");
    target(
        t,
        "client CPU per cycle ≤ 1.15 × the raw scripts' CPU",
        format!("{}×", ratio(v)),
        check(v, v <= 1.15),
    );
    let v = g("ratio_cpu_cycle_over_redisson");
    target(
        t,
        "client CPU per cycle ≤ 0.25 × Redisson's (its whole JVM)",
        format!("{}×", ratio(v)),
        check(v, v <= 0.25),
    );
    for threads in [2, 4] {
        let v = g(&format!("ratio_handoff_{threads}t_p50_over_rtt"));
        target(
            t,
            &format!("hand-off p50 ≤ 3 RTT, {threads} threads"),
            format!("{} RTT", ratio(v)),
            check(v, v <= 3.0),
        );
        let v = g(&format!("handoff_{threads}t_p99_us"));
        target(
            t,
            &format!("hand-off p99 ≤ 1 ms, {threads} threads"),
            format!("{} µs", num(v)),
            check(v, v <= 1000.0),
        );
    }
    let (worst, worst_at) = worst_over_redisson(fig);
    target(
        t,
        "at least as fast as Redisson in every scenario (worst time ratio ≤ 1)",
        format!("worst {} ({worst_at})", ratio(worst)),
        check(worst, worst <= 1.0),
    );
    for m in ["", "_takeover"] {
        let mut worst = f64::NEG_INFINITY;
        for threads in THREADS {
            let v = g(&format!("ratio_handoff_{threads}t{m}_p50_over_polling"));
            if v.is_finite() {
                worst = worst.max(v);
            }
        }
        let name = if m.is_empty() {
            "≥ 10× faster hand-off p50 than the polling crate"
        } else {
            "≥ 10× faster takeover p50 than the polling crate"
        };
        target(
            t,
            name,
            format!("worst time ratio {}", ratio(worst)),
            check(worst, worst <= 0.1),
        );
    }
    for rtt in crate::rtt::RTTS_US {
        let p = format!("rtt{rtt}_");
        for (key, what, bound) in [
            ("cycle_over_rtt", "uncontended cycle ≤ 2.1 RTT", 2.1),
            (
                "handoff_2t_p50_over_rtt",
                "hand-off p50 ≤ 1.5 RTT, 2 threads",
                1.5,
            ),
            (
                "takeover_2t_p99_over_redisson",
                "takeover p99 ≤ Redisson's, 2 threads",
                1.0,
            ),
        ] {
            let v = g(&format!("{p}{key}"));
            target(
                t,
                &format!("emulated {rtt} µs RTT: {what}"),
                format!("{}×", ratio(v)),
                check(v, v <= bound),
            );
        }
    }
    let v = g("fairness_2proc_min_share");
    target(
        t,
        "2 processes × 8 threads: each gets 1/3 to 2/3 of the sections",
        format!("smaller share {}", ratio(v)),
        check(v, v >= 1.0 / 3.0),
    );
    let v = g("fairness_java_rust_min_share");
    target(
        t,
        "Redisson and redmutex processes × 8 threads: the slower side gets ≥ 1/3",
        format!("smaller share {}", ratio(v)),
        check(v, v >= 1.0 / 3.0),
    );
    for threads in THREADS {
        for (name, what) in crate::fairness::NAMES.iter().zip([
            "takeover p99",
            "takeover p99.9",
            "time per hand-off",
        ]) {
            let v = g(&format!("rounds_handoff_{threads}t_{name}_median"));
            target(
                t,
                &format!("{what} ≤ Redisson's, {threads} threads (median of interleaved rounds)"),
                format!("{}×", ratio(v)),
                check(v, v <= 1.0),
            );
        }
    }
    let wd = g("watchdog_locks");
    let v = g("watchdog_evals_per_period");
    target(
        t,
        &format!("≤ 100 EVALs per renewal period for {wd:.0} held locks"),
        num(v),
        check(v, v <= 100.0),
    );
    let v = g("idle_commands_per_sec");
    target(
        t,
        "0 commands/s from an idle client",
        format!("{} /s", num(v)),
        check(v, v == 0.0),
    );
    let family = [
        (
            "fenced_cycle_ratio",
            "fenced lock cycle ≤ 1.05 × RLock cycle",
            1.05,
        ),
        (
            "fenced_write_ratio",
            "fenced write ≤ 1.1 × plain EVALSHA of the same write",
            1.1,
        ),
        (
            "redlock_5_cycle_ratio",
            "RedLock cycle over 5 servers ≤ 1.5 × one-server RLock cycle",
            1.5,
        ),
        (
            "metrics_recorder_cycle_ratio",
            "cycle with a Prometheus recorder ≤ 1.03 × cycle without",
            1.03,
        ),
    ];
    for (key, name, bound) in family {
        let v = g(key);
        target(t, name, format!("{}×", ratio(v)), check(v, v <= bound));
    }
    // Not a target: the best the RedLock ratio can be on this machine (see
    // family::redlock).
    let v = g("redlock_5_over_redisson");
    let _ = writeln!(
        t,
        "| RedLock over 5 servers vs Redisson's RedLock over the same servers (time ratio; run after, not interleaved) | {}× | (no target) |",
        ratio(v)
    );
    let v = g("redlock_5_floor_ratio");
    let _ = writeln!(
        t,
        "| floor of the above on this machine: raw 5-server PING round ÷ 1-server round | {}× | (no target) |",
        ratio(v)
    );
}

/// The largest redmutex ÷ Redisson time ratio over the compared scenarios, and where.
fn worst_over_redisson(fig: &Figures) -> (f64, String) {
    let mut worst = f64::NEG_INFINITY;
    let mut worst_at = String::new();
    let mut consider = |key: &str, label: &str| {
        let v = fig.get(key);
        if v.is_finite() && v > worst {
            worst = v;
            worst_at = label.to_owned();
        }
    };
    consider("ratio_uncontended_1t_over_redisson", "uncontended 1 thread");
    consider(
        "ratio_uncontended_16t_over_redisson",
        "uncontended 16 threads",
    );
    for threads in THREADS {
        for p in ["p50", "p99", "p999"] {
            consider(
                &format!("ratio_handoff_{threads}t_{p}_over_redisson"),
                &format!("hand-off {p} {threads} threads"),
            );
        }
    }
    (worst, worst_at)
}
