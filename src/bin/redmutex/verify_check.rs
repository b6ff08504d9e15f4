//! The verification harness's checkers: they read recorded histories (JSON lines, see
//! `docs/verify.md`) and judge them mechanically, with no timing assumption beyond one
//! host's `CLOCK_MONOTONIC`.
//!
//! - `exclusion`: two critical sections of one lock name that overlap in time are an
//!   **overstay** when one of the two holders had lost its hold by its own section end
//!   (its field was gone from the lock's hash in its exit snapshot), and a **violation**
//!   when both still held (two holds in Redis at once) or when a Rust holder's hold was
//!   gone while its guard still trusted it. Each holder is judged by its own snapshots.
//! - `loss_honesty`: every Rust section whose hold Redis no longer had at a snapshot was
//!   reported lost by its guard (read right after that snapshot).
//! - `fencing`: tokens of one name strictly increase in real-time order of grants, and
//!   the fenced resource never accepted a write whose token was lower than one it had
//!   accepted before that write was sent.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

/// One recorded operation: the fields the checkers read.
#[derive(Debug, Clone)]
pub(crate) struct Op {
    pub(crate) cell: String,
    pub(crate) process: String,
    pub(crate) thread: u64,
    pub(crate) language: String,
    pub(crate) name: String,
    pub(crate) op: String,
    pub(crate) kind: String,
    pub(crate) ns: u64,
    pub(crate) raw: Value,
}

impl Op {
    /// Parses one history line; `None` for a line that is not an operation.
    pub(crate) fn parse(line: &str) -> Option<Self> {
        let v: Value = serde_json::from_str(line).ok()?;
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        Some(Self {
            cell: s("cell"),
            process: s("process"),
            thread: v.get("thread").and_then(Value::as_u64).unwrap_or(0),
            language: s("language"),
            name: s("name"),
            op: s("op"),
            kind: s("type"),
            ns: v.get("ns")?.as_u64()?,
            raw: v,
        })
    }

    fn bool(&self, key: &str) -> Option<bool> {
        self.raw.get(key).and_then(Value::as_bool)
    }

    fn u64(&self, key: &str) -> Option<u64> {
        self.raw.get(key).and_then(Value::as_u64)
    }
}

/// One critical section, rebuilt from its thread's operations.
#[derive(Debug, Clone)]
pub(crate) struct Section {
    pub(crate) cell: String,
    pub(crate) name: String,
    pub(crate) holder: String,
    pub(crate) rust: bool,
    pub(crate) token: Option<u64>,
    /// When the acquire that granted it was sent, and when its reply came back: the
    /// grant ran in Redis between the two.
    pub(crate) acquire_ns: u64,
    pub(crate) granted_ns: u64,
    /// When the entry snapshot's reply came back: the section's work (its read-modify-
    /// write) starts after this.
    pub(crate) start_ns: u64,
    /// When the exit snapshot was sent: the work ended before this. `None`: no exit
    /// snapshot answered (a possible hold to the end of the history). Judging overlap by
    /// [start_ns, end_ns] compares what surely ran inside, not the snapshots' own round
    /// trips: an exit snapshot whose reply came back late (a descheduled thread) shows the
    /// state at its EXEC, which may be long before the reply.
    pub(crate) end_ns: Option<u64>,
    /// This holder's hold was in the lock's hash at the entry snapshot.
    pub(crate) held_start: bool,
    /// ... and at the exit snapshot (`None`: no exit snapshot).
    pub(crate) held_end: Option<bool>,
    /// The Rust guard trusted its hold right after each snapshot (`None` for Java).
    pub(crate) trusted_start: Option<bool>,
    pub(crate) trusted_end: Option<bool>,
}

impl Section {
    fn end(&self) -> u64 {
        self.end_ns.unwrap_or(u64::MAX)
    }

