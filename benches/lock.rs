//! Lock benchmarks against a throwaway `redis-server`, reported as ratios to floors
//! measured in the same run.
//!
//! ```text
//! cargo bench --bench lock                     # full run (about a minute)
//! cargo bench --bench lock -- --quick          # a few seconds, for CI
//! cargo bench --bench lock -- --json out.json  # also write the figures as JSON
//! ```

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redmutex::{Client, Config};

struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(["--logfile", "", "--daemonize", "no"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("redis-server on PATH");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        assert!(lines.any(|l| l.unwrap().contains("Ready to accept connections")));
        std::thread::spawn(move || for _ in lines {});
        Self {
            child,
            url: format!("redis://127.0.0.1:{port}/"),
        }
    }

    fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url.as_str())
            .unwrap()
            .get_connection()
            .unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Settings {
    quick: bool,
    json: Option<String>,
}

impl Settings {
    fn span(&self) -> Duration {
        if self.quick {
            Duration::from_millis(300)
        } else {
            Duration::from_secs(3)
        }
    }
}

/// Round trips per second of `op` on one thread for `span`, after a short warm-up.
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

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[(((sorted.len() - 1) as f64) * q).round() as usize]
}

struct Report {
    rows: Vec<(String, String, f64, String)>,
    json: Vec<(String, f64)>,
}

impl Report {
    fn add(&mut self, key: &str, label: &str, value: f64, unit: &str) {
        self.rows
            .push((key.to_owned(), label.to_owned(), value, unit.to_owned()));
        self.json.push((key.to_owned(), value));
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut settings = Settings {
        quick: false,
        json: None,
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => settings.quick = true,
            "--json" => settings.json = args.next(),
            _ => {} // cargo passes --bench
        }
    }
    let server = Server::start();
    let mut report = Report {
        rows: Vec::new(),
        json: Vec::new(),
    };
    let span = settings.span();

    // Floors: one connection, one round trip at a time.
    let mut raw = server.conn();
    let ping = rate(span, || {
        redis::cmd("PING").query::<String>(&mut raw).unwrap();
    });
    let shape = redis::Script::new(include_str!("../lua/acquire.lua"));
    let evalsha = rate(span, || {
        // The acquire script's shape on a key held by someone else: one EXISTS, one
        // HEXISTS, one PTTL.
        shape
            .key("bench:floor")
            .arg(30_000)
            .arg("floor:1")
            .invoke::<Option<i64>>(&mut raw)
            .map(drop)
            .unwrap();
    });
    let _: () = redis::cmd("DEL")
        .arg("bench:floor")
        .query(&mut raw)
        .unwrap();
    // The two scripts of one lock+unlock cycle, run raw on one connection: what the cycle
    // costs without any library code around it.
    let release = redis::Script::new(include_str!("../lua/release.lua"));
    let mut n = 0u64;
    let scripts = rate(span, || {
        n += 1;
        let held: Option<i64> = shape
            .key("bench:raw")
            .arg(30_000)
            .arg("raw:1")
            .invoke(&mut raw)
            .unwrap();
        assert!(held.is_none());
        let latch = format!("redisson_unlock_latch:{{bench:raw}}:{n:032x}");
        release
            .key("bench:raw")
            .key("redisson_lock__channel:{bench:raw}")
            .key(&latch)
            .arg("0")
            .arg(30_000)
            .arg("raw:1")
            .arg("PUBLISH")
            .arg(1)
            .invoke::<Option<i64>>(&mut raw)
            .unwrap();
    });
    let rtt_us = 1e6 / evalsha;
    report.add(
        "floor_ping_per_sec",
        "floor: PING round trips/s",
        ping,
        "/s",
    );
    report.add(
        "floor_evalsha_per_sec",
        "floor: acquire-shaped EVALSHA round trips/s",
        evalsha,
        "/s",
    );
    report.add(
        "floor_script_cycles_per_sec",
        "floor: raw acquire+release script cycles/s",
        scripts,
        "/s",
    );

