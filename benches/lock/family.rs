//! The lock family's costs against their baselines, each measured in the same run in
//! interleaved slices: the fenced lock's cycle against the `RLock` cycle, and the fenced
//! write against a plain EVALSHA of the same write.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use redmutex::Client;

use crate::figures::Figures;
use crate::measure::{percentile, rate};
use crate::server::Server;
use crate::settings::Settings;

/// Per-slice rates of `ops`, run in rotating order slice after slice, so that background
/// load hits every side of a ratio alike.
pub(crate) fn interleaved(span: Duration, ops: &mut [&mut dyn FnMut()]) -> Vec<Vec<f64>> {
    let slice = Duration::from_millis(25);
    let rounds = (span.as_millis() / slice.as_millis()).max(4) as usize;
    let n = ops.len();
    (0..rounds)
        .map(|r| {
            let mut row = vec![0.0; n];
            for k in 0..n {
                let which = (r + k) % n;
                row[which] = rate(slice, &mut *ops[which]);
            }
            row
        })
        .collect()
}

/// The median over the slices of rate `base` ÷ rate `ours`: our time per operation in
/// units of the baseline's.
pub(crate) fn median_time_ratio(rows: &[Vec<f64>], ours: usize, base: usize) -> f64 {
    let mut v: Vec<f64> = rows.iter().map(|r| r[base] / r[ours]).collect();
    v.sort_by(f64::total_cmp);
    percentile(&v, 0.5)
}

/// The mean rate of measurement `i` over the slices.
pub(crate) fn mean_rate(rows: &[Vec<f64>], i: usize) -> f64 {
    rows.iter().map(|r| r[i]).sum::<f64>() / rows.len() as f64
}

const RLOCK: usize = 0;
const FENCED: usize = 1;
const EVAL_WRITE: usize = 2;
const FENCED_WRITE: usize = 3;

/// `fenced_cycle_ratio` (fenced lock+unlock ÷ RLock lock+unlock) and `fenced_write_ratio`
/// (a fenced `INCRBY` under a held fenced lock ÷ a plain EVALSHA of a script doing the same
/// `INCRBY`), one thread each.
pub(crate) fn fenced(server: &Server, client: &Client, settings: &Settings, fig: &mut Figures) {
    let rlock = client.get_lock("bench:family:rlock");
    let fenced = client.get_fenced_lock("bench:family:fenced");
    let held = client.get_fenced_lock("{bench:family:w}").lock().unwrap();
    let counter = "{bench:family:w}:n";
    let plain = redis::Script::new("return redis.call('incrby', KEYS[1], ARGV[1])");
    let mut raw = server.conn();
    let mut rlock_cycle = || rlock.lock().unwrap().unlock().unwrap();
    let mut fenced_cycle = || fenced.lock().unwrap().unlock().unwrap();
    let mut eval_write = || {
        plain
            .key(counter)
            .arg(1)
            .invoke::<i64>(&mut raw)
            .map(drop)
            .unwrap();
    };
    let mut fenced_write = || {
        held.fenced(|w| {
            w.incr_by(counter, 1);
        })
        .map(drop)
        .unwrap();
    };
    let rows = interleaved(
        settings.span(),
        &mut [
            &mut rlock_cycle,
            &mut fenced_cycle,
            &mut eval_write,
            &mut fenced_write,
        ],
    );
    fig.set("family_rlock_cycles_per_sec", mean_rate(&rows, RLOCK));
    fig.set("fenced_cycles_per_sec", mean_rate(&rows, FENCED));
    fig.set(
        "fenced_cycle_ratio",
        median_time_ratio(&rows, FENCED, RLOCK),
    );
    fig.set("eval_writes_per_sec", mean_rate(&rows, EVAL_WRITE));
    fig.set("fenced_writes_per_sec", mean_rate(&rows, FENCED_WRITE));
    fig.set(
        "fenced_write_ratio",
        median_time_ratio(&rows, FENCED_WRITE, EVAL_WRITE),
    );
    held.unlock().unwrap();
}

