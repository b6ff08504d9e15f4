//! Hand-off: contending threads take turns on one lock, and every change of holder is
//! timed. redmutex, the polling crate, and the time a new waiter's subscription takes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redmutex::Client;

use crate::figures::{Figures, Sample};
use crate::measure::percentile;
use crate::server::Server;
use crate::settings::Settings;
use crate::{POLLING_CRATE, THREADS};

/// The hand-off scenarios at every thread count: redmutex, then the polling crate, then
/// the time a new waiter's subscription takes to take effect.
pub(crate) fn handoffs(
    server: &Server,
    client: &Client,
    settings: &Settings,
    fig: &mut Figures,
    samples: &mut Vec<Sample>,
) {
    let rtt_us = fig.get("floor_rtt_us");

    for threads in THREADS {
        crate::phase(&format!("redmutex hand-off, {threads} threads"));
        let lat = redmutex_handoff(client, threads, settings.handoff_span());
        fig.set(
            &format!("handoff_{threads}t_p50_rtt"),
            percentile(&lat.handoff, 0.5) / rtt_us,
        );
        record_latencies(
            fig,
            samples,
            "",
            "redmutex",
            threads,
            settings.handoff_span(),
            lat,
        );
    }

    for threads in THREADS {
        crate::phase(&format!(
            "polling crate ({POLLING_CRATE}) hand-off, {threads} threads"
        ));
        let lat = redlock_handoff(server, threads, settings.polling_span());
        record_latencies(
            fig,
            samples,
            "polling_",
            "redlock",
            threads,
            settings.polling_span(),
            lat,
        );
    }

    // How long a new subscription takes to take effect: from a waiter's first call until
    // Redis counts its subscriber, probed by a tight PUBSUB NUMSUB loop.
    crate::phase("subscription latency");
    let subs = subscription_latency(server, client, if settings.quick { 20 } else { 200 });
    fig.set("subscribe_p50_us", percentile(&subs, 0.5));
    fig.set("subscribe_p99_us", percentile(&subs, 0.99));
    fig.set("subscribe_p50_rtt", percentile(&subs, 0.5) / rtt_us);
}

/// Hand-off with redmutex: `threads` threads of one client on one lock.
pub(crate) fn redmutex_handoff(client: &Client, threads: usize, span: Duration) -> Latencies {
    let name = format!("bench:handoff:{threads}");
    Recorder::run(threads, span, |t, rec| {
        let lock = client.get_lock(name.clone());
        while !rec.stopped() {
            let called = Instant::now();
            let guard = lock.lock().unwrap();
            rec.acquired(t, called);
            critical_section();
            rec.releasing(t);
            guard.unlock().unwrap();
        }
    })
}

/// A short critical section: ~20 µs of work while holding the lock.
pub(crate) fn critical_section() {
    let spin = Instant::now();
    while spin.elapsed() < Duration::from_micros(20) {
        std::hint::spin_loop();
    }
}

/// Hand-off bookkeeping shared by the contending threads of one scenario. The same
/// definitions are used by the Java harness (`Bench.java`).
#[derive(Default)]
pub(crate) struct Recorder {
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
pub(crate) struct Latencies {
    /// Last releaser's unlock-call start → acquire return on another thread.
    pub(crate) handoff: Vec<f64>,
    /// First unlock-call start after the acquirer called lock() → its acquire return.
    pub(crate) takeover: Vec<f64>,
}

impl Recorder {
    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Thread `t` holds the lock; its lock() call started at `called`.
    pub(crate) fn acquired(&self, t: usize, called: Instant) {
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
    pub(crate) fn releasing(&self, t: usize) {
        let mut st = self.state.lock();
        let now = Instant::now();
        st.last = Some((t, now));
        st.unlocks.push(now);
    }

    /// Runs `body(t)` on `threads` threads for `span`; `body` loops until `stopped()`.
    pub(crate) fn run(
        threads: usize,
        span: Duration,
        body: impl Fn(usize, &Recorder) + Sync,
    ) -> Latencies {
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
pub(crate) fn record_latencies(
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
