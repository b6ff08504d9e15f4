//! Java Redisson, through `tests/interop`'s `Bench` harness: one JVM runs every scenario
//! after one shared warm-up, and its figures join the run's.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use crate::figures::{Figures, Sample};
use crate::handoff::{Latencies, record_latencies};
use crate::server::Server;
use crate::settings::Settings;
use crate::{REDISSON_VERSION, THREADS};

/// Redisson's RedLock over `urls` (the first also holds the single-server RLock), through
/// the harness's `redlock` mode: `(RedLock cycles/s, RLock cycles/s, median time ratio)`,
/// or `None` (said loudly) when Java is missing or the run failed.
pub(crate) fn redlock(urls: &[String], settings: &Settings) -> Option<(f64, f64, f64)> {
    let classpath = build_harness()?;
    let out = Command::new("java")
        .arg(format!("-Dbench.warmupMs={}", settings.java_warmup_ms()))
        .arg("-cp")
        .arg(classpath)
        .arg("dev.redmutex.interop.Bench")
        .arg(&urls[0])
        .arg("redlock")
        .arg(settings.java_ms().to_string())
        .args(&urls[1..])
        .stderr(Stdio::inherit())
        .output();
    let line = match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        Ok(o) => {
            loud(&format!("the Java RedLock run failed ({})", o.status));
            return None;
        }
        Err(e) => {
            loud(&format!("cannot run java: {e}"));
            return None;
        }
    };
    Some((
        json_number(&line, "redlock_cycles_per_sec")?,
        json_number(&line, "single_cycles_per_sec")?,
        json_number(&line, "redlock_cycle_ratio")?,
    ))
}

