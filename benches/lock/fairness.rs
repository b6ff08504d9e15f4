//! Fairness and the interleaved contended comparison.
//!
//! - Two processes × eight threads on one lock, every thread re-acquiring at once after
//!   its 20 µs section: each process's share of the sections, under the default policy
//!   (`fairness_2proc_*`) and under `Fairness::Barging` (`fairness_2proc_barging_*`).
//!   The processes are this bench binary started again with `--fairness-child`.
//! - Hand-off rounds: redmutex and Java Redisson alternately, several rounds at every
//!   thread count, each round's time ratios and their median (`rounds_*`), so a noisy
//!   burst lands on one round of one side, not on the whole comparison.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use redmutex::{Client, Config, Fairness};

use crate::THREADS;
use crate::figures::Figures;
use crate::handoff::{Latencies, critical_section, redmutex_handoff};
use crate::measure::percentile;
use crate::redisson::JavaRounds;
use crate::server::Server;
use crate::settings::Settings;

/// Threads per process in the two-process scenario.
const CHILD_THREADS: usize = 8;

/// Runs the child role when this process was started as one (`--fairness-child <url>
/// <lock> <eventual|barging>`): true when it did, and the bench must not run.
pub(crate) fn child() -> bool {
    let args: Vec<String> = std::env::args().collect();
    let Some(at) = args.iter().position(|a| a == "--fairness-child") else {
        return false;
    };
    let (url, name, policy) = (&args[at + 1], &args[at + 2], &args[at + 3]);
    let fairness = if policy == "barging" {
        Fairness::Barging
    } else {
        Fairness::default()
    };
    let client = Client::new(
        Config::builder()
            .address(url.as_str())
            .fairness(fairness)
            .build(),
    )
    .unwrap();
    // One cycle first: connected, scripts loaded.
    client
        .get_lock(name.clone())
        .lock()
        .unwrap()
        .unlock()
        .unwrap();
    let counts: Vec<AtomicU64> = (0..CHILD_THREADS).map(|_| AtomicU64::new(0)).collect();
    let (go, stop) = (AtomicBool::new(false), AtomicBool::new(false));
    let mut stdin = std::io::stdin().lock();
    std::thread::scope(|s| {
        for count in &counts {
            let (client, go, stop) = (&client, &go, &stop);
            s.spawn(move || {
                let lock = client.get_lock(name.clone());
                while !go.load(Ordering::Acquire) {
                    std::thread::park_timeout(Duration::from_millis(1));
                }
                while !stop.load(Ordering::Relaxed) {
                    let guard = lock.lock().unwrap();
                    critical_section();
                    count.fetch_add(1, Ordering::Relaxed);
                    guard.unlock().unwrap();
                }
            });
        }
        println!("ready");
        let mut line = String::new();
        let _ = stdin.read_line(&mut line); // "go"
        go.store(true, Ordering::Release);
        line.clear();
        let _ = stdin.read_line(&mut line); // "stop", or the parent went away
        stop.store(true, Ordering::Relaxed);
    });
    let counts: Vec<String> = counts
        .iter()
        .map(|c| c.load(Ordering::Relaxed).to_string())
        .collect();
    println!("sections {}", counts.join(" "));
    true
}

/// One child process, started and ready.
struct Child8 {
    child: Child,
    out: BufReader<std::process::ChildStdout>,
}

impl Child8 {
    /// This bench binary as a redmutex child under `policy`.
    fn start(server: &Server, name: &str, policy: &str) -> Self {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command.args(["--fairness-child", &server.url, name, policy]);
        Self::spawn(command).expect("fairness child did not start")
    }

    /// The Java harness as a Redisson child (`Bench <url> fair-child <lock>`, the same
    /// protocol); `None`, said loudly, if it did not start.
    fn start_java(server: &Server, classpath: &str, name: &str) -> Option<Self> {
        let mut command = Command::new("java");
        command
            .arg("-cp")
            .arg(classpath)
            .arg("dev.redmutex.interop.Bench")
            .args([server.url.as_str(), "fair-child", name]);
        let child = Self::spawn(command);
        if child.is_none() {
            eprintln!("the Java fairness child did not start");
        }
        child
    }

    fn spawn(mut command: Command) -> Option<Self> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .ok()?;
        let mut out = BufReader::new(child.stdout.take()?);
        let mut line = String::new();
        out.read_line(&mut line).ok()?;
        if line.trim() != "ready" {
            let _ = child.kill();
            return None;
        }
        Some(Self { child, out })
    }

    fn say(&mut self, word: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{word}").unwrap();
        stdin.flush().unwrap();
    }

    /// Each thread's sections.
    fn finish(mut self) -> Vec<u64> {
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        let _ = self.child.wait();
        line.trim()
            .strip_prefix("sections ")
            .unwrap_or_default()
            .split(' ')
            .filter_map(|n| n.parse().ok())
            .collect()
    }
}

/// Two processes × eight threads on one lock for `span`, under `policy`: each process's
/// sections per thread.
fn two_processes(server: &Server, policy: &str, span: Duration) -> [Vec<u64>; 2] {
    let name = format!("bench:fairness:{policy}");
    let children = [
        Child8::start(server, &name, policy),
        Child8::start(server, &name, policy),
    ];
    race(children, span)
}

