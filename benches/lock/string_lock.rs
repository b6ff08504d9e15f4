//! The string-token lock (`SET NX PX` and a compare-and-delete) against its own floor,
//! against the peers that speak the same protocol (go-redsync, redis-py), and its quorum
//! over five servers against one server and against redsync's quorum.
//!
//! The floor is the recipe done by hand on one connection: a raw `SET key token NX PX ttl`
//! and an `EVALSHA` of the release script, the two round trips every string-token cycle
//! needs. The peers run their own timing loops (`bench` and `handoff` in
//! `tests/interop/{go,python}`), so their figures carry no driver overhead.

use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use redmutex::Client;

use crate::family::{interleaved, mean_rate, median_time_ratio};
use crate::figures::Figures;
use crate::handoff::{Latencies, Recorder, critical_section};
use crate::measure::percentile;
use crate::peer::Peer;
use crate::server::Server;
use crate::settings::Settings;
use crate::token_peer::{json_number, redis_py, redsync};

/// The lease of every cycle here, ours and the peers' alike.
const TTL_MS: u64 = 10_000;
/// Members of the quorum scenarios.
const MEMBERS: usize = 5;
/// Threads of the contended hand-off against redsync.
const HANDOFF_THREADS: usize = 4;

const FLOOR: usize = 0;
const OURS: usize = 1;
const OURS_WATCHDOG: usize = 2;

/// Every string-lock figure; the peers only when `settings.java` (they need Go and
/// Python builds, like the Java harness needs Maven).
pub(crate) fn string_lock(
    server: &Server,
    client: &Client,
    settings: &Settings,
    fig: &mut Figures,
) {
    crate::phase("string-token lock, uncontended and quorum");
    uncontended(server, client, settings, fig);
    let others: Vec<Server> = (1..MEMBERS).map(|_| Server::start()).collect();
    let urls: Vec<String> = std::iter::once(server.url.clone())
        .chain(others.iter().map(|s| s.url.clone()))
        .collect();
    quorum(client, &urls, settings, fig);
    if !settings.java {
        eprintln!("string-lock peers skipped (quick mode; pass --java to include them)");
        return;
    }
    crate::phase("string-token lock against go-redsync and redis-py");
    let run = std::panic::catch_unwind(AssertUnwindSafe(|| {
        peers(server, client, &urls, settings, fig);
    }));
    if let Err(e) = run {
        let why = e
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| e.downcast_ref::<&str>().copied())
            .unwrap_or("a peer panicked");
        eprintln!("string-lock peers failed: {why}");
        fig.text(
            "string_peers_status",
            "unavailable: a peer failed to build or run",
        );
    } else {
        fig.text("string_peers_status", "ok");
    }
}

/// `string_cycle_ratio`: our lock-with-lease + unlock cycle against the hand-made floor,
/// interleaved; also the watchdog-renewed cycle.
fn uncontended(server: &Server, client: &Client, settings: &Settings, fig: &mut Figures) {
    let release = redis::Script::new(include_str!("../../lua/token/token_release.lua"));
    let mut raw = server.conn();
    let leased = client.get_token_lock("bench:string:leased");
    let watched = client.get_token_lock("bench:string:watchdog");
    let lease = Duration::from_millis(TTL_MS);
    let mut floor = || {
        let set: Option<String> = redis::cmd("SET")
            .arg("bench:string:floor")
            .arg("floor-token")
            .arg("NX")
            .arg("PX")
            .arg(TTL_MS)
            .query(&mut raw)
            .unwrap();
        assert!(set.is_some(), "the floor's key was taken");
        let released: i64 = release
            .key("bench:string:floor")
            .key("bench:string:floor:wake")
            .arg("floor-token")
            .arg("PUBLISH")
            .arg("0")
            .invoke(&mut raw)
            .unwrap();
        assert_eq!(released, 1);
    };
    let mut ours = || leased.lock_with_lease(lease).unwrap().unlock().unwrap();
    let mut ours_watchdog = || watched.lock().unwrap().unlock().unwrap();
    let rows = interleaved(
        settings.span(),
        &mut [&mut floor, &mut ours, &mut ours_watchdog],
    );
    fig.set("string_floor_cycles_per_sec", mean_rate(&rows, FLOOR));
    fig.set("string_cycles_per_sec", mean_rate(&rows, OURS));
    fig.set("string_cycle_ratio", median_time_ratio(&rows, OURS, FLOOR));
    fig.set(
        "string_watchdog_cycle_ratio",
        median_time_ratio(&rows, OURS_WATCHDOG, FLOOR),
    );
}