    let client = Client::new(Config::builder().address(server.url.as_str()).build()).unwrap();

    // Uncontended: one thread, one key.
    let lock = client.get_lock("bench:uncontended");
    let cycles = rate(span, || lock.lock().unwrap().unlock().unwrap());
    report.add(
        "uncontended_1t_cycles_per_sec",
        "redmutex lock+unlock cycles/s, 1 thread",
        cycles,
        "/s",
    );
    report.add(
        "uncontended_1t_cycle_over_two_evalsha",
        "  cycle time ÷ two EVALSHA round trips (target ≤ 1.1)",
        (1.0 / cycles) / (2.0 / evalsha),
        "×",
    );
    report.add(
        "uncontended_1t_cycle_over_raw_scripts",
        "  cycle time ÷ raw script cycle (library overhead)",
        scripts / cycles,
        "×",
    );

    // Uncontended: 16 threads over 1,000 keys.
    let total = AtomicU64::new(0);
    let started = Instant::now();
    std::thread::scope(|s| {
        for t in 0..16 {
            let (client, total) = (&client, &total);
            s.spawn(move || {
                let mut i = t;
                let end = Instant::now() + span;
                while Instant::now() < end {
                    let lock = client.get_lock(format!("bench:many:{}", i % 1000));
                    lock.lock().unwrap().unlock().unwrap();
                    total.fetch_add(1, Ordering::Relaxed);
                    i += 16;
                }
            });
        }
    });
    let many = total.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    report.add(
        "uncontended_16t_cycles_per_sec",
        "redmutex cycles/s, 16 threads × 1,000 keys",
        many,
        "/s",
    );

    // Contended hand-off: unlock on one thread → another thread holds the lock.
    for threads in [2usize, 4, 16] {
        let samples = handoff(&client, threads, span);
        let p50 = percentile(&samples, 0.50);
        let p99 = percentile(&samples, 0.99);
        let p999 = percentile(&samples, 0.999);
        report.add(
            &format!("handoff_{threads}t_p50_us"),
            &format!("hand-off p50, {threads} threads"),
            p50,
            "µs",
        );
        report.add(
            &format!("handoff_{threads}t_p99_us"),
            &format!("hand-off p99, {threads} threads"),
            p99,
            "µs",
        );
        report.add(
            &format!("handoff_{threads}t_p999_us"),
            &format!("hand-off p99.9, {threads} threads"),
            p999,
            "µs",
        );
        report.add(
            &format!("handoff_{threads}t_p50_rtt"),
            "  p50 in EVALSHA round trips (target ≤ 3 at 2, 4)",
            p50 / rtt_us,
            "RTT",
        );
        report.add(
            &format!("handoff_{threads}t_samples"),
            "  samples",
            samples.len() as f64,
            "",
        );
    }

    // How long a new subscription takes to take effect: from a waiter's first call until
    // Redis counts its subscriber, probed by a tight PUBSUB NUMSUB loop.
    let subs = subscription_latency(&server, &client, if settings.quick { 20 } else { 200 });
    report.add(
        "subscribe_p50_us",
        "new subscription in effect, p50",
        percentile(&subs, 0.5),
        "µs",
    );
    report.add(
        "subscribe_p99_us",
        "new subscription in effect, p99",
        percentile(&subs, 0.99),
        "µs",
    );
    report.add(
        "subscribe_p50_rtt",
        "  p50 in EVALSHA round trips",
        percentile(&subs, 0.5) / rtt_us,
        "RTT",
    );

    // Idle client: commands sent in a quiet period.
    let idle_span = if settings.quick {
        Duration::from_millis(500)
    } else {
        Duration::from_secs(5)
    };
    let idle = Client::new(Config::builder().address(server.url.as_str()).build()).unwrap();
    let before = total_commands(&mut raw);
    std::thread::sleep(idle_span);
    let after = total_commands(&mut raw);
    drop(idle);
    // Our own INFO call is one of them.
    report.add(
        "idle_commands_per_sec",
        "idle client: commands/s",
        (after - before - 1) as f64 / idle_span.as_secs_f64(),
        "/s",
    );