    /// The hold was gone in Redis at one of the section's snapshots (or unknown).
    fn lost(&self) -> bool {
        !self.held_start || self.held_end != Some(true)
    }

    /// A Rust guard trusted a hold that Redis no longer had at that snapshot.
    fn dishonest(&self) -> bool {
        (!self.held_start && self.trusted_start == Some(true))
            || (self.held_end == Some(false) && self.trusted_end == Some(true))
    }
}

/// One cell's figures for one checker.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Figures {
    pub(crate) operations: u64,
    pub(crate) overlaps: u64,
    pub(crate) overstays: u64,
    pub(crate) violations: u64,
    /// What each violation was, for the report.
    pub(crate) evidence: Vec<String>,
}

impl Figures {
    fn json(&self) -> Value {
        json!({
            "operations": self.operations,
            "overlaps": self.overlaps,
            "overstays": self.overstays,
            "violations": self.violations,
            "evidence": self.evidence.iter().take(20).collect::<Vec<_>>(),
        })
    }

    fn violation(&mut self, what: String) {
        self.violations += 1;
        self.evidence.push(what);
    }
}

/// Rebuilds the sections of a history: each thread's operations in order (a thread
/// writes its own file, so file order is its program order).
pub(crate) fn sections(ops: &[Op]) -> Vec<Section> {
    let mut by_thread: BTreeMap<(String, String, u64), Vec<&Op>> = BTreeMap::new();
    for op in ops {
        by_thread
            .entry((op.cell.clone(), op.process.clone(), op.thread))
            .or_default()
            .push(op);
    }
    let mut out = Vec::new();
    for ((cell, process, thread), ops) in by_thread {
        let mut acquire: Option<(u64, u64, Option<u64>)> = None;
        let mut open: Option<Section> = None;
        let mut end_invoke = None;
        for op in ops {
            match (op.op.as_str(), op.kind.as_str()) {
                ("acquire", "invoke") => {
                    if let Some(s) = open.take() {
                        out.push(s);
                    }
                    acquire = Some((op.ns, op.ns, None));
                }
                ("acquire", "ok") => {
                    if let Some(a) = acquire.as_mut() {
                        a.1 = op.ns;
                        a.2 = op.u64("token");
                    }
                }
                ("section-start", "ok") => {
                    let (acquire_ns, granted_ns, token) = acquire.unwrap_or((op.ns, op.ns, None));
                    open = Some(Section {
                        cell: cell.clone(),
                        name: op.name.clone(),
                        holder: format!("{process}/t{thread}"),
                        rust: op.language == "rust",
                        token,
                        acquire_ns,
                        granted_ns,
                        start_ns: op.ns,
                        end_ns: None,
                        held_start: op.u64("held").unwrap_or(0) > 0,
                        held_end: None,
                        trusted_start: op.bool("trusted"),
                        trusted_end: None,
                    });
                }
                ("section-start", "invoke") => end_invoke = None,
                ("section-end", "invoke") => end_invoke = Some(op.ns),
                ("section-end", "ok") => {
                    if let Some(mut s) = open.take() {
                        s.end_ns = Some(end_invoke.unwrap_or(op.ns));
                        s.held_end = Some(op.u64("held").unwrap_or(0) > 0);
                        s.trusted_end = op.bool("trusted");
                        out.push(s);
                    }
                }
                _ => {}
            }
        }
        if let Some(s) = open.take() {
            out.push(s);
        }
    }
    out
}

/// Groups sections by (cell, lock name), each group sorted by entry.
fn by_lock(sections: &[Section]) -> BTreeMap<(String, String), Vec<&Section>> {
    let mut m: BTreeMap<(String, String), Vec<&Section>> = BTreeMap::new();
    for s in sections {
        m.entry((s.cell.clone(), s.name.clone()))
            .or_default()
            .push(s);
    }
    for v in m.values_mut() {
        v.sort_by_key(|s| s.start_ns);
    }
    m
}

