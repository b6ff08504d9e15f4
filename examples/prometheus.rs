//! redmutex's metrics in Prometheus text format, served on `/metrics`.
//!
//! redmutex records through the `metrics` facade and exports nothing itself; the
//! application installs a recorder. Here it is `metrics-exporter-prometheus` without its
//! default features (no async runtime, no HTTP stack): the recorder renders the text
//! format and a plain `std::net` listener serves it. Histograms get buckets, so they
//! render as Prometheus histograms (for `histogram_quantile`) instead of summaries.
//!
//! The example then contends for a lock from a few threads, lets one wait run out,
//! scrapes its own endpoint like Prometheus would and checks that the series are there.
//! `cargo run --example prometheus` runs it against a throwaway redis-server; the test
//! suite runs it the same way (`cargo test`). `--serve` keeps serving afterwards, for a
//! look with `curl http://127.0.0.1:<port>/metrics`.

// A throwaway redis-server, started as the test suite starts its own.
use redmutex_harness::server;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use redmutex::Client;

const THREADS: usize = 4;
const ROUNDS: usize = 25;

/// Bucket bounds in seconds, from a sub-millisecond uncontended grant to a minute-long
/// hold.
const SECONDS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];
const ATTEMPTS: &[f64] = &[1.0, 2.0, 3.0, 5.0, 10.0, 20.0];

/// Installs the Prometheus recorder as the process's recorder.
fn install() -> Result<PrometheusHandle, String> {
    let recorder = PrometheusBuilder::new()
        .with_recommended_naming(true)
        .set_buckets_for_metric(Matcher::Suffix("duration".into()), SECONDS)
        .and_then(|b| b.set_buckets_for_metric(Matcher::Suffix("attempts".into()), ATTEMPTS))
        .map_err(|e| e.to_string())?
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).map_err(|e| e.to_string())?;
    // Units and help texts, once the recorder is there to take them.
    redmutex::metrics::describe();
    Ok(handle)
}

/// Serves `GET /metrics` on a loopback port until the process ends; returns the port.
fn serve(handle: PrometheusHandle) -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            if let Err(e) = answer(stream, &handle) {
                eprintln!("scrape failed: {e}");
            }
        }
    });
    Ok(port)
}

fn answer(stream: TcpStream, handle: &PrometheusHandle) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    // The rest of the request head is of no interest.
    let mut line = String::new();
    while reader.read_line(&mut line)? > 2 {
        line.clear();
    }
    let mut stream = reader.into_inner();
    if !request.starts_with("GET /metrics ") {
        return stream.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
    }
    // Without an exporter task, upkeep (draining histogram buffers) is the scraper's job.
    handle.run_upkeep();
    let body = handle.render();
    write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    )
}

/// What Prometheus would get from `http://127.0.0.1:<port>/metrics`.
fn scrape(port: u16) -> Result<String, String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nhost: localhost\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| e.to_string())?;
    match response.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.1 200") => Ok(body.to_owned()),
        _ => Err(format!("bad response: {response:.200}")),
    }
}

/// Some traffic: threads taking turns on one lock, and one wait that runs out.
fn workload(client: &Client) -> Result<(), String> {
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(|| -> redmutex::Result<()> {
                    let lock = client.get_lock("report:daily");
                    for _ in 0..ROUNDS {
                        let guard = lock.lock()?;
                        std::thread::sleep(Duration::from_millis(1));
                        guard.unlock()?;
                    }
                    Ok(())
                })
            })
            .collect();
        for w in workers {
            w.join()
                .map_err(|_| "a worker panicked".to_owned())?
                .map_err(|e| e.to_string())?;
        }
        Ok::<(), String>(())
    })?;
    let lock = client.get_lock("report:weekly");
    let held = lock.lock().map_err(|e| e.to_string())?;
    let waited = std::thread::scope(|s| {
        s.spawn(|| {
            lock.try_lock_for(Duration::from_millis(50))
                .map(|g| g.is_some())
        })
        .join()
        .map_err(|_| "the waiter panicked".to_owned())
    })?;
    if waited.map_err(|e| e.to_string())? {
        return Err("a second thread got a held lock".into());
    }
    held.unlock().map_err(|e| e.to_string())
}

/// What a sample should read.
#[derive(Debug, Clone, Copy)]
enum Expect {
    Is(f64),
    AtLeast(f64),
}

impl Expect {
    fn met_by(self, v: f64) -> bool {
        match self {
            Self::Is(x) => v == x,
            Self::AtLeast(x) => v >= x,
        }
    }
}

/// The value of the sample line that starts with `series` (name and labels).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

fn run() -> Result<(), String> {
    let handle = install()?;
    let port = serve(handle)?;
    let redis = server::RedisServer::start(&[])?;
    let client = Client::open(&redis.url()).map_err(|e| e.to_string())?;
    workload(&client)?;

    let text = scrape(port)?;
    let cycles = (THREADS * ROUNDS + 1) as f64;
    let checks = [
        (
            r#"redmutex_lock_acquire_duration_seconds_count{kind="RLock",outcome="acquired"}"#,
            Expect::Is(cycles),
        ),
        (
            r#"redmutex_lock_acquire_duration_seconds_count{kind="RLock",outcome="timeout"}"#,
            Expect::Is(1.0),
        ),
        (
            r#"redmutex_lock_held_duration_seconds_count{kind="RLock"}"#,
            Expect::Is(cycles),
        ),
        (
            r#"redmutex_lock_acquire_attempts_bucket{kind="RLock",outcome="acquired",le="1"}"#,
            Expect::AtLeast(1.0),
        ),
        (r#"redmutex_locks_held{kind="RLock"}"#, Expect::Is(0.0)),
        ("redmutex_waits_total", Expect::AtLeast(1.0)),
        ("redmutex_waiters", Expect::Is(0.0)),
    ];
    for (series, expect) in checks {
        match sample(&text, series) {
            Some(v) if expect.met_by(v) => println!("{series} {v}"),
            other => {
                return Err(format!(
                    "{series}: {other:?}, expected {expect:?}, in\n{text}"
                ));
            }
        }
    }
    if !text.contains("# HELP redmutex_lock_acquire_duration_seconds ") {
        return Err(format!("no help text for the acquire histogram in\n{text}"));
    }
    println!("ok: scraped http://127.0.0.1:{port}/metrics");
    if std::env::args().any(|a| a == "--serve") {
        println!("serving until Ctrl-C");
        loop {
            std::thread::park();
        }
    }
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("prometheus FAILED: {e}");
        std::process::exit(1);
    }
}
