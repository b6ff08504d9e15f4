//! The lock family's costs against their baselines, each measured in the same run in
//! interleaved slices: the fenced lock's cycle against the `RLock` cycle, and the fenced
//! write against a plain EVALSHA of the same write.

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