/// Every pair of sections of one lock by different holders whose intervals intersect.
fn overlaps<'a>(group: &[&'a Section]) -> Vec<(&'a Section, &'a Section)> {
    let mut out = Vec::new();
    for (i, a) in group.iter().enumerate() {
        for b in &group[i + 1..] {
            if b.start_ns >= a.end() {
                break;
            }
            if a.holder != b.holder {
                out.push((*a, *b));
            }
        }
    }
    out
}

fn describe(s: &Section) -> String {
    format!(
        "{} [{}..{}] held {}->{:?} trusted {:?}->{:?}",
        s.holder,
        s.start_ns,
        s.end_ns.map_or("open".to_owned(), |n| n.to_string()),
        s.held_start,
        s.held_end,
        s.trusted_start,
        s.trusted_end
    )
}

/// The exclusion checker, per cell.
pub(crate) fn exclusion(ops: &[Op], sections: &[Section]) -> BTreeMap<String, Figures> {
    let mut cells = operations(ops);
    for ((cell, name), group) in by_lock(sections) {
        let f = cells.entry(cell).or_default();
        for (a, b) in overlaps(&group) {
            f.overlaps += 1;
            // Both still held at their own snapshots: two holds at once in Redis. Or a
            // side whose hold was gone while its Rust guard still trusted it.
            if (!a.lost() && !b.lost()) || a.dishonest() || b.dishonest() {
                f.violation(format!("{name}: {} overlaps {}", describe(a), describe(b)));
            } else {
                f.overstays += 1;
            }
        }
    }
    cells
}

/// The loss-honesty checker, per cell: Rust sections only.
pub(crate) fn loss_honesty(sections: &[Section]) -> BTreeMap<String, Figures> {
    let mut cells: BTreeMap<String, Figures> = BTreeMap::new();
    for ((cell, name), group) in by_lock(sections) {
        let f = cells.entry(cell).or_default();
        for s in group.iter().filter(|s| s.rust) {
            f.operations += 1;
            if s.lost() {
                f.overstays += 1;
            }
            if s.dishonest() {
                f.violation(format!(
                    "{name}: hold gone in Redis while the guard trusted it: {}",
                    describe(s)
                ));
            }
        }
        f.overlaps += overlaps(&group)
            .iter()
            .filter(|(a, b)| (a.rust && a.lost()) || (b.rust && b.lost()))
            .count() as u64;
    }
    cells
}

