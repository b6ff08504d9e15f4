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
//! Flags: `--quick` (short spans, 1,000 watchdog locks, no Java unless `--java`),
//! `--java` / `--no-java`, `--json PATH` (all figures; the hand-off samples go to
//! `PATH` with the extension `.samples.csv`, the table to `.table.md`), `--plot PATH`
//! (a PNG of the hand-off latency distributions, drawn by `scripts/plot_bench.py`).
//!
//! Ratios in the table are time ratios: redmutex's time per operation divided by the
//! other's, so below 1 means redmutex is faster. Against the floor, latencies are given in
//! floor round trips (one acquire-shaped `EVALSHA` on one connection).

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redmutex::{Client, Config};
use spawner::RedisServer;

#[path = "../src/bin/redmutex/server.rs"]
mod spawner;

// ---------------------------------------------------------------------------------------
// Heap accounting: live bytes allocated while `COUNTING` is on (the watchdog phase only).

struct CountingAlloc;

static COUNTING: AtomicBool = AtomicBool::new(false);
static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as ours.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() && COUNTING.load(Ordering::Relaxed) {
            LIVE_BYTES.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if COUNTING.load(Ordering::Relaxed) {
            LIVE_BYTES.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as ours.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() && COUNTING.load(Ordering::Relaxed) {
            LIVE_BYTES.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// This process's resident set size in bytes (`VmRSS`).
fn rss_bytes() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb * 1024.0)
}

// ---------------------------------------------------------------------------------------
// The server.

/// The run's server (the CLI's spawner, shared through `#[path]`), with its address.
struct Server {
    redis: RedisServer,
    url: String,
}

impl Server {
    fn start() -> Self {
        let redis = RedisServer::start(&[]).unwrap_or_else(|e| panic!("{e}"));
        eprintln!("redis-server pid {} at {}", redis.pid(), redis.url());
        Self {
            url: redis.url(),
            redis,
        }
    }

    fn port(&self) -> u16 {
        self.redis.port()
    }

    fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url.as_str())
            .unwrap()
            .get_connection()
            .unwrap()
    }

    fn client(&self) -> Client {
        Client::new(Config::builder().address(self.url.as_str()).build()).unwrap()
    }
}

// ---------------------------------------------------------------------------------------
// Settings and figures.

struct Settings {
    quick: bool,
    /// Diagnostics: only the interleaved floors and uncontended rounds.
    only_uncontended: bool,
    java: bool,
    json: Option<PathBuf>,
    plot: Option<PathBuf>,
}

impl Settings {
    fn parse() -> Self {
        let mut args = std::env::args().skip(1);
        let mut quick = false;
        let mut java = None;
        let mut json = None;
        let mut plot = None;
        let mut only_uncontended = false;
        while let Some(a) = args.next() {
            match a.as_str() {
                "--quick" => quick = true,
                "--java" => java = Some(true),
                "--no-java" => java = Some(false),
                "--json" => json = args.next().map(PathBuf::from),
                "--plot" => plot = args.next().map(PathBuf::from),
                "--only-uncontended" => only_uncontended = true,
                _ => {} // cargo passes --bench
            }
        }
        Self {
            quick,
            only_uncontended,
            java: java.unwrap_or(!quick),
            json,
            plot,
        }
    }

    /// Throughput measurements.
    fn span(&self) -> Duration {
        if self.quick {
            Duration::from_millis(300)
        } else {
            Duration::from_secs(3)
        }
    }

    /// Hand-off measurements (more samples for the tail).
    fn handoff_span(&self) -> Duration {
        if self.quick {
            Duration::from_millis(300)
        } else {
            Duration::from_secs(5)
        }
    }

    /// The polling crate hands off about once per retry delay: it needs longer.
    fn polling_span(&self) -> Duration {
        if self.quick {
            Duration::from_millis(300)
        } else {
            Duration::from_secs(10)
        }
    }

    /// Measurement time of each Java scenario.
    fn java_ms(&self) -> u64 {
        if self.quick { 1_000 } else { 5_000 }
    }

    /// The Java warm-up, shared by all scenarios.
    fn java_warmup_ms(&self) -> u64 {
        if self.quick { 2_000 } else { 20_000 }
    }
}

/// Every figure of the run, by JSON key, in insertion order.
#[derive(Default)]
struct Figures {
    order: Vec<String>,
    values: BTreeMap<String, Value>,
}

#[derive(Clone)]
enum Value {
    Num(f64),
    Text(String),
}

impl Figures {
    fn set(&mut self, key: &str, v: f64) {
        self.put(key, Value::Num(v));
    }

    fn set_opt(&mut self, key: &str, v: Option<f64>) {
        self.set(key, v.unwrap_or(f64::NAN));
    }

    fn text(&mut self, key: &str, v: &str) {
        self.put(key, Value::Text(v.to_owned()));
    }

    fn put(&mut self, key: &str, v: Value) {
        if self.values.insert(key.to_owned(), v).is_none() {
            self.order.push(key.to_owned());
        }
    }

    fn get(&self, key: &str) -> f64 {
        match self.values.get(key) {
            Some(Value::Num(v)) => *v,
            _ => f64::NAN,
        }
    }

    fn to_json(&self) -> String {
        let body: Vec<String> = self
            .order
            .iter()
            .map(|k| match &self.values[k] {
                Value::Num(v) if v.is_finite() => format!("  \"{k}\": {v:.3}"),
                Value::Num(_) => format!("  \"{k}\": null"),
                Value::Text(s) => format!("  \"{k}\": \"{}\"", s.replace('"', "'")),
            })
            .collect();
        format!("{{\n{}\n}}\n", body.join(",\n"))
    }
}