const SINGLE: usize = 0;
const RED: usize = 1;
const PING_ONE: usize = 2;
const PING_FIVE: usize = 3;

/// `redlock_5_cycle_ratio`: a RedLock acquire+release over five local servers (one
/// client each; the run's server and four more) ÷ one RLock acquire+release on the run's
/// server, interleaved in the same run. The RedLock writes every member's script before
/// reading any reply, so its cycle costs about one round trip per step plus the slowest
/// member, not five round trips.
///
/// Beside it, the floor of that ratio on this machine, `redlock_5_floor_ratio`: one raw
/// socket round (write `PING` to each server, then read each reply) over the five
/// servers ÷ the same over one server. On loopback every server is a process that must
/// be scheduled to answer, so with fewer cores than servers the five-server round costs
/// several one-server rounds however the client sends it; the RedLock ratio can be no
/// better than this floor.
pub(crate) fn redlock(client: &Client, settings: &Settings, fig: &mut Figures) {
    let others: Vec<Server> = (0..4).map(|_| Server::start()).collect();
    let mut clients = vec![client.clone()];
    clients.extend(others.iter().map(Server::client));
    let red = clients[0].get_red_lock(clients.iter().map(|c| c.get_lock("bench:family:red")));
    let single = client.get_lock("bench:family:single");
    let mut sockets: Vec<TcpStream> = clients
        .iter()
        .map(|c| {
            let address = c.config().address().trim_start_matches("redis://");
            let address = address.trim_end_matches('/');
            let socket = TcpStream::connect(address).unwrap();
            socket.set_nodelay(true).unwrap();
            socket
        })
        .collect();
    let mut single_cycle = || single.lock().unwrap().unlock().unwrap();
    let mut red_cycle = || red.lock().unwrap().unlock().unwrap();
    let mut ping = |n: usize| {
        let mut reply = [0u8; 16];
        for s in sockets.iter_mut().take(n) {
            s.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
        }
        for s in sockets.iter_mut().take(n) {
            // "+PONG\r\n" arrives in one segment on loopback.
            let _ = s.read(&mut reply).unwrap();
        }
    };
    let ping = std::cell::RefCell::new(&mut ping);
    let mut ping_one = || (ping.borrow_mut())(1);
    let mut ping_five = || (ping.borrow_mut())(5);
    let rows = interleaved(
        settings.span(),
        &mut [
            &mut single_cycle,
            &mut red_cycle,
            &mut ping_one,
            &mut ping_five,
        ],
    );
    fig.set("redlock_single_cycles_per_sec", mean_rate(&rows, SINGLE));
    fig.set("redlock_5_cycles_per_sec", mean_rate(&rows, RED));
    fig.set(
        "redlock_5_cycle_ratio",
        median_time_ratio(&rows, RED, SINGLE),
    );
    fig.set("ping_round_1_per_sec", mean_rate(&rows, PING_ONE));
    fig.set("ping_round_5_per_sec", mean_rate(&rows, PING_FIVE));
    fig.set(
        "redlock_5_floor_ratio",
        median_time_ratio(&rows, PING_FIVE, PING_ONE),
    );
    if settings.java {
        // Redisson's RedLock over the same five servers, after the Rust pair (a JVM on
        // two cores would disturb an interleaved run): its own cycle rate, its ratio to
        // its own RLock cycle, and the Rust RedLock's time over Redisson's.
        let mut urls = vec![client.config().address().to_owned()];
        urls.extend(others.iter().map(|s| s.url.clone()));
        if let Some((red, single, ratio)) = crate::redisson::redlock(&urls, settings) {
            fig.set("redisson_redlock_5_cycles_per_sec", red);
            fig.set("redisson_redlock_single_cycles_per_sec", single);
            fig.set("redisson_redlock_5_cycle_ratio", ratio);
            fig.set("redlock_5_over_redisson", red / mean_rate(&rows, RED));
        }
    }
}
