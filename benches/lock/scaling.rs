//! How the costs grow with the number of held locks and of waiting threads, each on
//! its own name: one client holding 1 … 100,000 locks, and 1 … 10,000 threads of one
//! client each blocked in `lock()` on a name another client holds.
//!
//! Per held-lock step (`scaling_held_<n>_*`): client heap and RSS per lock, watchdog
//! EVALs per renewal period (against the `ceil(n / batch)` a batched renewal needs),
//! server CPU and script time per period, the time to acquire the n-th lock (and the
//! p99 of the step's acquisitions, which the watchdog's ticks can stall), and the
//! server's memory per lock. Per waiter step (`scaling_waiters_<n>_*`): client heap and
//! RSS per waiter, the time until every waiter's channel is subscribed, the subscribe
//! latency of one more waiter while n wait, and the wake-up latency (the holder's
//! unlock call to the waiter's `lock()` returning). The burst
//! (`scaling_burst_<n>_*`): wake-ups of established waiters while n new waiters
//! arrive at once and subscribe (p50, p99 and max of the wake-up latency).

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, unbounded};
use redmutex::{Client, Config};

use crate::alloc::{live_bytes, rss_bytes, start_counting, stop_counting};
use crate::figures::Figures;
use crate::measure::{command_times, percentile};
use crate::overhead::complete_ticks;
use crate::server::Server;
use crate::settings::Settings;

const HELD: [usize; 6] = [1, 10, 100, 1_000, 10_000, 100_000];
const WAITERS: [usize; 5] = [1, 10, 100, 1_000, 10_000];
/// Stack of a waiting thread: 10,000 of them must fit, and `lock()` needs little.
const STACK: usize = 128 * 1024;
/// Watchdog batch size (the default): renewals should cost `ceil(n / BATCH)` EVALs.
const BATCH: usize = 100;

/// The whole scaling section.
pub(crate) fn scaling(server: &Server, settings: &Settings, fig: &mut Figures) {
    let (max_held, max_waiters) = if settings.quick {
        (1_000, 1_000)
    } else {
        (100_000, 10_000)
    };
    let (established, rounds) = if settings.quick { (50, 1) } else { (200, 3) };
    // As `redmutex::futex_hash` advises a program that parks this many threads; the
    // burst also runs a round on the kernel's own size, for comparison.
    let kernel_slots = futex::slots();
    let grown = futex::grow_for(max_waiters + established + 64);
    fig.set(
        "scaling_futex_kernel_slots",
        kernel_slots.map_or(f64::NAN, |n| n as f64),
    );
    fig.set("scaling_futex_slots", grown.map_or(f64::NAN, |n| n as f64));
    let sizes = match (kernel_slots, grown) {
        (Some(k), Some(g)) if k > 0 && k < g => Some((k, g)),
        _ => None,
    };
    if settings.only_burst {
        crate::phase("scaling: burst");
        let mut w = Waiting::new(server);
        w.bursts(max_waiters, established, rounds, sizes, fig);
        return;
    }
    crate::phase("scaling: held locks");
    held(server, settings, max_held, fig);
    crate::phase("scaling: waiters");
    let mut w = Waiting::new(server);
    let samples = if settings.quick { 40 } else { 200 };
    for n in WAITERS.into_iter().filter(|&n| n <= max_waiters) {
        w.step(n, samples, settings, fig);
    }
    w.bursts(max_waiters, established, rounds, sizes, fig);
}

/// One numeric field of `INFO <section>`.
fn info(conn: &mut redis::Connection, section: &str, field: &str) -> f64 {
    let text: String = redis::cmd("INFO").arg(section).query(conn).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(f64::NAN)
}

/// The server's CPU time so far (user + system), in seconds.
fn server_cpu(conn: &mut redis::Connection) -> f64 {
    info(conn, "cpu", "used_cpu_user") + info(conn, "cpu", "used_cpu_sys")
}

/// Script calls (EVAL + EVALSHA) and their server-side µs so far.
fn evals(conn: &mut redis::Connection) -> (u64, u64) {
    let t = command_times(conn);
    let get = |c: &str| t.get(c).copied().unwrap_or((0, 0));
    let (a, b) = (get("evalsha"), get("eval"));
    (a.0 + b.0, a.1 + b.1)
}

/// Waits (polling, this is a bench) until `done` holds, or panics after `limit`.
fn await_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < limit,
            "scaling: timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