// ---------------------------------------------------------------------------------------
// Measurement helpers.

/// Operations per second of `op` on one thread for `span`, after a short warm-up.
fn rate(span: Duration, mut op: impl FnMut()) -> f64 {
    let warm = Instant::now();
    while warm.elapsed() < span / 10 {
        op();
    }
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < span {
        op();
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// Operations per second of `threads` threads together, each running `make(t)`'s
/// operation (with its own connection) in a loop for `span`, after a short warm-up.
fn rate_threads<F>(threads: usize, span: Duration, make: impl Fn(usize) -> F + Sync) -> f64
where
    F: FnMut(),
{
    let total = AtomicU64::new(0);
    let warm_end = Instant::now() + span / 10;
    let start = Mutex::new(None::<Instant>);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (total, make, start) = (&total, &make, &start);
            s.spawn(move || {
                let mut op = make(t);
                while Instant::now() < warm_end {
                    op();
                }
                let begin = *start.lock().get_or_insert_with(Instant::now);
                let end = begin + span;
                let mut n = 0;
                while Instant::now() < end {
                    op();
                    n += 1;
                }
                total.fetch_add(n, Ordering::Relaxed);
            });
        }
    });
    let begin = start.lock().unwrap();
    total.load(Ordering::Relaxed) as f64 / begin.elapsed().as_secs_f64().max(span.as_secs_f64())
}

/// The 16-thread scenarios spread over 1,000 keys without sharing any: thread `t` cycles
/// through keys t, t + 16, t + 32, ... below 1,000.
fn next_key(i: usize, t: usize) -> usize {
    if i + 16 < 1000 { i + 16 } else { t }
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[(((sorted.len() - 1) as f64) * q).round() as usize]
}

/// A short critical section: ~20 µs of work while holding the lock.
fn critical_section() {
    let spin = Instant::now();
    while spin.elapsed() < Duration::from_micros(20) {
        std::hint::spin_loop();
    }
}

/// Hand-off bookkeeping shared by the contending threads of one scenario. The same
/// definitions are used by the Java harness (`Bench.java`).
#[derive(Default)]
struct Recorder {
    state: Mutex<RecState>,
    stop: AtomicBool,
}

#[derive(Default)]
struct RecState {
    /// The last releaser and when it started its unlock call.
    last: Option<(usize, Instant)>,
    /// Every unlock-call start, in order (holders are serialized by the lock).
    unlocks: Vec<Instant>,
    handoff: Vec<f64>,
    takeover: Vec<f64>,
}

/// Sorted samples in µs.
struct Latencies {
    /// Last releaser's unlock-call start → acquire return on another thread.
    handoff: Vec<f64>,
    /// First unlock-call start after the acquirer called lock() → its acquire return.
    takeover: Vec<f64>,
}

impl Recorder {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Thread `t` holds the lock; its lock() call started at `called`.
    fn acquired(&self, t: usize, called: Instant) {
        let now = Instant::now();
        let mut st = self.state.lock();
        if let Some((who, at)) = st.last.take()
            && who != t
        {
            st.handoff.push(now.duration_since(at).as_secs_f64() * 1e6);
        }
        let first = st.unlocks.partition_point(|u| *u < called);
        if let Some(u) = st.unlocks.get(first).copied() {
            st.takeover.push(now.duration_since(u).as_secs_f64() * 1e6);
        }
    }

    /// Thread `t` is about to call unlock.
    fn releasing(&self, t: usize) {
        let mut st = self.state.lock();
        let now = Instant::now();
        st.last = Some((t, now));
        st.unlocks.push(now);
    }

    /// Runs `body(t)` on `threads` threads for `span`; `body` loops until `stopped()`.
    fn run(threads: usize, span: Duration, body: impl Fn(usize, &Recorder) + Sync) -> Latencies {
        let rec = Recorder::default();
        std::thread::scope(|s| {
            for t in 0..threads {
                let (rec, body) = (&rec, &body);
                s.spawn(move || body(t, rec));
            }
            std::thread::sleep(span);
            rec.stop.store(true, Ordering::Relaxed);
        });
        let mut st = rec.state.into_inner();
        st.handoff.sort_by(f64::total_cmp);
        st.takeover.sort_by(f64::total_cmp);
        Latencies {
            handoff: st.handoff,
            takeover: st.takeover,
        }
    }
}