    // Watchdog cost: many held locks, EVALs per renewal period.
    let held = if settings.quick { 1_000 } else { 10_000 };
    let (evals, period) = watchdog_cost(&server, held);
    report.add("watchdog_locks", "watchdog: locks held", held as f64, "");
    report.add(
        "watchdog_evals_per_period",
        "watchdog: renewal EVALs per period",
        evals,
        "",
    );
    report.add(
        "watchdog_period_ms",
        "  period",
        period.as_millis() as f64,
        "ms",
    );

    println!("{:<58} {:>14}", "measure", "value");
    for (_, label, value, unit) in &report.rows {
        println!("{label:<58} {value:>12.2} {unit}");
    }
    if let Some(path) = &settings.json {
        let body: Vec<String> = report
            .json
            .iter()
            .map(|(k, v)| {
                if v.is_finite() {
                    format!("  \"{k}\": {v:.3}")
                } else {
                    format!("  \"{k}\": null")
                }
            })
            .collect();
        std::fs::write(path, format!("{{\n{}\n}}\n", body.join(",\n"))).unwrap();
        println!("wrote {path}");
    }
}

/// Hand-off latencies in µs with `threads` threads on one lock.
fn handoff(client: &Client, threads: usize, span: Duration) -> Vec<f64> {
    let name = format!("bench:handoff:{threads}");
    // Who released last, and when (just before the unlock call).
    let last: Arc<Mutex<Option<(usize, Instant)>>> = Arc::new(Mutex::new(None));
    let samples = Arc::new(Mutex::new(Vec::new()));
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (client, name, last, samples, stop) = (client, &name, &last, &samples, &stop);
            s.spawn(move || {
                let lock = client.get_lock(name.clone());
                let mut mine = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let guard = lock.lock().unwrap();
                    let now = Instant::now();
                    if let Some((who, at)) = last.lock().take()
                        && who != t
                    {
                        mine.push(now.duration_since(at).as_secs_f64() * 1e6);
                    }
                    // A short critical section.
                    let spin = Instant::now();
                    while spin.elapsed() < Duration::from_micros(20) {
                        std::hint::spin_loop();
                    }
                    *last.lock() = Some((t, Instant::now()));
                    guard.unlock().unwrap();
                }
                samples.lock().extend(mine);
            });
        }
        std::thread::sleep(span);
        stop.store(true, Ordering::Relaxed);
    });
    let mut v = std::mem::take(&mut *samples.lock());
    v.sort_by(f64::total_cmp);
    v
}

fn subscription_latency(server: &Server, client: &Client, rounds: usize) -> Vec<f64> {
    let holder = Client::new(Config::builder().address(server.url.as_str()).build()).unwrap();
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

fn total_commands(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("stats").query(conn).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

/// Holds `n` locks under a 3 s watchdog and counts renewal EVALs over two periods.
fn watchdog_cost(server: &Server, n: usize) -> (f64, Duration) {
    let lease = Duration::from_secs(3);
    let client = Client::new(
        Config::builder()
            .address(server.url.as_str())
            .lock_watchdog_timeout(lease)
            .build(),
    )
    .unwrap();
    let locks: Vec<_> = (0..n)
        .map(|i| client.get_lock(format!("bench:wd:{i}")))
        .collect();
    for lock in &locks {
        lock.lock().unwrap().detach();
    }
    let mut raw = server.conn();
    let period = lease / 3;
    let before = evalsha_calls(&mut raw);
    std::thread::sleep(period * 2);
    let after = evalsha_calls(&mut raw);
    for lock in &locks {
        lock.unlock().unwrap();
    }
    ((after - before) as f64 / 2.0, period)
}

fn evalsha_calls(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|v| v.split(',').next()?.parse().ok())
        .unwrap_or(0)
}