/// `string_quorum_5_cycle_ratio`: a quorum cycle over five servers (every member written
/// at once) against a single-server cycle, interleaved.
fn quorum(client: &Client, urls: &[String], settings: &Settings, fig: &mut Figures) {
    let members: Vec<Client> = urls.iter().map(|u| Server::client_for(u)).collect();
    let quorum = Client::get_quorum_token_lock(&members, "bench:string:quorum").unwrap();
    let single = client.get_token_lock("bench:string:single");
    let lease = Duration::from_millis(TTL_MS);
    let mut one = || single.lock_with_lease(lease).unwrap().unlock().unwrap();
    let mut five = || quorum.lock_with_lease(lease).unwrap().unlock().unwrap();
    let rows = interleaved(settings.span(), &mut [&mut one, &mut five]);
    fig.set("string_quorum_5_cycles_per_sec", mean_rate(&rows, 1));
    fig.set(
        "string_quorum_5_cycle_ratio",
        median_time_ratio(&rows, 1, 0),
    );
}

/// The peers' uncontended cycles beside ours (mean time ratios, ours ÷ theirs), the
/// contended hand-off against redsync's polling, and the quorum against redsync's.
fn peers(
    server: &Server,
    client: &Client,
    urls: &[String],
    settings: &Settings,
    fig: &mut Figures,
) {
    let cycles = (settings.span().as_millis() * 5).max(500);
    let single = client.get_token_lock("bench:string:mean");
    let lease = Duration::from_millis(TTL_MS);
    let mut ours = |n: u128| {
        timed_cycles(n, || {
            single.lock_with_lease(lease).unwrap().unlock().unwrap();
        })
    };

    let go = redsync(std::slice::from_ref(&server.url));
    let (ours_ns, go_ns, ratio) = alternate(cycles, &mut ours, |n| {
        peer_cycle_ns(&go, "bench:string:redsync", n)
    });
    fig.set("string_cycle_mean_ns", ours_ns);
    fig.set("string_redsync_cycle_mean_ns", go_ns);
    fig.set("string_vs_redsync_cycle_ratio", ratio);

    let py = redis_py(&server.url);
    let (_, py_ns, ratio) = alternate(cycles, &mut ours, |n| {
        peer_cycle_ns(&py, "bench:string:redis-py", n)
    });
    fig.set("string_redis_py_cycle_mean_ns", py_ns);
    fig.set("string_vs_redis_py_cycle_ratio", ratio);
    py.quit();

    // Contended: redsync waiters poll (random 50–250 ms retry delays); ours sleep on the
    // wake-up message its release publishes.
    let span = settings.handoff_span();
    let lat = our_handoff(client, HANDOFF_THREADS, span);
    let ours_p50 = percentile(&lat.takeover, 0.5);
    fig.set("string_handoff_4t_takeover_p50_us", ours_p50);
    fig.set(
        "string_handoff_4t_takeover_p99_us",
        percentile(&lat.takeover, 0.99),
    );
    fig.set(
        "string_handoff_4t_per_sec",
        lat.handoff.len() as f64 / span.as_secs_f64(),
    );
    let line = go.ok(
        "bench",
        &format!(
            "handoff bench:string:redsync-handoff {TTL_MS} {HANDOFF_THREADS} {}",
            span.as_millis()
        ),
    );
    let go_p50 = json_number(&line, "takeover_p50_us").expect("redsync handoff takeover_p50_us");
    fig.set("string_redsync_handoff_4t_takeover_p50_us", go_p50);
    fig.set(
        "string_redsync_handoff_4t_per_sec",
        json_number(&line, "handoff_samples").unwrap_or(0.0) / span.as_secs_f64(),
    );
    // How many times lower our takeover p50 is than redsync's (target ≥ 10).
    fig.set(
        "string_handoff_takeover_p50_gain_vs_redsync",
        go_p50 / ours_p50,
    );
    go.quit();

    // Quorum: ours against redsync's over the same five servers.
    let members: Vec<Client> = urls.iter().map(|u| Server::client_for(u)).collect();
    let quorum = Client::get_quorum_token_lock(&members, "bench:string:quorum-mean").unwrap();
    let mut ours5 = |n: u128| {
        timed_cycles(n, || {
            quorum.lock_with_lease(lease).unwrap().unlock().unwrap();
        })
    };
    let go5 = redsync(urls);
    let (quorum_ns, go5_ns, ratio) = alternate(cycles, &mut ours5, |n| {
        peer_cycle_ns(&go5, "bench:string:redsync-quorum", n)
    });
    fig.set("string_quorum_5_cycle_mean_ns", quorum_ns);
    fig.set("string_redsync_quorum_5_cycle_mean_ns", go5_ns);
    fig.set("string_quorum_5_vs_redsync_ratio", ratio);
    go5.quit();
}