/// The held-lock sweep: one client takes locks up to each step, then the renewals of a
/// few periods are watched.
fn held(server: &Server, settings: &Settings, max: usize, fig: &mut Figures) {
    let lease = if settings.quick {
        Duration::from_millis(1_500)
    } else {
        Duration::from_secs(3)
    };
    let period = lease / 3;
    let window = period * 5 / 2;
    let client = Client::new(
        Config::builder()
            .address(server.url.as_str())
            .lock_watchdog_timeout(lease)
            .watchdog_batch_size(BATCH)
            .build(),
    )
    .unwrap();
    // Warm up the pool, the script cache and the thread's owner number.
    client
        .get_lock("scaling:held:warm")
        .lock()
        .unwrap()
        .unlock()
        .unwrap();
    let mut raw = server.conn();
    // Preallocated, so the bench's own bookkeeping is not counted as the client's.
    let mut took: Vec<f64> = Vec::with_capacity(max);
    let mut series: Vec<(Instant, u64)> = Vec::with_capacity(4096);
    let mut live: Vec<i64> = Vec::with_capacity(4096);

    // The idle server's CPU per period under our own polling, subtracted below.
    let idle = watch(&mut raw, window, &mut series, &mut live);
    let idle_cpu_per_period = idle.cpu / idle.periods(period);
    fig.set(
        "scaling_idle_server_cpu_ms_per_period",
        idle_cpu_per_period * 1e3,
    );

    let used0 = info(&mut raw, "memory", "used_memory");
    let rss0 = rss_bytes();
    start_counting();
    let mut held = 0;
    for n in HELD.into_iter().filter(|&n| n <= max) {
        let from = held;
        while held < n {
            let lock = client.get_lock(format!("scaling:held:{held}"));
            let t = Instant::now();
            lock.lock().unwrap().detach();
            took.push(us(t.elapsed()));
            held += 1;
        }
        let w = watch(&mut raw, window, &mut series, &mut live);
        let heap = live.iter().copied().min().unwrap_or(0);
        let rss = rss_bytes();
        let ticks = complete_ticks(w.start, &series);
        let per_tick = sorted(ticks.iter().map(|t| t.2 as f64).collect());
        let tick_ms = ticks
            .iter()
            .map(|t| t.1.duration_since(t.0).as_secs_f64() * 1e3)
            .sum::<f64>()
            / ticks.len() as f64;
        let last = sorted(took[n - (n - from).min(100)..n].to_vec());
        let step = sorted(took[from..n].to_vec());
        let used = info(&mut raw, "memory", "used_memory");
        let key_bytes: Option<f64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg("scaling:held:0")
            .arg("SAMPLES")
            .arg(0)
            .query(&mut raw)
            .ok();
        let periods = w.periods(period);
        let k = |what: &str| format!("scaling_held_{n}_{what}");
        let nf = n as f64;
        fig.set(&k("heap_bytes_per_lock"), heap as f64 / nf);
        fig.set(&k("rss_bytes_per_lock"), (rss - rss0) / nf);
        fig.set(&k("evals_per_period"), percentile(&per_tick, 0.5));
        fig.set(&k("evals_expected"), n.div_ceil(BATCH) as f64);
        fig.set(&k("tick_ms"), tick_ms);
        fig.set(
            &k("server_cpu_ms_per_period"),
            ((w.cpu / periods) - idle_cpu_per_period).max(0.0) * 1e3,
        );
        fig.set(
            &k("script_ms_per_period"),
            w.script_us as f64 / periods / 1e3,
        );
        fig.set(&k("acquire_us"), percentile(&last, 0.5));
        fig.set(&k("acquire_p99_us"), percentile(&step, 0.99));
        fig.set(&k("acquire_max_us"), percentile(&step, 1.0));
        fig.set_opt(&k("server_key_bytes"), key_bytes);
        fig.set(&k("server_bytes_per_lock"), (used - used0) / nf);
        fig.set(&k("renewing"), client.renewing_count() as f64);
        eprintln!(
            "scaling: {n} held: {:.0} B heap/lock, {} EVALs/period, acquire {:.0} µs (p99 {:.0})",
            heap as f64 / nf,
            percentile(&per_tick, 0.5),
            percentile(&last, 0.5),
            percentile(&step, 0.99)
        );
    }
    stop_counting();
    // The host oversubscribed on purpose: busy loops on 4x the cores for the same window,
    // every hold still registered. Overload may cost holds; each one lost must have been
    // reported (the watchdog drops a hold it presumes lost from its registry, so
    // `renewing_count` falls) before the release finds it gone.
    let hogs = 4 * std::thread::available_parallelism().map_or(2, |n| n.get());
    let before = client.renewing_count();
    let renewals = busy_loops(hogs, || watch(&mut raw, window, &mut series, &mut live));
    let reported = before.saturating_sub(client.renewing_count());
    let ticks = complete_ticks(renewals.start, &series);
    let evals: u64 = ticks.iter().map(|t| t.2).sum();
    // A release that finds its hold gone says which way it went: `NotHeld` when the
    // watchdog had already dropped the hold as presumed lost, `LockLost` when its
    // registry still had it. Neither leaves a guard unwarned: a guard applies the
    // watchdog's loss rule to its own lease end (`HoldState::loss`), so a late watchdog
    // cannot delay its verdict.
    let (mut lost, mut registered) = (0usize, 0usize);
    for i in 0..held {
        match client.get_lock(format!("scaling:held:{i}")).unlock() {
            Ok(()) => {}
            Err(redmutex::Error::LockLost { .. }) => {
                lost += 1;
                registered += 1;
            }
            Err(_) => lost += 1,
        }
    }
    fig.set("scaling_held_under_load_busy_threads", hogs as f64);
    fig.set("scaling_held_under_load_locks", held as f64);
    fig.set(
        "scaling_held_under_load_evals_per_period",
        evals as f64 / renewals.periods(period).max(1.0),
    );
    fig.set("scaling_held_lost_under_load", lost as f64);
    fig.set("scaling_held_reported_lost_under_load", reported as f64);
    fig.set(
        "scaling_held_lost_still_registered_under_load",
        registered as f64,
    );
    eprintln!(
        "scaling: {held} held under {hogs} busy threads: {lost} lost, {registered} of them \
         still in the watchdog's registry; {reported} dropped as presumed lost when the window closed"
    );
}