/// One library's hand-off figures at one thread count, into `figures` and `samples`.
fn record_latencies(
    figures: &mut Figures,
    samples: &mut Vec<(String, usize, &'static str, Vec<f64>)>,
    prefix: &str,
    library: &str,
    threads: usize,
    span: Duration,
    lat: Latencies,
) {
    // How often the lock changed threads: a polling lock hands off far less often.
    figures.set(
        &format!("{prefix}handoff_{threads}t_per_sec"),
        lat.handoff.len() as f64 / span.as_secs_f64(),
    );
    for (metric, v) in [("handoff", &lat.handoff), ("takeover", &lat.takeover)] {
        let key = if metric == "handoff" {
            format!("{prefix}handoff_{threads}t")
        } else {
            format!("{prefix}handoff_{threads}t_takeover")
        };
        figures.set(&format!("{key}_p50_us"), percentile(v, 0.50));
        figures.set(&format!("{key}_p99_us"), percentile(v, 0.99));
        figures.set(&format!("{key}_p999_us"), percentile(v, 0.999));
        figures.set(&format!("{key}_samples"), v.len() as f64);
    }
    samples.push((library.to_owned(), threads, "handoff", lat.handoff));
    samples.push((library.to_owned(), threads, "takeover", lat.takeover));
}

// ---------------------------------------------------------------------------------------

const THREADS: [usize; 3] = [2, 4, 16];
const POLLING_CRATE: &str = "redlock 2.0.0";
const REDISSON_VERSION: &str = "4.7.0";

fn main() {
    let settings = Settings::parse();
    let server = Server::start();
    let mut fig = Figures::default();
    let mut samples = Vec::new();
    fig.text("mode", if settings.quick { "quick" } else { "full" });
    fig.text("polling_crate", POLLING_CRATE);
    fig.text("redisson_version", REDISSON_VERSION);
    fig.set(
        "cpus",
        std::thread::available_parallelism().map_or(0, |n| n.get()) as f64,
    );

    // First, while the heap is fresh: the watchdog's cost and memory per held lock.
    if !settings.only_uncontended {
        eprintln!("watchdog and memory...");
        watchdog_cost(&server, &settings, &mut fig);

        // An idle client (holding nothing): commands sent in a quiet period.
        eprintln!("idle client...");
        idle_client(&server, &settings, &mut fig);
    }

    eprintln!("floors and redmutex uncontended, interleaved...");
    let client = server.client();
    floors(&server, &settings, &mut fig);
    uncontended(&server, &client, &settings, &mut fig);
    if settings.only_uncontended {
        println!("{}", fig.to_json());
        return;
    }
    let rtt_us = fig.get("floor_rtt_us");

    eprintln!("redmutex hand-off...");
    for threads in THREADS {
        let name = format!("bench:handoff:{threads}");
        let lat = Recorder::run(threads, settings.handoff_span(), |t, rec| {
            let lock = client.get_lock(name.clone());
            while !rec.stopped() {
                let called = Instant::now();
                let guard = lock.lock().unwrap();
                rec.acquired(t, called);
                critical_section();
                rec.releasing(t);
                guard.unlock().unwrap();
            }
        });
        fig.set(
            &format!("handoff_{threads}t_p50_rtt"),
            percentile(&lat.handoff, 0.5) / rtt_us,
        );
        record_latencies(
            &mut fig,
            &mut samples,
            "",
            "redmutex",
            threads,
            settings.handoff_span(),
            lat,
        );
    }

    eprintln!("polling crate ({POLLING_CRATE}) hand-off...");
    for threads in THREADS {
        let lat = redlock_handoff(&server, threads, settings.polling_span());
        record_latencies(
            &mut fig,
            &mut samples,
            "polling_",
            "redlock",
            threads,
            settings.polling_span(),
            lat,
        );
    }

    // How long a new subscription takes to take effect: from a waiter's first call until
    // Redis counts its subscriber, probed by a tight PUBSUB NUMSUB loop.
    eprintln!("subscription latency...");
    let subs = subscription_latency(&server, &client, if settings.quick { 20 } else { 200 });
    fig.set("subscribe_p50_us", percentile(&subs, 0.5));
    fig.set("subscribe_p99_us", percentile(&subs, 0.99));
    fig.set("subscribe_p50_rtt", percentile(&subs, 0.5) / rtt_us);
    drop(client);

    if settings.java {
        eprintln!("Java Redisson {REDISSON_VERSION}...");
        redisson(&server, &settings, &mut fig, &mut samples);
    } else {
        eprintln!("Java Redisson skipped (quick mode; pass --java to include it)");
    }

    ratios(&mut fig);
    let table = table(&fig);
    println!("{table}");

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
        write_samples(path, &samples);
        fig.text("samples_file", &path.display().to_string());
    }
    if let Some(path) = &settings.json {
        std::fs::write(path, fig.to_json()).unwrap();
        std::fs::write(path.with_extension("table.md"), &table).unwrap();
        println!("wrote {}", path.display());
    }
    if let (Some(png), Some(csv)) = (&settings.plot, &samples_path) {
        plot(csv, png, &fig);
    }
}

// ---------------------------------------------------------------------------------------
// Floors.

fn floors(server: &Server, settings: &Settings, fig: &mut Figures) {
    let span = settings.span();
    let mut raw = server.conn();
    let ping = rate(span, || {
        redis::cmd("PING").query::<String>(&mut raw).unwrap();
    });
    fig.set("floor_ping_per_sec", ping);
    let shape = redis::Script::new(include_str!("../lua/acquire.lua"));
    shape
        .key("bench:floor")
        .arg(30_000)
        .arg("floor:1")
        .invoke::<Option<i64>>(&mut raw)
        .unwrap();

    // redis-benchmark (one event-loop thread, 16 connections, no pipelining) running the
    // same acquire-shaped EVALSHA over 1,000 keys.
    let n = if settings.quick { 5_000 } else { 100_000 };
    let rb = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &server.port().to_string()])
        .args(["-c", "16", "-n", &n.to_string(), "-r", "1000", "--csv"])
        .args(["EVALSHA", shape.get_hash(), "1", "bench:rb:__rand_int__"])
        .args(["30000", "floor:rb"])
        .output();
    let rb = match rb {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("\"EVALSHA"))
            .find_map(|l| l.split("\",\"").nth(1)?.trim_matches('"').parse().ok()),
        Ok(out) => {
            eprintln!(
                "redis-benchmark failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            None
        }
        Err(e) => {
            eprintln!("redis-benchmark not run ({e}); install redis-tools to include it");
            None
        }
    };
    fig.set_opt("floor_redis_benchmark_evalsha_per_sec", rb);
}