/// Starts both children's sections together, lets them run for `span`, and returns each
/// one's sections per thread.
fn race(mut children: [Child8; 2], span: Duration) -> [Vec<u64>; 2] {
    for c in &mut children {
        c.say("go");
    }
    std::thread::sleep(span);
    for c in &mut children {
        c.say("stop");
    }
    children.map(Child8::finish)
}

/// One Redisson process and one redmutex process, eight threads each, on one lock:
/// Java's share of the sections and the slower side's (`fairness_java_rust_*`), under
/// the default policy and under `Barging` (`fairness_java_rust_barging_*`). Java's
/// sections are its JVM's after a warm-up of its own, so the window measures the
/// steady state of both.
pub(crate) fn java_rust_shares(server: &Server, settings: &Settings, fig: &mut Figures) {
    crate::phase("fairness: Redisson and redmutex processes on one lock");
    let Some(classpath) = crate::redisson::build_harness() else {
        return;
    };
    for (policy, prefix) in [
        ("eventual", "fairness_java_rust"),
        ("barging", "fairness_java_rust_barging"),
    ] {
        let name = format!("bench:fairness:java:{policy}");
        let Some(java) = Child8::start_java(server, &classpath, &name) else {
            return;
        };
        let rust = Child8::start(server, &name, policy);
        let span = settings.span();
        let [j, r] = race([java, rust], span);
        let (sj, sr) = (j.iter().sum::<u64>(), r.iter().sum::<u64>());
        let total = (sj + sr).max(1) as f64;
        fig.set(&format!("{prefix}_min_share"), sj.min(sr) as f64 / total);
        fig.set(&format!("{prefix}_java_share"), sj as f64 / total);
        fig.set(
            &format!("{prefix}_sections_per_sec"),
            total / span.as_secs_f64(),
        );
    }
}

/// The two-process scenario under the default policy and under `Barging`.
pub(crate) fn two_process_shares(server: &Server, settings: &Settings, fig: &mut Figures) {
    crate::phase("fairness: 2 processes × 8 threads on one lock");
    for (policy, prefix) in [
        ("eventual", "fairness_2proc"),
        ("barging", "fairness_2proc_barging"),
    ] {
        let span = settings.span();
        let [a, b] = two_processes(server, policy, span);
        let (sa, sb) = (a.iter().sum::<u64>(), b.iter().sum::<u64>());
        let total = (sa + sb).max(1) as f64;
        fig.set(&format!("{prefix}_min_share"), sa.min(sb) as f64 / total);
        fig.set(
            &format!("{prefix}_sections_per_sec"),
            total / span.as_secs_f64(),
        );
        // The least busy thread against an even split of all sections over 16 threads.
        let threads = (a.len() + b.len()).max(1) as f64;
        let least = a.iter().chain(&b).min().copied().unwrap_or(0) as f64;
        fig.set(
            &format!("{prefix}_min_thread_share_of_even"),
            least / (total / threads),
        );
    }
}

/// Hand-off rounds, redmutex then Redisson at each thread count, `rounds` times: per
/// round the time ratios redmutex ÷ Redisson of takeover p99 and p99.9 and of the time
/// per hand-off (Redisson's hand-offs/s ÷ ours), then their medians.
pub(crate) fn handoff_rounds(
    client: &Client,
    java: &mut JavaRounds,
    settings: &Settings,
    fig: &mut Figures,
) {
    crate::phase("hand-off rounds: redmutex and Redisson alternately");
    let rounds = settings.rounds();
    let span = settings.round_span();
    fig.set("rounds", rounds as f64);
    for threads in THREADS {
        let mut per: [Vec<f64>; 3] = Default::default();
        for round in 0..rounds {
            let ours = redmutex_handoff(client, threads, span);
            let Some(theirs) = java.handoff(threads, span.as_millis() as u64) else {
                return;
            };
            let ratios = [
                tail(&ours, 0.99) / tail(&theirs, 0.99),
                tail(&ours, 0.999) / tail(&theirs, 0.999),
                theirs.handoff.len() as f64 / ours.handoff.len().max(1) as f64,
            ];
            for ((name, v), all) in NAMES.iter().zip(ratios).zip(per.iter_mut()) {
                fig.set(&format!("rounds_handoff_{threads}t_{name}_r{round}"), v);
                all.push(v);
            }
        }
        for (name, mut all) in NAMES.iter().zip(per) {
            all.sort_by(f64::total_cmp);
            fig.set(
                &format!("rounds_handoff_{threads}t_{name}_median"),
                percentile(&all, 0.5),
            );
        }
    }
}

/// The per-round ratio names, in [`handoff_rounds`]'s order.
pub(crate) const NAMES: [&str; 3] = [
    "takeover_p99_ratio",
    "takeover_p999_ratio",
    "handoff_time_ratio",
];

fn tail(lat: &Latencies, q: f64) -> f64 {
    percentile(&lat.takeover, q)
}