/// Runs `during` while `threads` threads spin, and stops them after it returns.
fn busy_loops<T>(threads: usize, during: impl FnOnce() -> T) -> T {
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
        }
        let out = during();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        out
    })
}

/// What the server did during one watched window.
struct Watched {
    start: Instant,
    elapsed: Duration,
    cpu: f64,
    script_us: u64,
}

impl Watched {
    fn periods(&self, period: Duration) -> f64 {
        self.elapsed.as_secs_f64() / period.as_secs_f64()
    }
}

/// Samples the server's script count and the client's live heap every 5 ms for
/// `window` (into the preallocated `series` and `live`).
fn watch(
    raw: &mut redis::Connection,
    window: Duration,
    series: &mut Vec<(Instant, u64)>,
    live: &mut Vec<i64>,
) -> Watched {
    series.clear();
    live.clear();
    let cpu0 = server_cpu(raw);
    let (calls, usec0) = evals(raw);
    let start = Instant::now();
    series.push((start, calls));
    live.push(live_bytes());
    let mut usec = usec0;
    while start.elapsed() < window {
        std::thread::sleep(Duration::from_millis(5));
        let (calls, u) = evals(raw);
        usec = u;
        if series.len() < series.capacity() {
            series.push((Instant::now(), calls));
            live.push(live_bytes());
        }
    }
    let elapsed = start.elapsed();
    Watched {
        start,
        elapsed,
        cpu: server_cpu(raw) - cpu0,
        script_us: usec - usec0,
    }
}

/// The waiter sweep's clients: one holds every name, the other's threads wait on them.
struct Waiting {
    holder: Client,
    waiter: Client,
    raw: redis::Connection,
    round: usize,
    /// Channels subscribed on the server before the sweep (by nobody of ours).
    base: usize,
}

/// Threads blocked in `lock()`, and where they report their return.
struct Blocked {
    names: Vec<String>,
    threads: Vec<JoinHandle<()>>,
    returned: Receiver<(usize, Instant)>,
    /// When the first thread was started (the holder's locks taken).
    started: Instant,
}

impl Waiting {
    fn new(server: &Server) -> Self {
        let mut w = Self {
            holder: server.client(),
            waiter: server.client(),
            raw: server.conn(),
            round: 0,
            base: 0,
        };
        w.base = w.channels();
        w
    }