/// redmutex's uncontended cycles and their floors, measured in interleaved slices so that
/// background load (other processes on the machine) hits both sides of each ratio alike.
/// Each ratio is the median of its per-slice ratios; each rate is the mean of its
/// per-slice rates.
fn uncontended(server: &Server, client: &Client, settings: &Settings, fig: &mut Figures) {
    let shape = redis::Script::new(include_str!("../lua/acquire.lua"));
    let mut raw = server.conn();
    let mut probe = server.conn();
    let mut cycle = raw_cycle("raw");
    cycle(&mut raw, "bench:raw"); // loads the release script
    let lock = client.get_lock("bench:uncontended");
    let evalsha_op = |raw: &mut redis::Connection| {
        // The acquire script on a key this owner already holds (a re-entry: EXISTS,
        // HEXISTS, HINCRBY, PEXPIRE), so every call does the work of a real acquisition.
        shape
            .key("bench:floor")
            .arg(30_000)
            .arg("floor:1")
            .invoke::<Option<i64>>(raw)
            .map(drop)
            .unwrap();
    };

    // One thread: slices of 25 ms, the three measurements in rotating order.
    let slice = Duration::from_millis(25);
    let rounds = (settings.span().as_millis() / slice.as_millis()).max(4) as usize;
    let mut rows: Vec<[f64; 3]> = Vec::new();
    let mut server_us = [0u64; 2];
    let mut server_calls = [0u64; 2];
    let (mut cycles, mut scripts, mut dels) = (0u64, 0u64, 0u64);
    for r in 0..rounds {
        let mut row = [0.0; 3];
        for k in 0..3 {
            let which = (r + k) % 3;
            let t0 = command_times(&mut probe);
            let mut n = 0u64;
            row[which] = match which {
                0 => rate(slice, || evalsha_op(&mut raw)),
                // The two scripts of one lock+unlock cycle, run raw on one connection:
                // what the cycle costs without any library code around it.
                1 => rate(slice, || cycle(&mut raw, "bench:raw")),
                _ => rate(slice, || {
                    lock.lock().unwrap().unlock().unwrap();
                    n += 1;
                }),
            };
            let t1 = command_times(&mut probe);
            let delta = |cmd: &str| {
                let (c1, u1) = t1.get(cmd).copied().unwrap_or((0, 0));
                let (c0, u0) = t0.get(cmd).copied().unwrap_or((0, 0));
                (c1 - c0, u1 - u0)
            };
            match which {
                0 | 1 => {
                    let (calls, usec) = delta("evalsha");
                    server_calls[which] += calls;
                    server_us[which] += usec;
                }
                _ => {
                    cycles += n;
                    scripts += delta("evalsha").0;
                    // Each full release deletes the lock hash with one DEL inside its
                    // script; the other DELs are the watchdog's batched latch deletions.
                    dels += delta("del").0.saturating_sub(n);
                }
            }
        }
        rows.push(row);
    }
    let _: () = redis::cmd("DEL")
        .arg("bench:floor")
        .query(&mut probe)
        .unwrap();
    let mean = |i: usize| rows.iter().map(|r| r[i]).sum::<f64>() / rows.len() as f64;
    let quantiles = |f: &dyn Fn(&[f64; 3]) -> f64| {
        let mut v: Vec<f64> = rows.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        [
            percentile(&v, 0.25),
            percentile(&v, 0.5),
            percentile(&v, 0.75),
        ]
    };
    fig.set("floor_evalsha_per_sec", mean(0));
    fig.set("floor_rtt_us", 1e6 / mean(0));
    fig.set("floor_script_cycles_per_sec", mean(1));
    let acquire = server_us[0] as f64 / server_calls[0].max(1) as f64;
    // A cycle is two calls. Its acquire (on a free key: EXISTS, HINCRBY, PEXPIRE) costs
    // at most the re-entry above, so the release costs at least the difference.
    let cycle_server = 2.0 * server_us[1] as f64 / server_calls[1].max(1) as f64;
    fig.set("server_acquire_shape_us_per_call", acquire);
    fig.set("server_script_cycle_us", cycle_server);
    fig.set("server_release_us_at_least", cycle_server - acquire);
    fig.set("uncontended_1t_cycles_per_sec", mean(2));
    fig.set(
        "uncontended_1t_evalsha_per_cycle",
        scripts as f64 / cycles as f64,
    );
    fig.set(
        "uncontended_1t_latch_dels_per_cycle",
        dels as f64 / cycles as f64,
    );
    let [q1, med, q3] = quantiles(&|r| (r[0] / 2.0) / r[2]);
    fig.set("uncontended_1t_cycle_over_two_evalsha", med);
    fig.set("uncontended_1t_cycle_over_two_evalsha_q1", q1);
    fig.set("uncontended_1t_cycle_over_two_evalsha_q3", q3);
    let [q1, med, q3] = quantiles(&|r| r[1] / r[2]);
    fig.set("uncontended_1t_cycle_over_raw_scripts", med);
    fig.set("uncontended_1t_cycle_over_raw_scripts_q1", q1);
    fig.set("uncontended_1t_cycle_over_raw_scripts_q3", q3);
    let [q1, med, q3] = quantiles(&|r| (r[0] / 2.0) / r[1]);
    fig.set("floor_raw_scripts_over_two_evalsha", med);
    fig.set("floor_raw_scripts_over_two_evalsha_q1", q1);
    fig.set("floor_raw_scripts_over_two_evalsha_q3", q3);
    fig.set("uncontended_1t_slices", rounds as f64);

    // Sixteen threads: starting 16 threads per slice costs more, so longer slices.
    let rounds16 = if settings.quick { 2 } else { 6 };
    let slice16 = settings.span() / rounds16;
    let mut rows16: Vec<[f64; 3]> = Vec::new();
    for r in 0..rounds16 as usize {
        let mut row = [0.0; 3];
        for k in 0..3 {
            let which = (r + k) % 3;
            row[which] = match which {
                0 => rate_threads(16, slice16, |t| {
                    let mut conn = server.conn();
                    let shape = shape.clone();
                    let owner = format!("floor:{t}");
                    let mut i = t;
                    move || {
                        shape
                            .key(format!("bench:f16:{i}"))
                            .arg(30_000)
                            .arg(&owner)
                            .invoke::<Option<i64>>(&mut conn)
                            .map(drop)
                            .unwrap();
                        i = next_key(i, t);
                    }
                }),
                1 => rate_threads(16, slice16, |t| {
                    let mut conn = server.conn();
                    let mut cycle = raw_cycle(&format!("raw16:{t}"));
                    let mut i = t;
                    move || {
                        cycle(&mut conn, &format!("bench:raw16:{i}"));
                        i = next_key(i, t);
                    }
                }),
                _ => rate_threads(16, slice16, |t| {
                    let mut i = t;
                    move || {
                        let lock = client.get_lock(format!("bench:many:{i}"));
                        lock.lock().unwrap().unlock().unwrap();
                        i = next_key(i, t);
                    }
                }),
            };
        }
        rows16.push(row);
    }
    let mean16 = |i: usize| rows16.iter().map(|r| r[i]).sum::<f64>() / rows16.len() as f64;
    let median16 = |f: &dyn Fn(&[f64; 3]) -> f64| {
        let mut v: Vec<f64> = rows16.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        percentile(&v, 0.5)
    };
    fig.set("floor_16t_evalsha_per_sec", mean16(0));
    fig.set("floor_16t_script_cycles_per_sec", mean16(1));
    fig.set("uncontended_16t_cycles_per_sec", mean16(2));
    fig.set(
        "uncontended_16t_cycle_over_two_evalsha",
        median16(&|r| (r[0] / 2.0) / r[2]),
    );
    fig.set(
        "uncontended_16t_cycle_over_raw_scripts",
        median16(&|r| r[1] / r[2]),
    );
}