/// Builds the Java harness, runs its whole suite against `server`, and records the
/// figures; a missing JDK or a failed build or run is recorded and said loudly. The JVM
/// then stays up for the interleaved hand-off rounds, which it returns (`None` without
/// Java).
pub(crate) fn redisson(
    server: &Server,
    settings: &Settings,
    fig: &mut Figures,
    samples: &mut Vec<Sample>,
) -> Option<JavaRounds> {
    let Some(classpath) = build_harness() else {
        fig.text(
            "redisson_status",
            "unavailable: java/mvn missing or build failed",
        );
        return None;
    };
    let dir = std::env::temp_dir().join(format!("redmutex-bench-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let (stdout, rounds) = run_suite(server, settings, &classpath, &dir);
    let ok = record(&stdout, &dir, settings, fig, samples);
    fig.set("redisson_warmup_ms", settings.java_warmup_ms() as f64);
    fig.text(
        "redisson_status",
        if ok { "ok" } else { "some runs failed" },
    );
    rounds
}

/// The JVM of the suite, kept warm for hand-off rounds that alternate with redmutex's:
/// one stdin line per round, one JSON line back, the samples in a file.
pub(crate) struct JavaRounds {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    dir: PathBuf,
    next: usize,
}

impl JavaRounds {
    /// One Redisson hand-off measurement at `threads` threads for `ms`; `None` (said
    /// loudly) if the JVM did not answer.
    pub(crate) fn handoff(&mut self, threads: usize, ms: u64) -> Option<Latencies> {
        let csv = self.dir.join(format!("round-{}.csv", self.next));
        self.next += 1;
        let stdin = self.stdin.as_mut()?;
        writeln!(stdin, "handoff {threads} {ms} {}", csv.display()).ok()?;
        stdin.flush().ok()?;
        let mut line = String::new();
        self.stdout.read_line(&mut line).ok()?;
        if json_number(&line, "threads") != Some(threads as f64) {
            loud(&format!("a Java hand-off round failed: {line:?}"));
            return None;
        }
        let text = std::fs::read_to_string(&csv).ok()?;
        let _ = std::fs::remove_file(&csv);
        Some(parse_samples(&text))
    }
}

impl Drop for JavaRounds {
    fn drop(&mut self) {
        // Closing stdin ends the rounds loop; the JVM shuts its client down and exits.
        drop(self.stdin.take());
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The classpath of the Java harness, built for `REDISSON_VERSION` by `build.sh`.
pub(crate) fn build_harness() -> Option<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let outdir = root.join("target/interop").join(REDISSON_VERSION);
    let built = Command::new(root.join("tests/interop/build.sh"))
        .arg(REDISSON_VERSION)
        .arg(&outdir)
        .status();
    match built {
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
    }
}

/// Runs every scenario in one JVM, after one shared warm-up: Redisson keeps getting
/// faster for many seconds at these rates (measured: 1,500 → 2,800 uncontended cycles/s
/// between a 2 s and a 20 s warm-up), so a short per-process warm-up would be unfair.
/// Returns its stdout up to its "ready" line, one JSON line per scenario (the hand-off
/// samples go to `dir`), and the JVM, which then waits for hand-off rounds.
fn run_suite(
    server: &Server,
    settings: &Settings,
    classpath: &str,
    dir: &Path,
) -> (String, Option<JavaRounds>) {
    let spawned = Command::new("java")
        .arg(format!("-Dbench.warmupMs={}", settings.java_warmup_ms()))
        .arg("-cp")
        .arg(classpath)
        .arg("dev.redmutex.interop.Bench")
        .arg(&server.url)
        .arg("suite")
        .arg(settings.java_ms().to_string())
        .arg(dir)
        .arg("rounds")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            loud(&format!("cannot run java: {e}"));
            return (String::new(), None);
        }
    };
    let stdin = child.stdin.take();
    let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
    let mut text = String::new();
    loop {
        let mut line = String::new();
        match stdout.read_line(&mut line) {
            Ok(0) | Err(_) => {
                loud(&format!("the Java Bench suite failed: {:?}", child.wait()));
                return (text, None);
            }
            Ok(_) if line.trim() == "ready" => break,
            Ok(_) => text.push_str(&line),
        }
    }
    let rounds = JavaRounds {
        child,
        stdin,
        stdout,
        dir: dir.to_owned(),
        next: 0,
    };
    (text, Some(rounds))
}

/// Records the suite's figures and hand-off samples; whether every scenario reported.
fn record(
    stdout: &str,
    dir: &Path,
    settings: &Settings,
    fig: &mut Figures,
    samples: &mut Vec<Sample>,
) -> bool {
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
    // The JVM's CPU per uncontended cycle, all its threads (absent from an older peer).
    let cpu = line("uncontended", 1).and_then(|l| json_number(l, "cpu_us_per_op"));
    fig.set_opt("cpu_us_per_cycle_redisson", cpu);
    for threads in THREADS {
        let csv = dir.join(format!("handoff-{threads}.csv"));
        let text = std::fs::read_to_string(&csv).ok();
        match (line("handoff", threads), text) {
            (Some(_), Some(text)) => {
                let span = Duration::from_millis(settings.java_ms());
                let lat = parse_samples(&text);
                record_latencies(fig, samples, "redisson_", "redisson", threads, span, lat);
            }
            _ => ok = false,
        }
    }
    ok
}

/// The hand-off samples of one scenario, from `Bench`'s `metric,us` lines, sorted.
fn parse_samples(text: &str) -> Latencies {
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
    Latencies { handoff, takeover }
}

fn loud(msg: &str) {
    eprintln!("\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
    eprintln!("!!! {msg}");
    eprintln!("!!! Redisson figures are recorded as null.");
    eprintln!("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n");
}

/// The number after `"key":` in a one-line JSON object.
pub(crate) fn json_number(line: &str, key: &str) -> Option<f64> {
    let rest = &line[line.find(&format!("\"{key}\":"))? + key.len() + 3..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    rest[..end].trim().parse().ok()
}

/// [`run_suite`] for a deployment other than the bench's own server, without rounds:
/// `target` is what `Bench` connects to (a URL or a Redisson YAML file), `props` extra
/// `-D` settings, `scenarios` the suite's `<scenario>:<threads>:<keys>` list. Returns its
/// stdout, one JSON line per scenario; the hand-off samples go to `dir`.
fn run_suite_once(
    target: &str,
    props: &[String],
    scenarios: &[&str],
    settings: &Settings,
    classpath: &str,
    dir: &Path,
) -> String {
    let out = Command::new("java")
        .arg(format!("-Dbench.warmupMs={}", settings.java_warmup_ms()))
        .args(props)
        .arg("-cp")
        .arg(classpath)
        .arg("dev.redmutex.interop.Bench")
        .arg(target)
        .arg("suite")
        .arg(settings.java_ms().to_string())
        .arg(dir)
        .args(scenarios)
        .stderr(Stdio::inherit())
        .output();
    match out {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).into_owned(),
        Ok(out) => {
            loud(&format!("the Java Bench suite failed: {}", out.status));
            String::new()
        }
        Err(e) => {
            loud(&format!("cannot run java: {e}"));
            String::new()
        }
    }
}

/// Redisson on a topology: `target` is a Redisson YAML file (see `Bench.java`), `synced`
/// overrides its `checkLockSyncedSlaves`. One JVM, after the shared warm-up, runs the
/// uncontended cycle (1 thread, 1 key) and the hand-off at 2 threads; the figures go
/// under `prefix` (`<prefix>uncontended_cycles_per_sec`, `<prefix>uncontended_cycle_us`,
/// `<prefix>handoff_2t_p50_us`, ...) and `<prefix>status`. Whether both reported.
pub(crate) fn topology(
    target: &Path,
    synced: Option<bool>,
    prefix: &str,
    settings: &Settings,
    fig: &mut Figures,
    samples: &mut Vec<Sample>,
) -> bool {
    let Some(classpath) = build_harness() else {
        fig.text(
            &format!("{prefix}status"),
            "unavailable: java/mvn missing or build failed",
        );
        return false;
    };
    let dir = std::env::temp_dir().join(format!(
        "redmutex-bench-{}-{}",
        std::process::id(),
        prefix.trim_end_matches('_')
    ));
    let _ = std::fs::create_dir_all(&dir);
    let props: Vec<String> = synced
        .map(|s| format!("-Dbench.checkLockSyncedSlaves={s}"))
        .into_iter()
        .collect();
    let stdout = run_suite_once(
        &target.to_string_lossy(),
        &props,
        &["uncontended:1:1", "handoff:2:1"],
        settings,
        &classpath,
        &dir,
    );
    let cycles = stdout
        .lines()
        .find(|l| l.contains("\"scenario\":\"uncontended\""))
        .and_then(|l| json_number(l, "ops_per_sec"));
    fig.set_opt(&format!("{prefix}uncontended_cycles_per_sec"), cycles);
    fig.set_opt(
        &format!("{prefix}uncontended_cycle_us"),
        cycles.map(|c| 1e6 / c),
    );
    let text = std::fs::read_to_string(dir.join("handoff-2.csv")).ok();
    let handoff = stdout.contains("\"scenario\":\"handoff\"") && text.is_some();
    if let Some(text) = text.filter(|_| handoff) {
        let span = Duration::from_millis(settings.java_ms());
        let library = format!(
            "redisson-{}",
            prefix
                .replace("redisson_", "")
                .trim_end_matches('_')
                .replace('_', "-")
        );
        record_latencies(
            fig,
            samples,
            prefix,
            &library,
            2,
            span,
            parse_samples(&text),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    let ok = cycles.is_some() && handoff;
    fig.text(
        &format!("{prefix}status"),
        if ok { "ok" } else { "some runs failed" },
    );
    ok
}