/// The fencing checker, per cell: fenced grants and the fenced resource's writes.
pub(crate) fn fencing(ops: &[Op], sections: &[Section]) -> BTreeMap<String, Figures> {
    let mut cells: BTreeMap<String, Figures> = BTreeMap::new();
    for ((cell, name), group) in by_lock(sections) {
        let grants: Vec<&Section> = group
            .iter()
            .copied()
            .filter(|s| s.token.is_some())
            .collect();
        if grants.is_empty() {
            continue;
        }
        let f = cells.entry(cell).or_default();
        f.operations += grants.len() as u64;
        f.overlaps += overlaps(&grants).len() as u64;
        for (i, a) in grants.iter().enumerate() {
            for b in &grants[i + 1..] {
                let (ta, tb) = (a.token.unwrap_or(0), b.token.unwrap_or(0));
                if ta == tb {
                    f.violation(format!(
                        "{name}: token {ta} granted twice: {} and {}",
                        a.holder, b.holder
                    ));
                }
                // A grant sent after another grant's reply came back ran after it in
                // Redis, so it must draw a higher token.
                for (x, y) in [(a, b), (b, a)] {
                    let (tx, ty) = (x.token.unwrap_or(0), y.token.unwrap_or(0));
                    if x.granted_ns < y.acquire_ns && tx > ty {
                        f.violation(format!(
                            "{name}: token {ty} granted to {} after {} was granted {tx}",
                            y.holder, x.holder
                        ));
                    }
                }
            }
        }
    }
    // The resource's side: an accepted write with a token below one accepted earlier
    // (its reply back before this write was sent) is a stale write let through.
    let mut writes: BTreeMap<(String, String), Vec<WriteOp>> = BTreeMap::new();
    let mut pending: BTreeMap<(String, String, u64), u64> = BTreeMap::new();
    for op in ops.iter().filter(|o| o.op == "write") {
        let Some(token) = op.u64("token") else {
            continue;
        };
        let key = (op.cell.clone(), op.process.clone(), op.thread);
        match op.kind.as_str() {
            "invoke" => {
                pending.insert(key, op.ns);
            }
            "ok" | "fail" => {
                let sent = pending.remove(&key).unwrap_or(op.ns);
                writes
                    .entry((op.cell.clone(), op.name.clone()))
                    .or_default()
                    .push((sent, op.ns, token, op.kind == "ok"));
            }
            _ => {}
        }
    }
    for ((cell, name), ws) in writes {
        let f = cells.entry(cell).or_default();
        f.operations += ws.len() as u64;
        f.overstays += ws.iter().filter(|w| !w.3).count() as u64;
        let accepted: Vec<_> = ws.iter().filter(|w| w.3).collect();
        for a in &accepted {
            for b in &accepted {
                if a.1 < b.0 && a.2 > b.2 {
                    f.violation(format!(
                        "{name}: the resource accepted token {} after it had accepted {}",
                        b.2, a.2
                    ));
                }
            }
        }
    }
    cells
}

/// One fenced write: sent at, answered at, its token, accepted.
type WriteOp = (u64, u64, u64, bool);

/// Operations per cell (nemesis events not counted).
fn operations(ops: &[Op]) -> BTreeMap<String, Figures> {
    let mut cells: BTreeMap<String, Figures> = BTreeMap::new();
    for op in ops.iter().filter(|o| o.op != "nemesis") {
        cells.entry(op.cell.clone()).or_default().operations += 1;
    }
    cells
}

/// Reads every `*.jsonl` file of `dir`.
pub(crate) fn read_history(dir: &Path) -> Result<Vec<Op>, String> {
    let mut ops = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    for path in files {
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        ops.extend(text.lines().filter_map(Op::parse));
    }
    Ok(ops)
}

/// The whole report: each checker by name, each cell's figures, plus per-cell context
/// (sections, losses the guards reported, faults injected).
pub(crate) fn report(ops: &[Op]) -> (Value, u64) {
    let sections = sections(ops);
    let checkers = [
        ("exclusion", exclusion(ops, &sections)),
        ("loss_honesty", loss_honesty(&sections)),
        ("fencing", fencing(ops, &sections)),
    ];
    let violations: u64 = checkers
        .iter()
        .flat_map(|(_, cells)| cells.values())
        .map(|f| f.violations)
        .sum();
    let mut cells: BTreeMap<String, Value> = BTreeMap::new();
    for cell in checkers[0].1.keys() {
        let mine = sections.iter().filter(|s| &s.cell == cell);
        let reported = mine
            .clone()
            .filter(|s| s.trusted_end == Some(false))
            .count();
        let faults = ops
            .iter()
            .filter(|o| &o.cell == cell && o.op == "nemesis" && o.kind == "invoke")
            .count();
        let infos = ops
            .iter()
            .filter(|o| &o.cell == cell && o.kind == "info")
            .count();
        let java = mine.clone().filter(|s| !s.rust).count();
        cells.insert(
            cell.clone(),
            json!({"sections": mine.count(), "java_sections": java, "losses_reported": reported,
                   "faults": faults, "unknown_outcomes": infos}),
        );
    }
    let mut by_name = serde_json::Map::new();
    for (name, figures) in &checkers {
        let cells: serde_json::Map<String, Value> =
            figures.iter().map(|(c, f)| (c.clone(), f.json())).collect();
        by_name.insert((*name).to_owned(), Value::Object(cells));
    }
    let report = json!({
        "violations": violations,
        "checkers": by_name,
        "cells": cells,
        "not_checked": ["liveness", "fair_order"],
    });
    (report, violations)
}