/// One raw acquire + release on `key` with owner `owner`, as a reusable closure.
fn raw_cycle(owner: &str) -> impl FnMut(&mut redis::Connection, &str) + use<> {
    let acquire = redis::Script::new(include_str!("../lua/acquire.lua"));
    let release = redis::Script::new(include_str!("../lua/release.lua"));
    let owner = owner.to_owned();
    let mut n = 0u64;
    move |conn, key| {
        n += 1;
        let held: Option<i64> = acquire
            .key(key)
            .arg(30_000)
            .arg(&owner)
            .invoke(conn)
            .unwrap();
        assert!(held.is_none());
        let latch = format!("redisson_unlock_latch:{{{key}}}:{owner}:{n:032x}");
        release
            .key(key)
            .key(format!("redisson_lock__channel:{{{key}}}"))
            .key(&latch)
            .arg("0")
            .arg(30_000)
            .arg(&owner)
            .arg("PUBLISH")
            .arg(1)
            .invoke::<Option<i64>>(conn)
            .unwrap();
    }
}

// ---------------------------------------------------------------------------------------
// The polling crate.

/// Hand-off with `redlock` (synchronous, single server, SET NX PX; a waiter retries after
/// a random delay below the crate's default 200 ms).
fn redlock_handoff(server: &Server, threads: usize, span: Duration) -> Latencies {
    let resource = format!("bench:redlock:{threads}");
    Recorder::run(threads, span, |t, rec| {
        // One manager per thread, as one per process would be shared the same way: it only
        // holds a redis::Client and opens a connection per command.
        let rl = redlock::RedLock::new(vec![server.url.as_str()]);
        while !rec.stopped() {
            let called = Instant::now();
            let lock = loop {
                // `lock` tries `retry_count` (3) times with a random sleep below
                // `retry_delay` (200 ms) after each failure; `acquire` would loop on it.
                if let Some(lock) = rl.lock(resource.as_bytes(), 10_000).unwrap() {
                    break Some(lock);
                }
                if rec.stopped() {
                    break None;
                }
            };
            let Some(lock) = lock else { break };
            rec.acquired(t, called);
            critical_section();
            rec.releasing(t);
            rl.unlock(&lock);
        }
    })
}

// ---------------------------------------------------------------------------------------
// Java Redisson, through tests/interop's Bench harness.