    /// Channels with subscribers on the server (ours: the waiters' and the session's
    /// control channel).
    fn channels(&mut self) -> usize {
        info(&mut self.raw, "stats", "pubsub_channels") as usize
    }

    fn numsub(&mut self, channel: &str) -> i64 {
        let v: Vec<redis::Value> = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(channel)
            .query(&mut self.raw)
            .unwrap();
        match v.get(1) {
            Some(redis::Value::Int(n)) => *n,
            _ => 0,
        }
    }

    /// `n` names of a new round under `prefix`, each taken by the holder (and left held).
    fn hold_fresh(&mut self, n: usize, prefix: &str) -> Vec<String> {
        self.round += 1;
        let names: Vec<String> = (0..n)
            .map(|i| format!("scaling:{prefix}:{}:{i}", self.round))
            .collect();
        for name in &names {
            self.holder.get_lock(name.as_str()).lock().unwrap().detach();
        }
        names
    }

    /// Takes `n` fresh names with the holder and starts a waiting thread on each; every
    /// thread reports when its `lock()` returns, then unlocks and ends. `gate`: the
    /// threads start waiting only when it closes. `count`: heap counting starts once the
    /// holder holds its names, so only the waiters' side is counted.
    fn block(
        &mut self,
        n: usize,
        prefix: &str,
        gate: Option<&Receiver<()>>,
        count: bool,
    ) -> Blocked {
        let names = self.hold_fresh(n, prefix);
        let (report, returned): (Sender<(usize, Instant)>, _) = unbounded();
        let mut threads = Vec::with_capacity(n);
        if count {
            start_counting();
        }
        let started = Instant::now();
        for (i, name) in names.iter().enumerate() {
            let lock = self.waiter.get_lock(name.as_str());
            let report = report.clone();
            let gate = gate.cloned();
            let thread = std::thread::Builder::new()
                .stack_size(STACK)
                .spawn(move || {
                    if let Some(gate) = gate {
                        let _ = gate.recv();
                    }
                    let guard = lock.lock().unwrap();
                    let _ = report.send((i, Instant::now()));
                    guard.unlock().unwrap();
                })
                .unwrap();
            threads.push(thread);
        }
        Blocked {
            names,
            threads,
            returned,
            started,
        }
    }

    /// Waits until `n` waiters (plus the control channel) are subscribed and, since
    /// `evals0` (taken before [`Self::block`]), the holder took each name and each waiter
    /// made its two attempts (the first, and the retry the confirmation starts).
    fn settle(&mut self, n: usize, evals0: u64) {
        let channels = self.base + n + 1;
        await_until("the subscriptions", Duration::from_secs(120), || {
            self.channels() >= channels
        });
        let attempts = 3 * n as u64;
        await_until("the waiters' retries", Duration::from_secs(120), || {
            evals(&mut self.raw).0 >= evals0 + attempts
        });
        // The last retries' threads go back to sleep.
        std::thread::sleep(Duration::from_millis(50));
    }

    /// No subscription of an earlier round is left (the session drops a channel within
    /// its 100 ms linger once its waiter left).
    fn quiet(&mut self) {
        await_until(
            "the last round's unsubscribes",
            Duration::from_secs(30),
            || self.channels() <= self.base,
        );
    }

    /// Unlocks `names[i]` and waits for its waiter's `lock()` to return: the wake-up
    /// latency.
    fn wake(&mut self, b: &Blocked, i: usize) -> f64 {
        let t = Instant::now();
        self.holder.get_lock(b.names[i].as_str()).unlock().unwrap();
        loop {
            let (j, at) = b
                .returned
                .recv_timeout(Duration::from_secs(30))
                .expect("scaling: a woken waiter did not return");
            if j == i {
                return us(at.duration_since(t));
            }
        }
    }

    /// Releases every name from `from` on and joins the threads.
    fn finish(&mut self, b: Blocked, from: usize) {
        for name in &b.names[from..] {
            self.holder.get_lock(name.as_str()).unlock().unwrap();
        }
        for t in b.threads {
            t.join().unwrap();
        }
    }