/// The report as a Markdown table, one row per cell.
pub(crate) fn markdown(report: &Value) -> String {
    let mut md = String::from(
        "| topology | nemesis | workload | sections (Java) | exclusion ops / overlaps / overstays / violations | loss honesty violations | fencing violations | losses reported | faults |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    let get = |checker: &str, cell: &str, field: &str| {
        report["checkers"][checker][cell][field]
            .as_u64()
            .unwrap_or(0)
    };
    if let Some(cells) = report["cells"].as_object() {
        for (cell, c) in cells {
            let mut parts = cell.splitn(3, '-');
            let (t, n, w) = (
                parts.next().unwrap_or(""),
                parts.next().unwrap_or(""),
                parts.next().unwrap_or(""),
            );
            let fencing = if report["checkers"]["fencing"].get(cell).is_some() {
                get("fencing", cell, "violations").to_string()
            } else {
                "n/a".to_owned()
            };
            md.push_str(&format!(
                "| {t} | {n} | {w} | {} ({}) | {} / {} / {} / {} | {} | {fencing} | {} | {} |\n",
                c["sections"],
                c["java_sections"],
                get("exclusion", cell, "operations"),
                get("exclusion", cell, "overlaps"),
                get("exclusion", cell, "overstays"),
                get("exclusion", cell, "violations"),
                get("loss_honesty", cell, "violations"),
                c["losses_reported"],
                c["faults"],
            ));
        }
    }
    md.push_str(&format!(
        "\nTotal violations: {}. Not checked yet: liveness, fair order.\n",
        report["violations"]
    ));
    md
}

/// (Test helper.) Checks a recorded history directory and writes the report beside it.
#[derive(Debug, clap::Args)]
pub(crate) struct VerifyCheckArgs {
    /// The run directory (its `history/` is read; `report.json` and `report.md` written).
    dir: std::path::PathBuf,
}

pub(crate) fn run(args: &VerifyCheckArgs) -> Result<(), String> {
    let violations = check_dir(&args.dir)?;
    if violations > 0 {
        return Err(format!(
            "{violations} violations; see {}/report.md",
            args.dir.display()
        ));
    }
    Ok(())
}

