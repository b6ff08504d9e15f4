//! The `progress` checker of the verification harness: every worker thread that takes
//! part in a lock workload completes a critical section in every [`WINDOW`] of its life
//! outside the faults (issue 26's "every thread of every process completes a section in
//! every 10 s window"). Liveness judges single waits against a bound; this judges each
//! thread's whole run, so it is what catches a thread starved by the others (barging
//! that never gives way) rather than a lost wake-up.
//!
//! A thread's life runs from its first recorded line to its last (a killed worker's
//! threads end where their history does; the fresh worker's begin with theirs). Its gaps
//! are the stretches between that start, each completed section (`section-end` `ok`) and
//! that end. Time inside a fault (a nemesis interval, extended by two leases for the
//! deployment to settle) does not count against a gap: a stopped process, a failover or
//! a starved host is the fault's delay, not the lock's.

use std::collections::BTreeMap;

use crate::verify_check::{Figures, Op, faults, lease_ns};

/// The longest a thread may go without completing a section, faults aside.
pub(crate) const WINDOW_NS: u64 = 10_000_000_000;

/// One thread's life and its completed sections, in order.
#[derive(Default)]
struct Life {
    first: u64,
    last: u64,
    ends: Vec<u64>,
    acquires: bool,
    language: String,
}

/// The checker: per cell, the threads judged (`operations`), the gaps over the window
/// (`violations` for Rust threads, `overstays` for the peer clients' threads), and the
/// longest gap outside faults (`longest_gap_ms`).
pub(crate) fn progress(ops: &[Op]) -> BTreeMap<String, Figures> {
    let mut lives: BTreeMap<(String, String, u64), Life> = BTreeMap::new();
    for op in ops
        .iter()
        .filter(|o| o.op != "nemesis" && o.op != "observe")
    {
        let life = lives
            .entry((op.cell.clone(), op.process.clone(), op.thread))
            .or_insert_with(|| Life {
                first: op.ns,
                last: op.ns,
                language: op.language.clone(),
                ..Life::default()
            });
        life.first = life.first.min(op.ns);
        life.last = life.last.max(op.ns);
        life.acquires |= op.op == "acquire";
        if op.op == "section-end" && op.kind == "ok" {
            life.ends.push(op.ns);
        }
    }
    let mut lease_of: BTreeMap<String, u64> = BTreeMap::new();
    let mut cells: BTreeMap<String, Figures> = BTreeMap::new();
    for ((cell, process, thread), mut life) in lives {
        // Latch threads take no lock: they have rounds, judged by the latch checker.
        if !life.acquires {
            continue;
        }
        let lease = *lease_of
            .entry(cell.clone())
            .or_insert_with(|| lease_ns(ops, &cell));
        life.ends.sort_unstable();
        let f = cells.entry(cell.clone()).or_default();
        f.operations += 1;
        let mut marks = Vec::with_capacity(life.ends.len() + 2);
        marks.push(life.first);
        marks.extend(&life.ends);
        marks.push(life.last);
        let faults = faults_of(ops, &cell, 2 * lease);
        let mut longest = 0;
        for pair in marks.windows(2) {
            let (from, to) = (pair[0], pair[1]);
            let excused: u64 = faults
                .iter()
                .map(|(a, b)| to.min(*b).saturating_sub(from.max(*a)))
                .sum();
            let gap = (to - from).saturating_sub(excused);
            longest = longest.max(gap);
            if gap > WINDOW_NS {
                // A peer client's thread (Redisson, go-redsync, redis-py) that stalls is
                // that client's doing, as its overstays are: counted, shown, not judged
                // against this library.
                let rust = life.language == "rust";
                if rust {
                    f.violations += 1;
                } else {
                    f.overstays += 1;
                }
                f.evidence.push(format!(
                    "{process}/t{thread} ({}{}) completed no section for {} ms outside faults \
                     (from {} to {} ns)",
                    life.language,
                    if rust { "" } else { ", not judged" },
                    gap / 1_000_000,
                    from,
                    to
                ));
            }
        }
        let longest_ms = longest / 1_000_000;
        let entry = f.extra.entry("longest_gap_ms").or_insert(0);
        *entry = (*entry).max(longest_ms);
    }
    cells
}

/// The cell's fault intervals, merged so that overlapping faults are not excused twice.
fn faults_of(ops: &[Op], cell: &str, settle_ns: u64) -> Vec<(u64, u64)> {
    let mut all = faults(ops, settle_ns).remove(cell).unwrap_or_default();
    all.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(all.len());
    for (a, b) in all {
        match merged.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn line(process: &str, op: &str, kind: &str, ns: u64) -> Op {
        let text = format!(
            r#"{{"cell":"single-none-lock-lease","process":"{process}","thread":0,"language":"rust","name":"n","op":"{op}","type":"{kind}","ns":{ns},"lease_ms":300}}"#
        );
        Op::parse(&text).unwrap()
    }

    fn sections(process: &str, ends: &[u64]) -> Vec<Op> {
        let mut ops = vec![line(process, "acquire", "invoke", 0)];
        for &e in ends {
            ops.push(line(process, "section-end", "ok", e));
        }
        ops
    }

    fn figures(ops: &[Op]) -> Figures {
        progress(ops).remove("single-none-lock-lease").unwrap()
    }

    #[test]
    fn a_thread_that_goes_a_window_without_a_section_is_a_violation() {
        let mut ops = sections("p0", &[S, 2 * S, 3 * S, 20 * S]);
        ops.extend(sections("p1", &[S, 5 * S, 9 * S, 13 * S, 17 * S, 20 * S]));
        let f = figures(&ops);
        assert_eq!((f.operations, f.violations), (2, 1), "{:?}", f.evidence);
        assert_eq!(f.extra["longest_gap_ms"], 17_000);
        assert!(f.evidence[0].starts_with("p0/t0"), "{:?}", f.evidence);
    }

    #[test]
    fn time_inside_a_fault_is_excused() {
        let mut ops = sections("p0", &[S, 20 * S]);
        let fault = |kind: &str, ns: u64| {
            Op::parse(&format!(
                r#"{{"cell":"single-none-lock-lease","process":"nemesis","thread":0,"op":"nemesis","type":"{kind}","fault":"sigstop","ns":{ns}}}"#
            ))
            .unwrap()
        };
        // 19 s without a section, 12 s of it stopped (plus two 300 ms leases to settle).
        ops.push(fault("invoke", 4 * S));
        ops.push(fault("ok", 16 * S));
        let f = figures(&ops);
        assert_eq!(f.violations, 0, "{:?}", f.evidence);
        assert_eq!(f.extra["longest_gap_ms"], 19_000 - 12_600);
    }

    #[test]
    fn a_peer_clients_stall_is_counted_not_judged() {
        let mut ops = sections("java4_7_0", &[S, 20 * S]);
        for op in &mut ops {
            op.language = "java".into();
        }
        let f = figures(&ops);
        assert_eq!((f.violations, f.overstays), (0, 1), "{:?}", f.evidence);
        assert!(f.evidence[0].contains("not judged"), "{:?}", f.evidence);
    }

    #[test]
    fn threads_that_take_no_lock_are_not_judged() {
        let ops = vec![
            line("p0", "latch-wait", "invoke", 0),
            line("p0", "latch-wait", "ok", 30 * S),
        ];
        assert!(progress(&ops).is_empty());
    }
}