fn redisson(server: &Server, settings: &Settings, fig: &mut Figures, samples: &mut Vec<Sample>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let outdir = root.join("target/interop").join(REDISSON_VERSION);
    let built = Command::new(root.join("tests/interop/build.sh"))
        .arg(REDISSON_VERSION)
        .arg(&outdir)
        .status();
    let classpath = match built {
        Ok(s) if s.success() => std::fs::read_to_string(outdir.join("classpath.txt"))
            .ok()
            .map(|s| s.trim().to_owned()),
        Ok(s) => {
            loud(&format!("building the Java harness failed ({s})"));
            None
        }
        Err(e) => {
            loud(&format!("cannot run tests/interop/build.sh: {e}"));
            None
        }
    };
    let Some(classpath) = classpath else {
        fig.text(
            "redisson_status",
            "unavailable: java/mvn missing or build failed",
        );
        return;
    };
    // One JVM runs every scenario after one shared warm-up: Redisson keeps getting faster
    // for many seconds at these rates (measured: 1,500 → 2,800 uncontended cycles/s
    // between a 2 s and a 20 s warm-up), so a short per-process warm-up would be unfair.
    let dir = std::env::temp_dir().join(format!("redmutex-bench-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let out = Command::new("java")
        .arg(format!("-Dbench.warmupMs={}", settings.java_warmup_ms()))
        .arg("-cp")
        .arg(&classpath)
        .arg("dev.redmutex.interop.Bench")
        .arg(&server.url)
        .arg("suite")
        .arg(settings.java_ms().to_string())
        .arg(&dir)
        .stderr(Stdio::inherit())
        .output();
    let stdout = match out {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).into_owned(),
        Ok(out) => {
            loud(&format!("the Java Bench suite failed: {}", out.status));
            String::new()
        }
        Err(e) => {
            loud(&format!("cannot run java: {e}"));
            String::new()
        }
    };
    let line = |scenario: &str, threads: usize| {
        stdout.lines().find(|l| {
            l.contains(&format!("\"scenario\":\"{scenario}\""))
                && json_number(l, "threads") == Some(threads as f64)
        })
    };
    let mut ok = true;
    for (key, threads) in [
        ("redisson_uncontended_1t_cycles_per_sec", 1),
        ("redisson_uncontended_16t_cycles_per_sec", 16),
    ] {
        let v = line("uncontended", threads).and_then(|l| json_number(l, "ops_per_sec"));
        ok &= v.is_some();
        fig.set_opt(key, v);
    }
    for threads in THREADS {
        let csv = dir.join(format!("handoff-{threads}.csv"));
        let text = std::fs::read_to_string(&csv).ok();
        match (line("handoff", threads), text) {
            (Some(_), Some(text)) => {
                let mut handoff = Vec::new();
                let mut takeover = Vec::new();
                for l in text.lines() {
                    let Some((metric, us)) = l.split_once(',') else {
                        continue;
                    };
                    let Ok(us) = us.parse::<f64>() else { continue };
                    match metric {
                        "handoff" => handoff.push(us),
                        "takeover" => takeover.push(us),
                        _ => {}
                    }
                }
                handoff.sort_by(f64::total_cmp);
                takeover.sort_by(f64::total_cmp);
                let lat = Latencies { handoff, takeover };
                let span = Duration::from_millis(settings.java_ms());
                record_latencies(fig, samples, "redisson_", "redisson", threads, span, lat);
            }
            _ => ok = false,
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    fig.set("redisson_warmup_ms", settings.java_warmup_ms() as f64);
    fig.text(
        "redisson_status",
        if ok { "ok" } else { "some runs failed" },
    );
}

fn loud(msg: &str) {
    eprintln!("\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
    eprintln!("!!! {msg}");
    eprintln!("!!! Redisson figures are recorded as null.");
    eprintln!("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n");
}

/// The number after `"key":` in a one-line JSON object.
fn json_number(line: &str, key: &str) -> Option<f64> {
    let rest = &line[line.find(&format!("\"{key}\":"))? + key.len() + 3..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    rest[..end].trim().parse().ok()
}

// ---------------------------------------------------------------------------------------
// Subscription, idle client, watchdog.

fn subscription_latency(server: &Server, client: &Client, rounds: usize) -> Vec<f64> {
    let holder = server.client();
    let mut probe = server.conn();
    let mut out = Vec::new();
    for i in 0..rounds {
        let name = format!("bench:subscribe:{i}");
        let channel = format!("redisson_lock__channel:{{{name}}}");
        let held = holder.get_lock(name.clone());
        let guard = held.lock().unwrap();
        std::thread::scope(|s| {
            let start = Instant::now();
            let waiter = s.spawn(|| {
                let lock = client.get_lock(name.clone());
                lock.try_lock_for(Duration::from_secs(10))
                    .unwrap()
                    .map(|g| g.unlock().unwrap())
            });
            loop {
                let (_, n): (String, i64) = redis::cmd("PUBSUB")
                    .arg("NUMSUB")
                    .arg(&channel)
                    .query(&mut probe)
                    .unwrap();
                if n > 0 {
                    break;
                }
            }
            out.push(start.elapsed().as_secs_f64() * 1e6);
            guard.unlock().unwrap();
            waiter.join().unwrap();
        });
    }
    out.sort_by(f64::total_cmp);
    out
}

fn idle_client(server: &Server, settings: &Settings, fig: &mut Figures) {
    let idle_span = if settings.quick {
        Duration::from_millis(500)
    } else {
        Duration::from_secs(5)
    };
    let mut raw = server.conn();
    let idle = server.client();
    // Let the client's start-up commands (connection set-up) land first.
    std::thread::sleep(Duration::from_millis(100));
    let before = command_stats(&mut raw);
    std::thread::sleep(idle_span);
    let after = command_stats(&mut raw);
    drop(idle);
    // Our own INFO call is one of them.
    let sent: u64 = after
        .iter()
        .map(|(cmd, n)| n - before.get(cmd).copied().unwrap_or(0))
        .sum::<u64>()
        .saturating_sub(1);
    fig.set("idle_commands", sent as f64);
    fig.set(
        "idle_commands_per_sec",
        sent as f64 / idle_span.as_secs_f64(),
    );
    fig.set("idle_seconds", idle_span.as_secs_f64());
}

/// Calls per command (INFO commandstats).
fn command_stats(conn: &mut redis::Connection) -> BTreeMap<String, u64> {
    command_times(conn)
        .into_iter()
        .map(|(cmd, (calls, _))| (cmd, calls))
        .collect()
}

/// Calls and server-side µs per command (INFO commandstats).
fn command_times(conn: &mut redis::Connection) -> BTreeMap<String, (u64, u64)> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    info.lines()
        .filter_map(|l| {
            let (cmd, rest) = l.strip_prefix("cmdstat_")?.split_once(":calls=")?;
            let mut fields = rest.split(',');
            let calls = fields.next()?.parse().ok()?;
            let usec = fields.next()?.strip_prefix("usec=")?.parse().ok()?;
            Some((cmd.to_owned(), (calls, usec)))
        })
        .collect()
}

/// Holds many locks under a short watchdog timeout (3 s; 1.5 s in quick mode): renewal
/// EVALs per period and memory per held lock.
fn watchdog_cost(server: &Server, settings: &Settings, fig: &mut Figures) {
    let n = if settings.quick { 1_000 } else { 10_000 };
    let periods = if settings.quick { 2 } else { 5 };
    let lease = if settings.quick {
        Duration::from_millis(1_500)
    } else {
        Duration::from_secs(3)
    };
    let client = Client::new(
        Config::builder()
            .address(server.url.as_str())
            .lock_watchdog_timeout(lease)
            .build(),
    )
    .unwrap();
    let names: Vec<String> = (0..n).map(|i| format!("bench:wd:{i}")).collect();
    // Warm the client up (pool connection, thread-locals, script cache) with one cycle.
    client
        .get_lock("bench:wd:warm")
        .lock()
        .unwrap()
        .unlock()
        .unwrap();
    let rss_before = rss_bytes();
    LIVE_BYTES.store(0, Ordering::Relaxed);
    COUNTING.store(true, Ordering::Relaxed);
    for name in &names {
        // The RLock handle is dropped: only the client keeps anything per held lock.
        client.get_lock(name.as_str()).lock().unwrap().detach();
    }
    let heap = LIVE_BYTES.load(Ordering::Relaxed);
    COUNTING.store(false, Ordering::Relaxed);
    let rss_after = rss_bytes();
    fig.set("watchdog_locks", n as f64);
    fig.set("memory_heap_bytes_per_held_lock", heap as f64 / n as f64);
    fig.set(
        "memory_rss_bytes_per_held_lock",
        (rss_after - rss_before) / n as f64,
    );
    fig.set("watchdog_renewing", client.renewing_count() as f64);

    let mut raw = server.conn();
    let period = lease / 3;
    let evals = |raw: &mut redis::Connection| {
        let s = command_stats(raw);
        s.get("evalsha").copied().unwrap_or(0) + s.get("eval").copied().unwrap_or(0)
    };
    // Sample the EVAL count every 5 ms and split it into ticks: bursts of renewals
    // separated by quiet time. Only ticks that start and end inside the window count.
    let window = period * (periods + 1);
    let start = Instant::now();
    let mut series = vec![(start, evals(&mut raw))];
    while start.elapsed() < window {
        std::thread::sleep(Duration::from_millis(5));
        series.push((Instant::now(), evals(&mut raw)));
    }
    let mut ticks: Vec<(Instant, Instant, u64)> = Vec::new(); // start, end, EVALs
    let mut open: Option<(Instant, Instant, u64)> = None;
    let quiet = Duration::from_millis(50);
    for w in series.windows(2) {
        let ((t0, c0), (t1, c1)) = (w[0], w[1]);
        if c1 > c0 {
            match &mut open {
                Some((_, end, n)) if t0.duration_since(*end) < quiet => {
                    *end = t1;
                    *n += c1 - c0;
                }
                _ => {
                    if let Some(done) = open.take() {
                        ticks.push(done);
                    }
                    open = Some((t0, t1, c1 - c0));
                }
            }
        }
    }
    let last_sample = series.last().map(|s| s.0).unwrap_or(start);
    if let Some(done) = open.take()
        && last_sample.duration_since(done.1) >= quiet
    {
        ticks.push(done);
    }
    // The first burst may have begun before the window.
    let complete: Vec<_> = ticks
        .iter()
        .filter(|t| t.0 > start + Duration::from_millis(5))
        .collect();
    let mut per_tick: Vec<f64> = complete.iter().map(|t| t.2 as f64).collect();
    per_tick.sort_by(f64::total_cmp);
    let intervals: Vec<f64> = complete
        .windows(2)
        .map(|w| w[1].0.duration_since(w[0].0).as_secs_f64() * 1e3)
        .collect();
    let total = series.last().map_or(0, |s| s.1) - series[0].1;
    for name in &names {
        client.get_lock(name.as_str()).unlock().unwrap();
    }
    fig.set("watchdog_evals_per_period", percentile(&per_tick, 0.5));
    fig.set("watchdog_ticks_seen", per_tick.len() as f64);
    fig.set(
        "watchdog_tick_interval_ms",
        intervals.iter().sum::<f64>() / intervals.len() as f64,
    );
    fig.set(
        "watchdog_tick_ms",
        complete
            .iter()
            .map(|t| t.1.duration_since(t.0).as_secs_f64() * 1e3)
            .sum::<f64>()
            / complete.len() as f64,
    );
    fig.set(
        "watchdog_evals_per_sec",
        total as f64
            / series
                .last()
                .map_or(1.0, |s| s.0.duration_since(start).as_secs_f64()),
    );
    fig.set("watchdog_period_ms", period.as_millis() as f64);
}

// ---------------------------------------------------------------------------------------
// Output.

type Sample = (String, usize, &'static str, Vec<f64>);

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
fn ratios(fig: &mut Figures) {
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

/// The Markdown table of the run, with the targets below it.
fn table(fig: &Figures) -> String {
    let g = |k: &str| fig.get(k);
    let mut t = String::new();
    t.push_str(
        "| measure | unit | redmutex | floor | redmutex/floor | Redisson | redmutex/Redisson | redlock (polling) | redmutex/redlock |\n",
    );
    t.push_str("|---|---|--:|--:|--:|--:|--:|--:|--:|\n");
    let mut row = |label: &str, unit: &str, ours: f64, cols: [(f64, f64); 3]| {
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
    };
    let none = (f64::NAN, f64::NAN);
    let rtt = g("floor_rtt_us");
    let c1 = g("uncontended_1t_cycles_per_sec");
    row(
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
            none,
        ],
    );
    row(
        "uncontended, 1 thread (floor: raw acquire+release scripts)",
        "cycles/s",
        c1,
        [
            (
                g("floor_script_cycles_per_sec"),
                g("uncontended_1t_cycle_over_raw_scripts"),
            ),
            none,
            none,
        ],
    );
    let c16 = g("uncontended_16t_cycles_per_sec");
    row(
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
            none,
        ],
    );
    row(
        "uncontended, 16 threads (floor: redis-benchmark -c 16, 2 EVALSHA)",
        "cycles/s",
        c16,
        [
            (
                g("floor_redis_benchmark_evalsha_per_sec") / 2.0,
                (g("floor_redis_benchmark_evalsha_per_sec") / 2.0) / c16,
            ),
            none,
            none,
        ],
    );
    row(
        "uncontended, 16 threads (floor: 16 conns, raw scripts)",
        "cycles/s",
        c16,
        [
            (
                g("floor_16t_script_cycles_per_sec"),
                g("uncontended_16t_cycle_over_raw_scripts"),
            ),
            none,
            none,
        ],
    );
    for threads in THREADS {
        let key = format!("handoff_{threads}t_per_sec");
        let ours = g(&key);
        row(
            &format!("hand-offs per second, {threads} threads (lock changing threads)"),
            "/s",
            ours,
            [
                none,
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
    for (m, what) in [
        ("", "hand-off"),
        ("_takeover", "takeover (first unlock while waiting → holds)"),
    ] {
        for threads in THREADS {
            for (p, pl) in [("p50", "p50"), ("p99", "p99"), ("p999", "p99.9")] {
                let key = format!("handoff_{threads}t{m}_{p}");
                row(
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
    let wd = g("watchdog_locks");
    row(
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
            none,
            none,
        ],
    );
    row(
        "client memory per held lock (live heap)",
        "bytes",
        g("memory_heap_bytes_per_held_lock"),
        [none, none, none],
    );
    row(
        "client memory per held lock (RSS delta)",
        "bytes",
        g("memory_rss_bytes_per_held_lock"),
        [none, none, none],
    );
    row(
        &format!("idle client, {} s: commands sent", num(g("idle_seconds"))),
        "commands/s",
        g("idle_commands_per_sec"),
        [none, none, none],
    );
    row(
        "new subscription in effect, p50",
        "µs",
        g("subscribe_p50_us"),
        [(rtt, g("subscribe_p50_rtt")), none, none],
    );
    row(
        "new subscription in effect, p99",
        "µs",
        g("subscribe_p99_us"),
        [(rtt, g("subscribe_p99_us") / rtt), none, none],
    );

    let _ = writeln!(
        t,
        "\nFloor round trip (acquire-shaped EVALSHA, one connection): {} µs, of which {} µs \
         inside Redis; a raw acquire+release cycle spends {} µs inside Redis (release ≥ {} \
         µs). redmutex sent {} EVALSHA and {} latch DEL batches per uncontended cycle. PING {} /s; redis-benchmark \
         -c 16 EVALSHA {} /s. Redisson: {}. Polling crate: {} (default retry delay 200 \
         ms). Mode: {}.",
        num(rtt),
        num(g("server_acquire_shape_us_per_call")),
        num(g("server_script_cycle_us")),
        num(g("server_release_us_at_least")),
        num(g("uncontended_1t_evalsha_per_cycle")),
        num(g("uncontended_1t_latch_dels_per_cycle")),
        num(g("floor_ping_per_sec")),
        num(g("floor_redis_benchmark_evalsha_per_sec")),
        match fig.values.get("redisson_status") {
            Some(Value::Text(s)) => format!("{REDISSON_VERSION} ({s})"),
            _ => "not run".to_owned(),
        },
        POLLING_CRATE,
        match fig.values.get("mode") {
            Some(Value::Text(s)) => s.clone(),
            _ => String::new(),
        },
    );
    t.push_str("\n| target | measured | met |\n|---|---|---|\n");
    let mut target = |name: &str, measured: String, met: Option<bool>| {
        let met = match met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "not measured",
        };
        let _ = writeln!(t, "| {name} | {measured} | {met} |");
    };
    let check = |v: f64, ok: bool| v.is_finite().then_some(ok);
    let v = g("uncontended_1t_cycle_over_two_evalsha");
    target(
        "uncontended cycle ≤ 1.1 × two floor EVALSHA RTT",
        format!("{}×", ratio(v)),
        check(v, v <= 1.1),
    );
    for threads in [2, 4] {
        let v = g(&format!("ratio_handoff_{threads}t_p50_over_rtt"));
        target(
            &format!("hand-off p50 ≤ 3 RTT, {threads} threads"),
            format!("{} RTT", ratio(v)),
            check(v, v <= 3.0),
        );
        let v = g(&format!("handoff_{threads}t_p99_us"));
        target(
            &format!("hand-off p99 ≤ 1 ms, {threads} threads"),
            format!("{} µs", num(v)),
            check(v, v <= 1000.0),
        );
    }
    let mut worst = f64::NEG_INFINITY;
    let mut worst_at = String::new();
    let mut consider = |key: &str, label: &str| {
        let v = g(key);
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
    target(
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
            name,
            format!("worst time ratio {}", ratio(worst)),
            check(worst, worst <= 0.1),
        );
    }
    let v = g("watchdog_evals_per_period");
    target(
        &format!("≤ 100 EVALs per renewal period for {wd:.0} held locks"),
        num(v),
        check(v, v <= 100.0),
    );
    let v = g("idle_commands_per_sec");
    target(
        "0 commands/s from an idle client",
        format!("{} /s", num(v)),
        check(v, v == 0.0),
    );
    t
}