/// Checks `dir/history`, writes `dir/report.json` and `dir/report.md`, prints the table;
/// returns the number of violations.
pub(crate) fn check_dir(dir: &Path) -> Result<u64, String> {
    let ops = read_history(&dir.join("history"))?;
    let (report, violations) = report(&ops);
    let md = markdown(&report);
    std::fs::write(dir.join("report.json"), format!("{report:#}\n")).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("report.md"), &md).map_err(|e| e.to_string())?;
    print!("{md}");
    Ok(violations)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-made history line.
    fn op(process: &str, op: &str, kind: &str, ns: u64, extra: Value) -> String {
        let mut v = json!({"cell": "single-none-lock-lease", "process": process, "thread": 0,
            "language": "rust", "kind": "lock", "name": "L", "owner": process,
            "op": op, "type": kind, "ns": ns, "mode": "lease", "lease_ms": 100});
        if let (Value::Object(v), Value::Object(e)) = (&mut v, extra) {
            v.extend(e);
        }
        v.to_string()
    }

    /// One complete section of `process` from `t0` to `t1` (entry and exit snapshots
    /// saying whether its hold was there and whether its guard trusted it).
    fn section(process: &str, t0: u64, t1: u64, held_end: bool, trusted_end: bool) -> Vec<String> {
        vec![
            op(process, "acquire", "invoke", t0, json!({})),
            op(process, "acquire", "ok", t0 + 1, json!({})),
            op(process, "section-start", "invoke", t0 + 2, json!({})),
            op(
                process,
                "section-start",
                "ok",
                t0 + 3,
                json!({"held": 1, "trusted": true}),
            ),
            op(process, "section-end", "invoke", t1 - 1, json!({})),
            op(
                process,
                "section-end",
                "ok",
                t1,
                json!({"held": u64::from(held_end), "trusted": trusted_end}),
            ),
            op(process, "release", "invoke", t1 + 1, json!({})),
        ]
    }

    fn parse(lines: &[String]) -> Vec<Op> {
        lines.iter().filter_map(|l| Op::parse(l)).collect()
    }

    fn figures(lines: &[String]) -> (Figures, Figures) {
        let ops = parse(lines);
        let s = sections(&ops);
        let cell = "single-none-lock-lease";
        (
            exclusion(&ops, &s).remove(cell).unwrap_or_default(),
            loss_honesty(&s).remove(cell).unwrap_or_default(),
        )
    }

    #[test]
    fn sections_one_after_another_are_no_overlap() {
        let mut h = section("a", 0, 100, true, true);
        h.extend(section("b", 110, 200, true, true));
        let (ex, honesty) = figures(&h);
        assert_eq!((ex.overlaps, ex.overstays, ex.violations), (0, 0, 0));
        assert_eq!((honesty.operations, honesty.violations), (2, 0));
    }

    #[test]
    fn two_holders_that_both_still_held_are_a_violation() {
        // b entered while a was inside, and both found their own hold at exit.
        let mut h = section("a", 0, 100, true, true);
        h.extend(section("b", 50, 200, true, true));
        let (ex, honesty) = figures(&h);
        assert_eq!((ex.overlaps, ex.overstays, ex.violations), (1, 0, 1));
        assert_eq!(honesty.violations, 0);
    }

    #[test]
    fn a_holder_past_its_lease_that_knew_it_is_an_overstay() {
        // a's hold expired inside its section (gone at exit) and its guard said so; b
        // took the lock legitimately. The one at fault is a, the first holder.
        let mut h = section("a", 0, 300, false, false);
        h.extend(section("b", 150, 200, true, true));
        let (ex, honesty) = figures(&h);
        assert_eq!((ex.overlaps, ex.overstays, ex.violations), (1, 1, 0));
        assert_eq!((honesty.overstays, honesty.violations), (1, 0));
    }

    #[test]
    fn a_holder_past_its_lease_whose_guard_still_trusted_is_a_violation() {
        let mut h = section("a", 0, 300, false, true);
        h.extend(section("b", 150, 200, true, true));
        let (ex, honesty) = figures(&h);
        assert_eq!((ex.overlaps, ex.violations), (1, 1));
        assert_eq!((honesty.overstays, honesty.violations), (1, 1));
    }

    #[test]
    fn a_lost_hold_the_guard_trusted_is_dishonest_without_any_overlap() {
        let (ex, honesty) = figures(&section("a", 0, 300, false, true));
        assert_eq!(ex.overlaps, 0);
        assert_eq!(honesty.violations, 1);
    }

    #[test]
    fn an_exit_snapshot_answered_late_is_judged_by_when_it_was_sent() {
        // a's exit snapshot was sent at 99 but its reply came back at 400 (a thread
        // descheduled on a loaded host): its work ended before b entered at 153, and the
        // snapshot saw a's hold. No overlap. (Seen in a real run before this rule.)
        let mut h = section("a", 0, 100, true, true);
        h[5] = op(
            "a",
            "section-end",
            "ok",
            400,
            json!({"held": 1, "trusted": false}),
        );
        h.extend(section("b", 150, 200, true, true));
        let (ex, honesty) = figures(&h);
        assert_eq!((ex.overlaps, ex.violations), (0, 0));
        assert_eq!(honesty.violations, 0);
    }

    #[test]
    fn a_section_without_an_end_is_a_possible_hold_to_the_end() {
        // a's exit was never recorded (its process died): b's later section overlaps
        // it, and since a's hold is unknown the overlap is an overstay, not proof.
        let mut h: Vec<String> = section("a", 0, 100, true, true)[..4].to_vec();
        h.extend(section("b", 5_000, 5_100, true, true));
        let (ex, _) = figures(&h);
        assert_eq!((ex.overlaps, ex.overstays, ex.violations), (1, 1, 0));
    }

    fn fenced(process: &str, t0: u64, t1: u64, token: u64, accepted: bool) -> Vec<String> {
        let mut s = section(process, t0, t1, true, true);
        s[1] = op(process, "acquire", "ok", t0 + 1, json!({"token": token}));
        s.insert(
            4,
            op(process, "write", "invoke", t0 + 4, json!({"token": token})),
        );
        let kind = if accepted { "ok" } else { "fail" };
        s.insert(
            5,
            op(process, "write", kind, t0 + 5, json!({"token": token})),
        );
        s
    }

    fn fencing_of(lines: &[String]) -> Figures {
        let ops = parse(lines);
        fencing(&ops, &sections(&ops))
            .remove("single-none-lock-lease")
            .unwrap_or_default()
    }

    #[test]
    fn increasing_tokens_and_a_refused_stale_write_pass() {
        let mut h = fenced("a", 0, 100, 1, true);
        h.extend(fenced("b", 200, 300, 2, true));
        // c (token 3) overstayed into d's section (token 4); its late write came after
        // d's and the resource refused it: an overstay the fence caught.
        h.extend(fenced("d", 450, 480, 4, true));
        let mut c = fenced("c", 400, 600, 3, false);
        c[4] = op("c", "write", "invoke", 500, json!({"token": 3}));
        c[5] = op("c", "write", "fail", 510, json!({"token": 3}));
        h.extend(c);
        let f = fencing_of(&h);
        assert_eq!((f.violations, f.overstays, f.overlaps), (0, 1, 1), "{f:?}");
    }

    #[test]
    fn a_lower_token_granted_after_a_higher_one_ended_is_a_violation() {
        let mut h = fenced("a", 0, 100, 1, true);
        h.extend(fenced("b", 200, 300, 3, true));
        h.extend(fenced("c", 400, 500, 2, false));
        let f = fencing_of(&h);
        assert_eq!(f.violations, 1, "{f:?}");
        assert!(f.evidence[0].contains("token 2 granted to c/t0 after b/t0 was granted 3"));
    }

    #[test]
    fn a_stale_token_the_resource_accepted_is_a_violation() {
        // a (token 1) overstayed into b's section (token 2); the resource accepted a's
        // write after it had accepted b's.
        let mut h = fenced("b", 50, 120, 2, true);
        let mut a = fenced("a", 0, 300, 1, true);
        a[4] = op("a", "write", "invoke", 200, json!({"token": 1}));
        a[5] = op("a", "write", "ok", 210, json!({"token": 1}));
        h.extend(a);
        let f = fencing_of(&h);
        assert_eq!(f.violations, 1, "{f:?}");
        assert!(f.evidence[0].contains("accepted token 1 after it had accepted 2"));
    }

    #[test]
    fn the_report_names_each_checker_with_integer_cells() {
        let mut h = section("a", 0, 100, true, true);
        h.extend(section("b", 50, 200, true, true));
        let (report, violations) = report(&parse(&h));
        assert_eq!(violations, 1);
        for checker in ["exclusion", "loss_honesty"] {
            let cell = &report["checkers"][checker]["single-none-lock-lease"];
            for field in ["operations", "overlaps", "overstays", "violations"] {
                assert!(cell[field].is_u64(), "{checker}.{field}: {cell}");
            }
        }
        assert!(markdown(&report).contains("| single | none | lock-lease | 2 (0) |"));
    }
}