    /// The subscribe latency of one more waiter, with the others waiting: from its
    /// thread's start to the server counting its channel's subscriber.
    fn probe(&mut self) -> f64 {
        self.round += 1;
        let name = format!("scaling:probe:{}", self.round);
        self.holder.get_lock(name.as_str()).lock().unwrap().detach();
        let channel = format!("redisson_lock__channel:{{{name}}}");
        let lock = self.waiter.get_lock(name.as_str());
        let t = Instant::now();
        let thread = std::thread::Builder::new()
            .stack_size(STACK)
            .spawn(move || lock.lock().unwrap().unlock().unwrap())
            .unwrap();
        while self.numsub(&channel) == 0 {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "scaling: probe never subscribed"
            );
        }
        let latency = us(t.elapsed());
        self.holder.get_lock(name.as_str()).unlock().unwrap();
        thread.join().unwrap();
        latency
    }

    /// One waiter step: `n` waiters, in as many rounds as `samples` wake-ups need (each
    /// round wakes at most half of its waiters, so most still wait while it samples).
    fn step(&mut self, n: usize, samples: usize, settings: &Settings, fig: &mut Figures) {
        let per_round = (n / 2).clamp(1, samples);
        let rounds = samples.div_ceil(per_round);
        let probes = if settings.quick { 5 } else { 20 };
        let mut wakes = Vec::new();
        let mut subs = Vec::new();
        for round in 0..rounds {
            self.quiet();
            let evals0 = evals(&mut self.raw).0;
            let rss0 = rss_bytes();
            let b = self.block(n, "w", None, true);
            self.settle(n, evals0);
            let all = b.started.elapsed();
            let heap = live_bytes();
            stop_counting();
            let rss = rss_bytes();
            if round == 0 {
                let k = |what: &str| format!("scaling_waiters_{n}_{what}");
                fig.set(&k("heap_bytes_per_waiter"), heap as f64 / n as f64);
                fig.set(&k("rss_bytes_per_waiter"), (rss - rss0) / n as f64);
                fig.set(&k("subscribe_all_ms"), all.as_secs_f64() * 1e3);
            }
            if round < probes {
                // One probe per round for the small steps, all in the first for the big.
                let here = if rounds >= probes { 1 } else { probes };
                for _ in 0..here {
                    subs.push(self.probe());
                }
            }
            for i in 0..per_round {
                wakes.push(self.wake(&b, i));
            }
            self.finish(b, per_round);
        }
        let (wakes, subs) = (sorted(wakes), sorted(subs));
        let k = |what: &str| format!("scaling_waiters_{n}_{what}");
        fig.set(&k("wake_p50_us"), percentile(&wakes, 0.5));
        fig.set(&k("wake_p99_us"), percentile(&wakes, 0.99));
        fig.set(&k("wake_samples"), wakes.len() as f64);
        fig.set(&k("subscribe_p50_us"), percentile(&subs, 0.5));
        fig.set(&k("subscribe_p99_us"), percentile(&subs, 0.99));
        eprintln!(
            "scaling: {n} waiters: wake p50 {:.0} µs p99 {:.0} µs, subscribe p50 {:.0} µs, all subscribed in {:.0} ms",
            percentile(&wakes, 0.5),
            percentile(&wakes, 0.99),
            percentile(&subs, 0.5),
            fig.get(&k("subscribe_all_ms"))
        );
    }

    /// How many of a burst's newcomers have their channel subscribed, with `woken` of the
    /// `established` old waiters woken so far: the channels `INFO` counts, less the
    /// control channel, the old waiters still waiting and the woken ones whose channel
    /// still lingers. `INFO` and a `NUMSUB` of at most `established` channels cost the
    /// server little; listing the 10,000 channels (`PUBSUB CHANNELS`) every 5 ms, as this
    /// used to, loaded the very server the burst's wake-ups are measured on.
    fn newcomers_subscribed(&mut self, old: &Blocked, woken: usize, established: usize) -> usize {
        let mut lingering = 0;
        if woken > 0 {
            let mut cmd = redis::cmd("PUBSUB");
            cmd.arg("NUMSUB");
            for name in &old.names[..woken] {
                cmd.arg(format!("redisson_lock__channel:{{{name}}}"));
            }
            let counts: Vec<redis::Value> = cmd.query(&mut self.raw).unwrap();
            lingering = counts
                .chunks(2)
                .filter(|pair| matches!(pair.get(1), Some(redis::Value::Int(n)) if *n > 0))
                .count();
        }
        (self.channels() + woken).saturating_sub(self.base + 1 + established + lingering)
    }

    /// The burst, in `rounds` rounds alternating with its control (see [`Self::burst`]
    /// and [`Self::control`]) and, with `sizes` (the kernel's futex hash size and the
    /// grown one in use), with a burst on the kernel's size; each figure is the median
    /// of its rounds.
    fn bursts(
        &mut self,
        n: usize,
        established: usize,
        rounds: usize,
        sizes: Option<(usize, usize)>,
        fig: &mut Figures,
    ) {
        let mut burst = Vec::new();
        let mut control = Vec::new();
        let mut small = Vec::new();
        for _ in 0..rounds {
            burst.push(self.burst(n, established));
            control.push(self.control(n, established));
            if let Some((kernel, grown)) = sizes {
                futex::set_slots(kernel);
                eprint!("(futex hash: {kernel} slots) ");
                small.push(self.burst(n, established));
                futex::set_slots(grown);
            }
        }
        let median = |rows: &[Round], f: fn(&Round) -> f64| {
            percentile(&sorted(rows.iter().map(f).collect()), 0.5)
        };
        for (prefix, rows) in [
            ("burst", &burst),
            ("burst_control", &control),
            ("burst_kernel_hash", &small),
        ] {
            if rows.is_empty() {
                continue;
            }
            let k = |what: &str| format!("scaling_{prefix}_{n}_{what}");
            fig.set(&k("wakes_during"), median(rows, |r| r.wakes as f64));
            fig.set(&k("wake_p50_us"), median(rows, |r| r.p50));
            fig.set(&k("wake_p99_us"), median(rows, |r| r.p99));
            fig.set(&k("wake_max_us"), median(rows, |r| r.max));
            fig.set(&k("rounds"), rows.len() as f64);
        }
        fig.set(
            &format!("scaling_burst_{n}_subscribe_ms"),
            median(&burst, |r| r.arrived_ms),
        );
        fig.set(
            &format!("scaling_burst_control_{n}_done_ms"),
            median(&control, |r| r.arrived_ms),
        );
        if !small.is_empty() {
            fig.set(
                &format!("scaling_burst_kernel_hash_{n}_subscribe_ms"),
                median(&small, |r| r.arrived_ms),
            );
            // Per round: the grown hash's worst wake-up over the kernel size's.
            let ratios: Vec<f64> = burst
                .iter()
                .zip(&small)
                .map(|(g, k)| g.max / k.max)
                .collect();
            fig.set(
                &format!("scaling_burst_{n}_wake_max_ratio_to_kernel_hash"),
                percentile(&sorted(ratios), 0.5),
            );
        }
    }

    /// `established` waiters wait; then `n` new ones start at once, and the established
    /// ones are woken one by one (every 5 ms) while the newcomers subscribe.
    fn burst(&mut self, n: usize, established: usize) -> Round {
        self.quiet();
        let evals0 = evals(&mut self.raw).0;
        let old = self.block(established, "old", None, false);
        self.settle(established, evals0);
        let (open, gate) = unbounded::<()>();
        let evals0 = evals(&mut self.raw).0;
        let new = self.block(n, "new", Some(&gate), false);
        drop(gate);
        // Let the new threads reach the gate.
        std::thread::sleep(Duration::from_millis(200));
        let start = Instant::now();
        drop(open);
        let mut during = Vec::new();
        let mut subscribed = None;
        let mut woken = 0;
        while woken < established {
            during.push(self.wake(&old, woken));
            woken += 1;
            if self.newcomers_subscribed(&old, woken, established) >= n {
                subscribed = Some(start.elapsed());
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let subscribed = subscribed.unwrap_or_else(|| {
            await_until(
                "the burst's subscriptions",
                Duration::from_secs(120),
                || self.newcomers_subscribed(&old, woken, established) >= n,
            );
            start.elapsed()
        });
        await_until("the burst's retries", Duration::from_secs(120), || {
            evals(&mut self.raw).0 >= evals0 + 3 * n as u64
        });
        let round = Round::of(during, subscribed);
        eprintln!(
            "scaling: burst of {n}: subscribed in {:.0} ms; {} wake-ups meanwhile, p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs",
            round.arrived_ms, round.wakes, round.p50, round.p99, round.max
        );
        self.finish(old, woken);
        self.finish(new, 0);
        round
    }

    /// The burst's control: the same `n` threads start at once and make the same two
    /// acquire attempts on held names, but as `try_lock()` calls, which subscribe to
    /// nothing; the established waiters are woken meanwhile as in the burst. What the
    /// burst's wake-ups cost beyond these is what subscribing 10,000 channels costs
    /// them; the rest is two cores shared by 10,000 threads' own round trips.
    fn control(&mut self, n: usize, established: usize) -> Round {
        self.quiet();
        let evals0 = evals(&mut self.raw).0;
        let old = self.block(established, "cold", None, false);
        self.settle(established, evals0);
        let names = self.hold_fresh(n, "try");
        let (open, gate) = unbounded::<()>();
        let (done, finished) = unbounded::<()>();
        let threads: Vec<JoinHandle<()>> = names
            .iter()
            .map(|name| {
                let lock = self.waiter.get_lock(name.as_str());
                let (gate, done) = (gate.clone(), done.clone());
                std::thread::Builder::new()
                    .stack_size(STACK)
                    .spawn(move || {
                        let _ = gate.recv();
                        for _ in 0..2 {
                            assert!(lock.try_lock().unwrap().is_none(), "a held name was free");
                        }
                        let _ = done.send(());
                    })
                    .unwrap()
            })
            .collect();
        drop((gate, done));
        std::thread::sleep(Duration::from_millis(200));
        let start = Instant::now();
        drop(open);
        let mut during = Vec::new();
        let mut left = n;
        for woken in 0..established {
            during.push(self.wake(&old, woken));
            left -= finished.try_iter().count();
            if left == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let woken = during.len();
        for _ in 0..left {
            finished
                .recv_timeout(Duration::from_secs(120))
                .expect("scaling: a control thread did not finish");
        }
        let round = Round::of(during, start.elapsed());
        eprintln!(
            "scaling: burst control of {n}: done in {:.0} ms; {} wake-ups meanwhile, p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs",
            round.arrived_ms, round.wakes, round.p50, round.p99, round.max
        );
        for t in threads {
            t.join().unwrap();
        }
        for name in &names {
            self.holder.get_lock(name.as_str()).unlock().unwrap();
        }
        self.finish(old, woken);
        round
    }
}

/// One round of the burst or of its control.
struct Round {
    wakes: usize,
    p50: f64,
    p99: f64,
    max: f64,
    /// Until the newcomers were all subscribed (burst), or all done (control).
    arrived_ms: f64,
}

impl Round {
    fn of(during: Vec<f64>, arrived: Duration) -> Self {
        let during = sorted(during);
        Self {
            wakes: during.len(),
            p50: percentile(&during, 0.5),
            p99: percentile(&during, 0.99),
            max: percentile(&during, 1.0),
            arrived_ms: arrived.as_secs_f64() * 1e3,
        }
    }
}

/// The scaling section's tables (steps that ran), in Markdown.
pub(crate) fn table(fig: &Figures) -> String {
    use std::fmt::Write as _;
    let cell = |v: f64| {
        if !v.is_finite() {
            "–".to_owned()
        } else if v.abs() >= 100.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.2}")
        }
    };
    let mut t = String::new();
    let held: Vec<usize> = HELD
        .into_iter()
        .filter(|n| {
            fig.get(&format!("scaling_held_{n}_heap_bytes_per_lock"))
                .is_finite()
        })
        .collect();
    if !held.is_empty() {
        t.push_str(
            "\n| held locks | heap B/lock | RSS B/lock | EVALs/period (expected) | tick ms | server CPU ms/period | script ms/period | acquire n-th µs | acquire p99 µs | server B/lock (MEMORY USAGE) | server used_memory B/lock |\n|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n",
        );
        for n in held {
            let g = |what: &str| fig.get(&format!("scaling_held_{n}_{what}"));
            let _ = writeln!(
                t,
                "| {n} | {} | {} | {} ({}) | {} | {} | {} | {} | {} | {} | {} |",
                cell(g("heap_bytes_per_lock")),
                cell(g("rss_bytes_per_lock")),
                cell(g("evals_per_period")),
                cell(g("evals_expected")),
                cell(g("tick_ms")),
                cell(g("server_cpu_ms_per_period")),
                cell(g("script_ms_per_period")),
                cell(g("acquire_us")),
                cell(g("acquire_p99_us")),
                cell(g("server_key_bytes")),
                cell(g("server_bytes_per_lock")),
            );
        }
        let g = |k: &str| fig.get(k);
        let _ = writeln!(
            t,
            "\n{} held locks under {} busy threads: {} EVALs/period ({} expected), {} lost ({} still in the watchdog's registry), {} presumed lost when the window closed",
            cell(g("scaling_held_under_load_locks")),
            cell(g("scaling_held_under_load_busy_threads")),
            cell(g("scaling_held_under_load_evals_per_period")),
            cell(g("scaling_held_under_load_locks") / BATCH as f64),
            cell(g("scaling_held_lost_under_load")),
            cell(g("scaling_held_lost_still_registered_under_load")),
            cell(g("scaling_held_reported_lost_under_load")),
        );
    }
    let waiters: Vec<usize> = WAITERS
        .into_iter()
        .filter(|n| {
            fig.get(&format!("scaling_waiters_{n}_wake_p50_us"))
                .is_finite()
        })
        .collect();
    if !waiters.is_empty() {
        t.push_str(
            "\n| waiters | heap B/waiter | RSS B/waiter | all subscribed ms | subscribe p50 µs | subscribe p99 µs | wake p50 µs | wake p99 µs |\n|--:|--:|--:|--:|--:|--:|--:|--:|\n",
        );
        for n in waiters {
            let g = |what: &str| fig.get(&format!("scaling_waiters_{n}_{what}"));
            let _ = writeln!(
                t,
                "| {n} | {} | {} | {} | {} | {} | {} | {} |",
                cell(g("heap_bytes_per_waiter")),
                cell(g("rss_bytes_per_waiter")),
                cell(g("subscribe_all_ms")),
                cell(g("subscribe_p50_us")),
                cell(g("subscribe_p99_us")),
                cell(g("wake_p50_us")),
                cell(g("wake_p99_us")),
            );
        }
    }
    for n in WAITERS {
        let g = |what: &str| fig.get(&format!("scaling_burst_{n}_{what}"));
        let c = |what: &str| fig.get(&format!("scaling_burst_control_{n}_{what}"));
        let h = |what: &str| fig.get(&format!("scaling_burst_kernel_hash_{n}_{what}"));
        if g("subscribe_ms").is_finite() {
            let _ = writeln!(
                t,
                "\nBurst ({} rounds, medians): {n} new waiters subscribed in {} ms; {} wake-ups of established waiters meanwhile, p50 {} µs, p99 {} µs, max {} µs. Control (the same threads' two attempts as `try_lock()`, no subscription; done in {} ms): p50 {} µs, p99 {} µs, max {} µs.",
                cell(g("rounds")),
                cell(g("subscribe_ms")),
                cell(g("wakes_during")),
                cell(g("wake_p50_us")),
                cell(g("wake_p99_us")),
                cell(g("wake_max_us")),
                cell(c("done_ms")),
                cell(c("wake_p50_us")),
                cell(c("wake_p99_us")),
                cell(c("wake_max_us")),
            );
            if h("wake_max_us").is_finite() {
                let _ = writeln!(
                    t,
                    "\nThe same burst on the kernel's futex hash size ({:.0} slots instead of {:.0}): subscribed in {} ms; p50 {} µs, p99 {} µs, max {} µs (grown ÷ kernel's worst wake-up, median of rounds: {}).",
                    fig.get("scaling_futex_kernel_slots"),
                    fig.get("scaling_futex_slots"),
                    cell(h("subscribe_ms")),
                    cell(h("wake_p50_us")),
                    cell(h("wake_p99_us")),
                    cell(h("wake_max_us")),
                    cell(g("wake_max_ratio_to_kernel_hash")),
                );
            }
        }
    }
    t
}

/// The futex hash sizing of the `futex-hash` feature (`redmutex bench` turns it on); a
/// plain `cargo bench` leaves the hash at the kernel's size and reports no slots.
mod futex {
    #[cfg(feature = "futex-hash")]
    pub(super) fn slots() -> Option<usize> {
        redmutex::futex_hash::slots().unwrap()
    }

    #[cfg(feature = "futex-hash")]
    pub(super) fn grow_for(threads: usize) -> Option<usize> {
        redmutex::futex_hash::grow_for(threads).unwrap()
    }

    #[cfg(feature = "futex-hash")]
    pub(super) fn set_slots(slots: usize) {
        redmutex::futex_hash::set_slots(slots).unwrap();
    }

    #[cfg(not(feature = "futex-hash"))]
    pub(super) fn slots() -> Option<usize> {
        None
    }

    #[cfg(not(feature = "futex-hash"))]
    pub(super) fn grow_for(_threads: usize) -> Option<usize> {
        None
    }

    #[cfg(not(feature = "futex-hash"))]
    pub(super) fn set_slots(_slots: usize) {}
}