/// Rounds of ours then theirs, `cycles / ROUNDS` cycles each, so that a burst of
/// background load lands on both sides alike: the means in ns over all rounds, and the
/// median of the per-round time ratios (ours ÷ theirs).
fn alternate(
    cycles: u128,
    ours: &mut dyn FnMut(u128) -> f64,
    mut theirs: impl FnMut(u128) -> f64,
) -> (f64, f64, f64) {
    const ROUNDS: u128 = 5;
    let per = (cycles / ROUNDS).max(50);
    let mut rounds: Vec<(f64, f64)> = (0..ROUNDS).map(|_| (ours(per), theirs(per))).collect();
    let mean =
        |f: fn(&(f64, f64)) -> f64, r: &[(f64, f64)]| r.iter().map(f).sum::<f64>() / r.len() as f64;
    let (a, b) = (mean(|r| r.0, &rounds), mean(|r| r.1, &rounds));
    rounds.sort_by(|x, y| (x.0 / x.1).total_cmp(&(y.0 / y.1)));
    let mid = rounds[rounds.len() / 2];
    (a, b, mid.0 / mid.1)
}

/// The mean time in ns of `cycles` runs of `cycle`, after a tenth as many warm-up runs.
fn timed_cycles(cycles: u128, mut cycle: impl FnMut()) -> f64 {
    for _ in 0..cycles / 10 {
        cycle();
    }
    let start = Instant::now();
    for _ in 0..cycles {
        cycle();
    }
    start.elapsed().as_nanos() as f64 / cycles as f64
}

/// A peer's own timed loop of `cycles` acquire/release pairs: its mean in ns.
fn peer_cycle_ns(peer: &Peer, name: &str, cycles: u128) -> f64 {
    let warmup = cycles / 10;
    let line = peer.ok(
        "bench",
        &format!("bench {name} {TTL_MS} {cycles} warmup={warmup}"),
    );
    json_number(&line, "mean_ns").unwrap_or_else(|| panic!("no mean_ns in {line}"))
}

/// Hand-off on one string-token lock: `threads` threads of one client.
fn our_handoff(client: &Client, threads: usize, span: Duration) -> Latencies {
    let lease = Duration::from_millis(TTL_MS);
    Recorder::run(threads, span, |t, rec| {
        let lock = client.get_token_lock("bench:string:handoff");
        while !rec.stopped() {
            let called = Instant::now();
            let guard = lock.lock_with_lease(lease).unwrap();
            rec.acquired(t, called);
            critical_section();
            rec.releasing(t);
            guard.unlock().unwrap();
        }
    })
}
