//! The floors (PING, one acquire-shaped EVALSHA, redis-benchmark) and redmutex's
//! uncontended lock+unlock cycles, measured in interleaved slices.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use redmutex::Client;

use crate::figures::Figures;
use crate::measure::{command_times, percentile, rate, rate_threads, with_cpu};
use crate::server::Server;
use crate::settings::Settings;

/// The library's acquire script, run raw for the floors.
fn acquire_script() -> redis::Script {
    redis::Script::new(include_str!("../../lua/lock/acquire.lua"))
}

/// The floors that need no interleaving: PING, and redis-benchmark's EVALSHA rate.
pub(crate) fn floors(server: &Server, settings: &Settings, fig: &mut Figures) {
    let span = settings.span();
    let mut raw = server.conn();
    let ping = rate(span, || {
        redis::cmd("PING").query::<String>(&mut raw).unwrap();
    });
    fig.set("floor_ping_per_sec", ping);
    let shape = acquire_script();
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
pub(crate) fn uncontended(
    server: &Server,
    client: &Client,
    settings: &Settings,
    fig: &mut Figures,
) {
    let shape = acquire_script();
    let slices = one_thread(server, client, &shape, settings);
    slices.record(fig);
    sixteen_threads(server, client, &shape, settings, fig);
}

/// The three measurements of a slice, in this order in every row.
const EVALSHA: usize = 0;
const RAW_CYCLE: usize = 1;
const REDMUTEX: usize = 2;

/// A ratio of two measurements of one slice.
type SliceRatio = fn(&[f64; 3]) -> f64;

/// One thread's slices: per slice the three rates, plus what Redis counted meanwhile.
#[derive(Default)]
struct Slices {
    rows: Vec<[f64; 3]>,
    /// Server-side µs and EVALSHA calls of the two floors.
    server_us: [u64; 2],
    server_calls: [u64; 2],
    /// redmutex cycles run, and the EVALSHAs and latch DELs they cost.
    cycles: u64,
    /// Per measurement: this process's CPU ns while it ran and the operations it ran
    /// (warm-ups included in both); `None` once a reading failed.
    cpu_ns: [Option<u64>; 3],
    cpu_ops: [u64; 3],
    scripts: u64,
    dels: u64,
}

/// One thread: slices of 25 ms, the three measurements in rotating order.
fn one_thread(
    server: &Server,
    client: &Client,
    shape: &redis::Script,
    settings: &Settings,
) -> Slices {
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
    let slice = Duration::from_millis(25);
    let rounds = (settings.span().as_millis() / slice.as_millis()).max(4) as usize;
    let mut slices = Slices {
        cpu_ns: [Some(0); 3],
        ..Slices::default()
    };
    for r in 0..rounds {
        let mut row = [0.0; 3];
        for k in 0..3 {
            let which = (r + k) % 3;
            let t0 = command_times(&mut probe);
            let mut n = 0u64;
            let measured = |op: &mut dyn FnMut()| rate(slice, op);
            let (r, cpu, ops) = match which {
                EVALSHA => with_cpu(|| evalsha_op(&mut raw), measured),
                // The two scripts of one lock+unlock cycle, run raw on one connection:
                // what the cycle costs without any library code around it.
                RAW_CYCLE => with_cpu(|| cycle(&mut raw, "bench:raw"), measured),
                _ => with_cpu(
                    || {
                        lock.lock().unwrap().unlock().unwrap();
                        n += 1;
                    },
                    measured,
                ),
            };
            row[which] = r;
            slices.cpu_ns[which] = slices.cpu_ns[which].zip(cpu).map(|(a, b)| a + b);
            slices.cpu_ops[which] += ops;
            let t1 = command_times(&mut probe);
            slices.count(which, n, &t0, &t1);
        }
        slices.rows.push(row);
    }
    let _: () = redis::cmd("DEL")
        .arg("bench:floor")
        .query(&mut probe)
        .unwrap();
    slices
}

/// Calls and server-side µs per command, as `command_times` reads them.
type Times = BTreeMap<String, (u64, u64)>;

impl Slices {
    /// Adds what Redis counted between `t0` and `t1` around one measurement (`n`
    /// redmutex cycles for the redmutex one).
    fn count(&mut self, which: usize, n: u64, t0: &Times, t1: &Times) {
        let delta = |cmd: &str| {
            let (c1, u1) = t1.get(cmd).copied().unwrap_or((0, 0));
            let (c0, u0) = t0.get(cmd).copied().unwrap_or((0, 0));
            (c1 - c0, u1 - u0)
        };
        match which {
            EVALSHA | RAW_CYCLE => {
                let (calls, usec) = delta("evalsha");
                self.server_calls[which] += calls;
                self.server_us[which] += usec;
            }
            _ => {
                self.cycles += n;
                self.scripts += delta("evalsha").0;
                // Each full release deletes the lock hash with one DEL inside its
                // script; the other DELs are the watchdog's batched latch deletions.
                self.dels += delta("del").0.saturating_sub(n);
            }
        }
    }

    fn record(&self, fig: &mut Figures) {
        let rows = &self.rows;
        fig.set("floor_evalsha_per_sec", mean(rows, EVALSHA));
        fig.set("floor_rtt_us", 1e6 / mean(rows, EVALSHA));
        fig.set("floor_script_cycles_per_sec", mean(rows, RAW_CYCLE));
        let acquire = self.server_us[EVALSHA] as f64 / self.server_calls[EVALSHA].max(1) as f64;
        // A cycle is two calls. Its acquire (on a free key: EXISTS, HINCRBY, PEXPIRE) costs
        // at most the re-entry above, so the release costs at least the difference.
        let cycle_server =
            2.0 * self.server_us[RAW_CYCLE] as f64 / self.server_calls[RAW_CYCLE].max(1) as f64;
        fig.set("server_acquire_shape_us_per_call", acquire);
        fig.set("server_script_cycle_us", cycle_server);
        fig.set("server_release_us_at_least", cycle_server - acquire);
        fig.set("uncontended_1t_cycles_per_sec", mean(rows, REDMUTEX));
        fig.set(
            "uncontended_1t_evalsha_per_cycle",
            self.scripts as f64 / self.cycles as f64,
        );
        fig.set(
            "uncontended_1t_latch_dels_per_cycle",
            self.dels as f64 / self.cycles as f64,
        );
        let ratios: [(&str, SliceRatio); 3] = [
            ("uncontended_1t_cycle_over_two_evalsha", |r| {
                (r[EVALSHA] / 2.0) / r[REDMUTEX]
            }),
            ("uncontended_1t_cycle_over_raw_scripts", |r| {
                r[RAW_CYCLE] / r[REDMUTEX]
            }),
            ("floor_raw_scripts_over_two_evalsha", |r| {
                (r[EVALSHA] / 2.0) / r[RAW_CYCLE]
            }),
        ];
        for (key, ratio) in ratios {
            let [q1, med, q3] = quartiles(rows, ratio);
            fig.set(key, med);
            fig.set(&format!("{key}_q1"), q1);
            fig.set(&format!("{key}_q3"), q3);
        }
        fig.set("uncontended_1t_slices", rows.len() as f64);
        // The client's own CPU per operation (this process, every thread: the caller,
        // the watchdog and the pub/sub threads), far steadier here than wall time, which
        // waits on the server's share of two cores.
        let cpu_us = |i: usize| {
            self.cpu_ns[i].map_or(f64::NAN, |ns| {
                ns as f64 / 1e3 / self.cpu_ops[i].max(1) as f64
            })
        };
        fig.set("cpu_us_per_cycle_redmutex", cpu_us(REDMUTEX));
        fig.set("cpu_us_per_cycle_raw", cpu_us(RAW_CYCLE));
        fig.set("cpu_us_per_evalsha_raw", cpu_us(EVALSHA));
        fig.set(
            "cpu_cycle_redmutex_over_raw",
            cpu_us(REDMUTEX) / cpu_us(RAW_CYCLE),
        );
    }
}

/// The mean over the slices of measurement `i`.
fn mean(rows: &[[f64; 3]], i: usize) -> f64 {
    rows.iter().map(|r| r[i]).sum::<f64>() / rows.len() as f64
}

/// The first quartile, median and third quartile over the slices of `f` of a row.
fn quartiles(rows: &[[f64; 3]], f: impl Fn(&[f64; 3]) -> f64) -> [f64; 3] {
    let mut v: Vec<f64> = rows.iter().map(f).collect();
    v.sort_by(f64::total_cmp);
    [
        percentile(&v, 0.25),
        percentile(&v, 0.5),
        percentile(&v, 0.75),
    ]
}

/// Sixteen threads: starting 16 threads per slice costs more, so longer slices.
fn sixteen_threads(
    server: &Server,
    client: &Client,
    shape: &redis::Script,
    settings: &Settings,
    fig: &mut Figures,
) {
    let rounds = if settings.quick { 2 } else { 6 };
    let slice = settings.span() / rounds;
    let mut rows: Vec<[f64; 3]> = Vec::new();
    for r in 0..rounds as usize {
        let mut row = [0.0; 3];
        for k in 0..3 {
            let which = (r + k) % 3;
            row[which] = sixteen_thread_rate(which, server, client, shape, slice);
        }
        rows.push(row);
    }
    let median = |f: SliceRatio| quartiles(&rows, f)[1];
    fig.set("floor_16t_evalsha_per_sec", mean(&rows, EVALSHA));
    fig.set("floor_16t_script_cycles_per_sec", mean(&rows, RAW_CYCLE));
    fig.set("uncontended_16t_cycles_per_sec", mean(&rows, REDMUTEX));
    fig.set(
        "uncontended_16t_cycle_over_two_evalsha",
        median(|r| (r[EVALSHA] / 2.0) / r[REDMUTEX]),
    );
    fig.set(
        "uncontended_16t_cycle_over_raw_scripts",
        median(|r| r[RAW_CYCLE] / r[REDMUTEX]),
    );
}

/// One 16-thread slice of measurement `which`, each thread on its own keys.
fn sixteen_thread_rate(
    which: usize,
    server: &Server,
    client: &Client,
    shape: &redis::Script,
    slice: Duration,
) -> f64 {
    match which {
        EVALSHA => rate_threads(16, slice, |t| {
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
        RAW_CYCLE => rate_threads(16, slice, |t| {
            let mut conn = server.conn();
            let mut cycle = raw_cycle(&format!("raw16:{t}"));
            let mut i = t;
            move || {
                cycle(&mut conn, &format!("bench:raw16:{i}"));
                i = next_key(i, t);
            }
        }),
        _ => rate_threads(16, slice, |t| {
            let mut i = t;
            move || {
                let lock = client.get_lock(format!("bench:many:{i}"));
                lock.lock().unwrap().unlock().unwrap();
                i = next_key(i, t);
            }
        }),
    }
}

/// One raw acquire + release on `key` with owner `owner`, as a reusable closure.
fn raw_cycle(owner: &str) -> impl FnMut(&mut redis::Connection, &str) + use<> {
    raw_cycle_publishing(owner, "PUBLISH")
}

/// [`raw_cycle`] with the release publishing by `publish` (`SPUBLISH` on a cluster).
pub(crate) fn raw_cycle_publishing(
    owner: &str,
    publish: &'static str,
) -> impl FnMut(&mut redis::Connection, &str) + use<> {
    raw_cycle_then(owner, publish, |_| {})
}

/// [`raw_cycle_publishing`] with `between` run on the connection after the acquire
/// (a sentinel floor's `WAIT`).
pub(crate) fn raw_cycle_then<F: FnMut(&mut redis::Connection)>(
    owner: &str,
    publish: &'static str,
    mut between: F,
) -> impl FnMut(&mut redis::Connection, &str) + use<F> {
    let acquire = acquire_script();
    // The same text the library sends: the latch rules, then the release script.
    let release = redis::Script::new(concat!(
        include_str!("../../lua/lib/latch.lua"),
        include_str!("../../lua/lock/release.lua")
    ));
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
        between(conn);
        let latch = format!("redisson_unlock_latch:{{{key}}}:{owner}:{n:032x}");
        release
            .key(key)
            .key(format!("redisson_lock__channel:{{{key}}}"))
            .key(&latch)
            .arg("0")
            .arg(30_000)
            .arg(&owner)
            .arg(publish)
            .arg(1)
            .invoke::<redis::Value>(conn)
            .unwrap();
    }
}

/// The 16-thread scenarios spread over 1,000 keys without sharing any: thread `t` cycles
/// through keys t, t + 16, t + 32, ... below 1,000.
fn next_key(i: usize, t: usize) -> usize {
    if i + 16 < 1000 { i + 16 } else { t }
}
