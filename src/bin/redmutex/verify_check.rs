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
//! - `permits`: a semaphore never had more holders inside at once than its permits.
//! - `liveness`: outside faults, a lock that observations prove free is not left free
//!   for longer than a bound (half the lease) while a waiter waits.
//! - `fair_order`: a fair lock grants blocking waiters in their order of arrival, as its
//!   queue showed it.
//! - `latch`: no wait on a count-down latch returns before its count could reach zero.

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
    /// How the section holds its lock: alone, shared with readers, or one permit.
    pub(crate) access: Access,
}

/// What a section holds: its lock alone, a read or write hold of a read-write lock, or
/// one permit of a semaphore with this many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Exclusive,
    Read,
    Write,
    Permit(u64),
}

impl Access {
    fn of(op: &Op) -> Self {
        match op.raw.get("access").and_then(Value::as_str) {
            Some("read") => Self::Read,
            Some("write") => Self::Write,
            Some("permit") => Self::Permit(op.u64("permits").unwrap_or(1)),
            _ => Self::Exclusive,
        }
    }

    /// Two sections of one name may run at once without either being at fault: two
    /// readers, or two permits (the permits checker counts those).
    fn compatible(self, other: Self) -> bool {
        matches!(
            (self, other),
            (Self::Read, Self::Read) | (Self::Permit(_), Self::Permit(_))
        )
    }
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
    /// Checker-specific figures (integers), written beside the four above.
    pub(crate) extra: BTreeMap<&'static str, u64>,
}

impl Figures {
    fn json(&self) -> Value {
        let mut v = json!({
            "operations": self.operations,
            "overlaps": self.overlaps,
            "overstays": self.overstays,
            "violations": self.violations,
            "evidence": self.evidence.iter().take(20).collect::<Vec<_>>(),
        });
        if let Value::Object(m) = &mut v {
            for (k, n) in &self.extra {
                m.insert((*k).to_owned(), (*n).into());
            }
        }
        v
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
                        access: Access::of(op),
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
            if a.holder != b.holder && !a.access.compatible(b.access) {
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
        // Readers inside together: allowed, counted to show the workload shared.
        let shared = group
            .iter()
            .enumerate()
            .flat_map(|(i, a)| group[i + 1..].iter().map(move |b| (a, b)))
            .filter(|(a, b)| {
                a.access == Access::Read
                    && b.access == Access::Read
                    && a.holder != b.holder
                    && b.start_ns < a.end()
                    && a.start_ns < b.end()
            })
            .count() as u64;
        if shared > 0 {
            *f.extra.entry("shared_read_overlaps").or_default() += shared;
        }
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

/// The permits checker, per cell: at no instant were more sections of one semaphore
/// surely inside (between their entry snapshot's reply and their exit snapshot's send)
/// than it has permits. A section whose permit Redis no longer had (a lease that ran
/// out) counts as an overstay when it is what tips the count over.
pub(crate) fn permits(sections: &[Section]) -> BTreeMap<String, Figures> {
    let mut cells: BTreeMap<String, Figures> = BTreeMap::new();
    for ((cell, name), group) in by_lock(sections) {
        let group: Vec<&Section> = group
            .into_iter()
            .filter(|s| matches!(s.access, Access::Permit(_)))
            .collect();
        let Some(n) = group.iter().find_map(|s| match s.access {
            Access::Permit(n) => Some(n),
            _ => None,
        }) else {
            continue;
        };
        let f = cells.entry(cell).or_default();
        f.operations += group.len() as u64;
        let mut most = 0u64;
        // At each section's entry, the sections surely inside then (sorted by entry, so
        // only earlier ones can contain it).
        for (i, s) in group.iter().enumerate() {
            let inside: Vec<&Section> = group[..=i]
                .iter()
                .copied()
                .filter(|o| o.start_ns <= s.start_ns && o.end() > s.start_ns)
                .collect();
            let count = inside.len() as u64;
            most = most.max(count);
            if count > 1 {
                f.overlaps += 1;
            }
            if count > n {
                let holding = inside.iter().filter(|o| !o.lost()).count() as u64;
                if holding > n {
                    let who: Vec<String> = inside.iter().map(|o| describe(o)).collect();
                    f.violation(format!(
                        "{name}: {holding} holders of {n} permits at once: {}",
                        who.join("; ")
                    ));
                } else {
                    f.overstays += 1;
                }
            }
        }
        f.extra.insert("permits", n);
        f.extra.insert("most_inside", most);
    }
    cells
}

/// One acquire call of one thread: sent at `invoke_ns`, its outcome at `out_ns`.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub(crate) cell: String,
    pub(crate) name: String,
    pub(crate) holder: String,
    /// The client id of the thread (each worker thread has its own client).
    pub(crate) owner: String,
    /// Which API (`lock`, `try_lock_for`, ...).
    pub(crate) call: String,
    pub(crate) invoke_ns: u64,
    /// `None`: no outcome recorded (the history ends inside the call).
    pub(crate) out_ns: Option<u64>,
    /// `ok`, `fail` or `info`; empty without an outcome.
    pub(crate) outcome: String,
    /// The hold it got was gone before the section could use it: the guard said so at
    /// once (`section-skip`) or Redis did not have it at the entry snapshot.
    pub(crate) lost: bool,
    /// Redis had the hold at the section's entry snapshot (`None`: no snapshot answered).
    pub(crate) entered: Option<bool>,
    /// How the call holds its lock (read, write, a permit or alone).
    pub(crate) access: Access,
}

impl Call {
    fn out(&self) -> u64 {
        self.out_ns.unwrap_or(u64::MAX)
    }

    /// A call that waits without limit: a fair lock queues it with the thread wait time
    /// (minutes), so no grant to another ahead of it takes its place.
    fn blocking(&self) -> bool {
        matches!(self.call.as_str(), "lock" | "lock_with_lease")
    }

    /// A call that may wait at all (not a single attempt).
    fn waits(&self) -> bool {
        self.blocking() || matches!(self.call.as_str(), "try_lock_for" | "try_lock_with_lease")
    }
}

/// Every acquire call of a history, in each thread's program order.
pub(crate) fn calls(ops: &[Op]) -> Vec<Call> {
    let mut by_thread: BTreeMap<(String, String, u64), Vec<&Op>> = BTreeMap::new();
    for op in ops
        .iter()
        .filter(|o| o.op != "nemesis" && o.op != "observe")
    {
        by_thread
            .entry((op.cell.clone(), op.process.clone(), op.thread))
            .or_default()
            .push(op);
    }
    let mut out: Vec<Call> = Vec::new();
    for ((cell, process, thread), ops) in by_thread {
        let mut open: Option<usize> = None;
        for op in ops {
            match (op.op.as_str(), op.kind.as_str()) {
                ("acquire", "invoke") => {
                    out.push(Call {
                        cell: cell.clone(),
                        name: op.name.clone(),
                        holder: format!("{process}/t{thread}"),
                        owner: op
                            .raw
                            .get("owner")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned(),
                        call: op
                            .raw
                            .get("call")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned(),
                        invoke_ns: op.ns,
                        out_ns: None,
                        outcome: String::new(),
                        lost: false,
                        entered: None,
                        access: Access::of(op),
                    });
                    open = Some(out.len() - 1);
                }
                ("acquire", kind) => {
                    if let Some(c) = open.and_then(|i| out.get_mut(i)) {
                        c.out_ns = Some(op.ns);
                        c.outcome = kind.to_owned();
                    }
                }
                ("section-skip", _) => {
                    if let Some(c) = open.and_then(|i| out.get_mut(i)) {
                        c.lost = true;
                    }
                }
                ("section-start", "ok") => {
                    if let Some(c) = open.and_then(|i| out.get_mut(i)) {
                        let held = op.u64("held").unwrap_or(0) > 0;
                        c.lost |= !held;
                        c.entered = Some(held);
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// One observation of a lock by the observer thread: sent at `sent_ns`, answered at
/// `ns`; the state it shows held at one instant in between.
#[derive(Debug, Clone)]
struct Observation {
    sent_ns: u64,
    ns: u64,
    free: bool,
    /// The fair lock's queue, first in line first (owner fields).
    queue: Vec<String>,
}

fn observations(ops: &[Op]) -> BTreeMap<(String, String), Vec<Observation>> {
    let mut m: BTreeMap<(String, String), Vec<Observation>> = BTreeMap::new();
    for op in ops.iter().filter(|o| o.op == "observe" && o.kind == "ok") {
        let Some(free) = op.bool("free") else {
            continue;
        };
        let queue = op
            .raw
            .get("queue")
            .and_then(Value::as_array)
            .map(|q| {
                q.iter()
                    .filter_map(|f| f.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        m.entry((op.cell.clone(), op.name.clone()))
            .or_default()
            .push(Observation {
                sent_ns: op.u64("sent").unwrap_or(op.ns),
                ns: op.ns,
                free,
                queue,
            });
    }
    for v in m.values_mut() {
        v.sort_by_key(|o| o.sent_ns);
    }
    m
}

/// Each cell's fault intervals from its nemesis records, each stretched by `settle_ns`
/// after its end: a waiter whose wake-up a fault swallowed sleeps until the lease it
/// last saw runs out, which is no liveness failure of the library.
pub(crate) fn faults(ops: &[Op], settle_ns: u64) -> BTreeMap<String, Vec<(u64, u64)>> {
    let mut m: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
    let mut open: BTreeMap<(String, String), u64> = BTreeMap::new();
    for op in ops.iter().filter(|o| o.op == "nemesis") {
        let fault = op
            .raw
            .get("fault")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let key = (op.cell.clone(), fault);
        match op.kind.as_str() {
            "invoke" => {
                open.insert(key, op.ns);
            }
            _ => {
                let start = open.remove(&key).unwrap_or(0);
                m.entry(op.cell.clone())
                    .or_default()
                    .push((start, op.ns.saturating_add(settle_ns)));
            }
        }
    }
    // A fault never recorded as over lasts to the end of the history.
    for ((cell, _), start) in open {
        m.entry(cell).or_default().push((start, u64::MAX));
    }
    m
}

fn faulted(faults: Option<&Vec<(u64, u64)>>, from: u64, to: u64) -> bool {
    faults.is_some_and(|fs| fs.iter().any(|(a, b)| *a <= to && from <= *b))
}

/// The lease (or watchdog timeout) of a cell's lock, from its history lines.
pub(crate) fn lease_ns(ops: &[Op], cell: &str) -> u64 {
    ops.iter()
        .find(|o| o.cell == cell && o.op == "acquire")
        .and_then(|o| o.u64("lease_ms"))
        .unwrap_or(600)
        * 1_000_000
}

/// The stretches during which observations prove a lock free: consecutive observations
/// that both saw it free, closer together than the lease, with no acquire answered `ok`
/// between the first one's send and the second one's reply. A grant in between would
/// either still hold at the second observation, or have been released, and a release
/// comes after its acquire's reply; a grant that nobody released (an acquire whose reply
/// was lost) lives a whole lease, longer than the gap. So the lock was free from the
/// first observation's reply to the last one's send.
///
/// The proof needs only gaps under the lease; the stretch is cut at any gap over an
/// eighth of it as well, so that a host that stopped running everyone (the observer
/// included) for a while is not read as waiters left asleep.
fn free_stretches(obs: &[Observation], grants: &[u64], lease_ns: u64) -> Vec<(u64, u64)> {
    let max_gap = lease_ns / 8;
    let granted_in = |a: u64, b: u64| {
        let i = grants.partition_point(|g| *g < a);
        grants.get(i).is_some_and(|g| *g <= b)
    };
    let mut out = Vec::new();
    let mut start: Option<(u64, u64)> = None;
    for pair in obs.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let joined = a.free
            && b.free
            && b.ns.saturating_sub(a.sent_ns) < max_gap
            && !granted_in(a.sent_ns, b.ns);
        if joined {
            let s = start.get_or_insert((a.ns, b.sent_ns));
            s.1 = b.sent_ns;
        } else if let Some(s) = start.take() {
            out.push(s);
        }
    }
    out.extend(start);
    out.retain(|(a, b)| b > a);
    out
}

/// The liveness checker, per cell: under no fault, a free lock goes to a waiter within
/// the bound (half the lease). A correct hand-off takes one unlock message and one
/// acquire round trip (milliseconds); a waiter that misses the message sleeps until the
/// lease it last saw runs out, up to a whole lease later. Half the lease sits between the
/// two, with hundreds of milliseconds of slack for a loaded host's scheduling. Every
/// waiting call whose wait covered more than the bound of one provably free stretch, with
/// no fault from its start to the stretch's end, is a violation: it was not woken, or
/// it gave up while the lock was free.
pub(crate) fn liveness(ops: &[Op]) -> BTreeMap<String, Figures> {
    let mut cells: BTreeMap<String, Figures> = BTreeMap::new();
    let calls = calls(ops);
    let obs = observations(ops);
    let mut lease_of: BTreeMap<String, u64> = BTreeMap::new();
    for (cell, _) in obs.keys() {
        lease_of
            .entry(cell.clone())
            .or_insert_with(|| lease_ns(ops, cell));
    }
    let settle = lease_of.values().copied().max().unwrap_or(0);
    let faults = faults(ops, settle);
    for ((cell, name), obs) in &obs {
        let lease = lease_of[cell];
        let bound = lease / 2;
        let mine: Vec<&Call> = calls
            .iter()
            .filter(|c| &c.cell == cell && &c.name == name)
            .collect();
        let mut grants: Vec<u64> = mine
            .iter()
            .filter(|c| c.outcome == "ok")
            .filter_map(|c| c.out_ns)
            .collect();
        grants.sort_unstable();
        // A fair lock that is free belongs to the head of its queue, and the waiters
        // behind it rightly wait for it. So the stretch is judged only while that head is
        // a live call that no fault touched; a head a fault delayed (or one whose call is
        // over: a dead waiter, whose slot must run out) passes its delay on to everyone
        // behind it, which is the fault's doing, not a lost wake-up.
        let judged: Vec<Observation> = obs
            .iter()
            .map(|o| {
                let head_live = o.queue.first().is_none_or(|head| {
                    mine.iter().any(|c| {
                        !c.owner.is_empty()
                            && head.starts_with(&format!("{}:", c.owner))
                            && c.invoke_ns <= o.sent_ns
                            && c.out() >= o.ns
                            && !faulted(faults.get(cell), c.invoke_ns, o.ns)
                    })
                });
                Observation {
                    free: o.free && head_live,
                    ..o.clone()
                }
            })
            .collect();
        let stretches = free_stretches(&judged, &grants, lease);
        let f = cells.entry(cell.clone()).or_default();
        let waiting: Vec<&&Call> = mine.iter().filter(|c| c.waits()).collect();
        f.operations += waiting.len() as u64;
        f.overlaps += stretches.len() as u64;
        let mut longest = 0;
        for (a, b) in &stretches {
            for c in &waiting {
                let (from, to) = (c.invoke_ns.max(*a), c.out().min(*b));
                if to <= from {
                    continue;
                }
                let free = to - from;
                if faulted(faults.get(cell), c.invoke_ns, to) {
                    if free > bound {
                        f.overstays += 1;
                    }
                    continue;
                }
                longest = longest.max(free);
                if free > bound {
                    f.violation(format!(
                        "{name}: {} ({}, {}) waited while the lock was free for {} ms \
                         [{from}..{to}], over the bound of {} ms",
                        c.holder,
                        c.call,
                        if c.outcome.is_empty() {
                            "open"
                        } else {
                            &c.outcome
                        },
                        free / 1_000_000,
                        bound / 1_000_000
                    ));
                }
            }
        }
        f.extra.insert("bound_ms", bound / 1_000_000);
        f.extra.insert("longest_free_wait_ms", longest / 1_000_000);
    }
    for (cell, t) in takeover(ops, &calls) {
        let f = cells.entry(cell).or_default();
        f.violations += t.violations;
        f.overstays += t.overstays;
        f.evidence.extend(t.evidence);
        f.extra.extend(t.extra);
    }
    cells
}

/// How early before a dead holder's lease end a grant may come and still be on time:
/// Redis dates expiry by its own millisecond clock (rounded down), the workers by
/// `CLOCK_MONOTONIC`; two milliseconds cover the rounding and the clocks' drift over a
/// lease.
const TAKEOVER_EPSILON_NS: u64 = 2_000_000;

/// What a SIGKILLed process held when it died: per thread, its last acquire if that was
/// answered `ok` and no release was sent after it. The worker flushes its history after
/// every acquire and release line, before it sends the next call, so what is on disk
/// tells: a line lost with the process belongs to a call that was never sent, or to an
/// acquire whose outcome then reads as unknown (`held: None`).
fn killed_holds<'a>(ops: &'a [Op], cell: &str, victim: &str) -> Vec<(&'a Op, Option<&'a Op>)> {
    let mut by_thread: BTreeMap<u64, Vec<&Op>> = BTreeMap::new();
    for op in ops
        .iter()
        .filter(|o| o.cell == cell && o.process == victim)
        .filter(|o| matches!(o.op.as_str(), "acquire" | "release" | "section-skip"))
    {
        by_thread.entry(op.thread).or_default().push(op);
    }
    let mut out = Vec::new();
    for ops in by_thread.values() {
        let Some(i) = ops
            .iter()
            .rposition(|o| o.op == "acquire" && o.kind == "invoke")
        else {
            continue;
        };
        let after = &ops[i + 1..];
        if after.iter().any(|o| o.op != "acquire") {
            continue;
        }
        match after.first().map(|o| o.kind.as_str()) {
            Some("ok") => out.push((ops[i], after.first().copied())),
            Some("fail") => {}
            _ => out.push((ops[i], None)),
        }
    }
    out
}

/// Liveness after a SIGKILL (merged into `liveness`): a killed holder's lock goes to the
/// next holder no earlier than its lease end, which is at least one lease after its
/// acquire was sent (Redis starts the TTL when the grant runs, after the send; the
/// watchdog only extends it). A grant answered before that, minus
/// [`TAKEOVER_EPSILON_NS`], is a violation: it ran while the dead hold was still in
/// Redis. Only grants whose entry snapshot found their own hold are judged: such a hold
/// held from its grant to that snapshot, so whether it was granted before or after the
/// dead one, the two held at once. How long after the lease end the next grant came is
/// reported (`takeover_after_lease_ms_*`), not judged: a waiter may be asleep until the
/// TTL it saw runs out, and watchdog holds were renewed until the kill. A kill that met
/// an acquire with no recorded outcome is counted as an overstay, not judged.
pub(crate) fn takeover(ops: &[Op], calls: &[Call]) -> BTreeMap<String, Figures> {
    let mut cells: BTreeMap<String, Figures> = BTreeMap::new();
    let mut delays: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for kill in ops
        .iter()
        .filter(|o| o.op == "nemesis" && o.kind == "invoke")
        .filter(|o| o.raw.get("fault").and_then(Value::as_str) == Some("kill_worker"))
    {
        let Some(victim) = kill.raw.get("victim").and_then(Value::as_str) else {
            continue;
        };
        let f = cells.entry(kill.cell.clone()).or_default();
        *f.extra.entry("workers_killed").or_default() += 1;
        let lease = lease_ns(ops, &kill.cell);
        for (acquire, ok) in killed_holds(ops, &kill.cell, victim) {
            let Some(ok) = ok else {
                f.overstays += 1;
                *f.extra.entry("killed_in_acquire").or_default() += 1;
                continue;
            };
            let access = Access::of(acquire);
            if matches!(access, Access::Permit(_)) {
                continue;
            }
            *f.extra.entry("killed_holders").or_default() += 1;
            let holder = format!("{victim}/t{}", acquire.thread);
            let lease_end = acquire.ns + lease;
            let next = calls
                .iter()
                .filter(|c| c.cell == kill.cell && c.name == acquire.name && c.holder != holder)
                .filter(|c| c.outcome == "ok" && c.entered == Some(true))
                .filter(|c| !(access == Access::Read && c.access == Access::Read))
                .filter(|c| c.out() > ok.ns)
                .min_by_key(|c| c.out());
            let Some(next) = next else {
                continue;
            };
            if next.out() + TAKEOVER_EPSILON_NS < lease_end {
                f.violation(format!(
                    "{}: {} was granted at {}, {} ms before the lease of {holder} (killed \
                     at {}, its acquire sent at {}) could end",
                    acquire.name,
                    next.holder,
                    next.out(),
                    (lease_end - next.out()) / 1_000_000,
                    kill.ns,
                    acquire.ns,
                ));
            } else {
                delays
                    .entry(kill.cell.clone())
                    .or_default()
                    .push(next.out().saturating_sub(lease_end));
            }
        }
    }
    for (cell, mut d) in delays {
        d.sort_unstable();
        let f = cells.entry(cell).or_default();
        let at = |q: usize| d[(d.len() - 1) * q / 100] / 1_000_000;
        f.extra.insert("takeover_after_lease_ms_p50", at(50));
        f.extra.insert("takeover_after_lease_ms_max", at(100));
    }
    cells
}

/// The fair-order checker, per cell: when an observation showed waiter A ahead of
/// waiter B in a fair lock's queue, or showed A queued before B's call was sent (B
/// arrived later, whether it queued or not), and both calls were granted, B's grant must
/// not come first. B's reply before A's proves it did: had A been granted first, B's grant would
/// wait for A's release, which A sends after its reply. Excused (counted as overstays):
/// A's call was a timed wait (its queue slot is its wait time, which a grant ahead of it
/// shortens, so Redis may drop it from the queue while it still waits), A's hold was gone
/// before its section (a lease that ran out lets the next waiter in), and any fault from
/// the earlier call's start to A's grant.
pub(crate) fn fair_order(ops: &[Op]) -> BTreeMap<String, Figures> {
    let mut cells: BTreeMap<String, Figures> = BTreeMap::new();
    let calls = calls(ops);
    let settle = ops.iter().find_map(|o| o.u64("lease_ms")).unwrap_or(600) * 1_000_000;
    let faults = faults(ops, settle);
    let fair: BTreeMap<(String, String), ()> = ops
        .iter()
        .filter(|o| o.op == "acquire" && o.raw.get("kind").and_then(Value::as_str) == Some("fair"))
        .map(|o| ((o.cell.clone(), o.name.clone()), ()))
        .collect();
    for ((cell, name), obs) in observations(ops) {
        if !fair.contains_key(&(cell.clone(), name.clone())) {
            continue;
        }
        let mine: Vec<&Call> = calls
            .iter()
            .filter(|c| c.cell == cell && c.name == name)
            .collect();
        // The call (its index in `mine`) of the thread whose owner field is `field`, in
        // flight across `o`.
        let in_flight = |field: &str, o: &Observation| {
            mine.iter().position(|c| {
                !c.owner.is_empty()
                    && field.starts_with(&format!("{}:", c.owner))
                    && c.invoke_ns <= o.sent_ns
                    && c.out() >= o.ns
            })
        };
        // The pairs (a, b) where a must be granted first, with the observation that
        // proves it: a ahead of b in the queue, or b sent after a was seen queued.
        let mut pairs: BTreeMap<(usize, usize), (u64, &str)> = BTreeMap::new();
        let mut first_seen: BTreeMap<usize, u64> = BTreeMap::new();
        for o in &obs {
            let queued: Vec<usize> = o.queue.iter().filter_map(|q| in_flight(q, o)).collect();
            for (i, a) in queued.iter().enumerate() {
                first_seen.entry(*a).or_insert(o.ns);
                for b in &queued[i + 1..] {
                    pairs
                        .entry((*a, *b))
                        .or_insert((o.sent_ns, "ahead of it in the queue"));
                }
            }
        }
        for (a, seen) in &first_seen {
            for (b, call) in mine.iter().enumerate() {
                // Only arrivals while a still waited can overtake it.
                if call.invoke_ns > *seen && call.invoke_ns < mine[*a].out() {
                    pairs
                        .entry((*a, b))
                        .or_insert((*seen, "queued before it was sent"));
                }
            }
        }
        let f = cells.entry(cell.clone()).or_default();
        for ((a, b), (at, why)) in pairs {
            let (a, b) = (mine[a], mine[b]);
            if a.outcome != "ok" || b.outcome != "ok" || a.holder == b.holder {
                continue;
            }
            f.operations += 1;
            if b.out() >= a.out() {
                continue;
            }
            f.overlaps += 1;
            let from = a.invoke_ns.min(b.invoke_ns);
            if !a.blocking() || a.lost || faulted(faults.get(&cell), from, a.out()) {
                f.overstays += 1;
                continue;
            }
            f.violation(format!(
                "{name}: {} ({}) was granted at {} before {} ({}, granted at {}), which was \
                 {why} at {at}",
                b.holder,
                b.call,
                b.out(),
                a.holder,
                a.call,
                a.out(),
            ));
        }
    }
    cells
}

/// The latch checker, per cell: no wait on a count-down latch returned open before the
/// count could have reached zero, and none timed out on a latch already open. A latch of
/// count `n` opens when its `n`-th count-down runs, which is after that count-down was
/// sent: a wait answered `ok` before the `n`-th earliest count-down send passed too
/// early. A wait that began after every count-down had been answered found the latch
/// deleted (open) and must not time out. Count-downs with an unknown outcome make the
/// latch's count unknown: its waits are counted as overstays, not judged.
pub(crate) fn latch(ops: &[Op]) -> BTreeMap<String, Figures> {
    #[derive(Default)]
    struct One {
        count: Option<u64>,
        /// Successful sets: more than one means the latch was created again after it
        /// opened (a process that came late), and its count-downs mix two lives.
        sets: u64,
        downs: Vec<(u64, Option<u64>, bool)>,
        waits: Vec<(u64, Option<u64>, String)>,
    }
    let mut latches: BTreeMap<(String, String), One> = BTreeMap::new();
    // Each thread's invoke is matched with its next outcome of the same operation.
    let mut pending: BTreeMap<(String, String, u64, String), u64> = BTreeMap::new();
    for op in ops {
        if !matches!(op.op.as_str(), "latch-set" | "count-down" | "latch-wait") {
            continue;
        }
        let key = (
            op.cell.clone(),
            op.process.clone(),
            op.thread,
            op.op.clone(),
        );
        let one = latches
            .entry((op.cell.clone(), op.name.clone()))
            .or_default();
        if op.kind == "invoke" {
            pending.insert(key, op.ns);
            continue;
        }
        let sent = pending.remove(&key).unwrap_or(op.ns);
        match op.op.as_str() {
            "latch-set" if op.kind == "ok" => {
                one.count = op.u64("count");
                one.sets += 1;
            }
            "count-down" => one.downs.push((sent, Some(op.ns), op.kind == "ok")),
            "latch-wait" => one.waits.push((sent, Some(op.ns), op.kind.clone())),
            _ => {}
        }
    }
    let mut cells: BTreeMap<String, Figures> = BTreeMap::new();
    for ((cell, name), one) in latches {
        let f = cells.entry(cell).or_default();
        let Some(count) = one.count else {
            continue;
        };
        f.operations += one.waits.len() as u64;
        if one.sets > 1 || one.downs.iter().any(|d| !d.2) {
            f.overstays += one.waits.len() as u64;
            continue;
        }
        let mut sent: Vec<u64> = one.downs.iter().map(|d| d.0).collect();
        sent.sort_unstable();
        let opens_after = usize::try_from(count)
            .ok()
            .and_then(|c| c.checked_sub(1))
            .and_then(|i| sent.get(i))
            .copied();
        let all_answered = (one.downs.len() as u64 >= count)
            .then(|| one.downs.iter().filter_map(|d| d.1).max())
            .flatten();
        for (invoke, out, kind) in &one.waits {
            let out = out.unwrap_or(u64::MAX);
            match kind.as_str() {
                "ok" if opens_after.is_none_or(|t| out < t) => f.violation(format!(
                    "{name}: a wait returned open at {out}, before the count of {count} \
                     could reach zero ({} count-downs, the last sent at {opens_after:?})",
                    sent.len()
                )),
                "fail" if all_answered.is_some_and(|t| t < *invoke) => f.violation(format!(
                    "{name}: a wait that began at {invoke} timed out, though all {count} \
                     count-downs were answered by then"
                )),
                "ok" => f.overlaps += 1,
                _ => {}
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
    for op in ops
        .iter()
        .filter(|o| o.op != "nemesis" && o.op != "observe")
    {
        cells.entry(op.cell.clone()).or_default().operations += 1;
    }
    cells
}

/// Hand-off latencies per cell: for each release answered `ok`, the time from its send
/// to the reply of the next grant of its lock (the first reply after that send: the
/// release ran before any grant answered later, and a grant answered between its send
/// and its reply may already be the hand-off), if that grant's call was already waiting
/// when the release's reply came (a waiter the release should wake, not the releaser
/// coming back). Shared grants (readers, permits) are left out: they need no hand-off.
/// Nanoseconds, unsorted.
pub(crate) fn handoffs(ops: &[Op]) -> BTreeMap<String, Vec<u64>> {
    let calls = calls(ops);
    let mut grants: BTreeMap<(&str, &str), Vec<&Call>> = BTreeMap::new();
    for c in calls.iter().filter(|c| c.outcome == "ok") {
        grants
            .entry((c.cell.as_str(), c.name.as_str()))
            .or_default()
            .push(c);
    }
    for g in grants.values_mut() {
        g.sort_by_key(|c| c.out());
    }
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut sent: BTreeMap<(&str, &str, u64), u64> = BTreeMap::new();
    for r in ops.iter().filter(|o| o.op == "release") {
        let thread = (r.cell.as_str(), r.process.as_str(), r.thread);
        if r.kind == "invoke" {
            sent.insert(thread, r.ns);
            continue;
        }
        let Some(from) = sent.remove(&thread).filter(|_| r.kind == "ok") else {
            continue;
        };
        let Some(g) = grants.get(&(r.cell.as_str(), r.name.as_str())) else {
            continue;
        };
        let i = g.partition_point(|c| c.out() <= from);
        let Some(next) = g.get(i) else {
            continue;
        };
        if next.invoke_ns < r.ns && matches!(next.access, Access::Exclusive | Access::Write) {
            out.entry(r.cell.clone())
                .or_default()
                .push(next.out() - from);
        }
    }
    out
}

/// The histogram buckets of [`handoff_svg`]: under 1 ms, then doubling up to 2 s and over.
const BUCKETS: usize = 13;

fn bucket(ns: u64) -> usize {
    let ms = ns / 1_000_000;
    if ms == 0 {
        0
    } else {
        (ms.ilog2() as usize + 1).min(BUCKETS - 1)
    }
}

fn bucket_label(i: usize) -> String {
    match i {
        0 => "<1".to_owned(),
        i if i == BUCKETS - 1 => format!("≥{}", 1u64 << (i - 1)),
        i => format!("{}", 1u64 << (i - 1)),
    }
}

/// The hand-off latencies as an SVG image: one histogram per cell (log-2 buckets in
/// milliseconds, bar heights scaled to the cell's largest bucket, each bar's count above
/// it), hand-written so the checker needs no plotting crate. `None` without samples.
pub(crate) fn handoff_svg(samples: &BTreeMap<String, Vec<u64>>) -> Option<String> {
    let cells: Vec<(&String, &Vec<u64>)> = samples.iter().filter(|(_, v)| !v.is_empty()).collect();
    if cells.is_empty() {
        return None;
    }
    let (left, bar, gap, row, plot) = (230u64, 28u64, 4u64, 110u64, 70u64);
    let width = left + (bar + gap) * BUCKETS as u64 + 20;
    let height = 40 + row * cells.len() as u64 + 20;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"10\" y=\"20\" font-size=\"14\">Hand-off: release sent to the next \
         waiter's grant (ms, log-2 buckets)</text>\n"
    );
    for (k, (cell, v)) in cells.iter().enumerate() {
        let mut counts = [0u64; BUCKETS];
        for ns in *v {
            counts[bucket(*ns)] += 1;
        }
        let most = counts.iter().copied().max().unwrap_or(1).max(1);
        let mut sorted = (*v).clone();
        sorted.sort_unstable();
        let at = |q: usize| sorted[(sorted.len() - 1) * q / 100] as f64 / 1e6;
        let top = 40 + row * k as u64;
        let base = top + plot;
        svg.push_str(&format!(
            "<text x=\"10\" y=\"{}\">{}</text>\n<text x=\"10\" y=\"{}\" fill=\"#555\">\
             n={} p50={:.1} p99={:.1} max={:.1}</text>\n",
            top + 30,
            xml_escape(cell),
            top + 46,
            v.len(),
            at(50),
            at(99),
            at(100)
        ));
        svg.push_str(&format!(
            "<line x1=\"{left}\" y1=\"{base}\" x2=\"{}\" y2=\"{base}\" stroke=\"#999\"/>\n",
            width - 20
        ));
        for (i, n) in counts.iter().enumerate() {
            let x = left + (bar + gap) * i as u64;
            let h = plot * n / most;
            if *n > 0 {
                svg.push_str(&format!(
                    "<rect x=\"{x}\" y=\"{}\" width=\"{bar}\" height=\"{h}\" \
                     fill=\"#4a7ab5\"/>\n<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" \
                     font-size=\"9\">{n}</text>\n",
                    base - h,
                    x + bar / 2,
                    base - h - 2
                ));
            }
            svg.push_str(&format!(
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"9\" \
                 fill=\"#555\">{}</text>\n",
                x + bar / 2,
                base + 12,
                xml_escape(&bucket_label(i))
            ));
        }
    }
    svg.push_str("</svg>\n");
    Some(svg)
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
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
        ("permits", permits(&sections)),
        ("liveness", liveness(ops)),
        ("fair_order", fair_order(ops)),
        ("latch", latch(ops)),
        ("progress", crate::verify_progress::progress(ops)),
    ];
    let violations: u64 = checkers
        .iter()
        .flat_map(|(_, cells)| cells.values())
        .map(|f| f.violations)
        .sum();
    let handoffs = handoffs(ops);
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
        let mut c = json!({"sections": mine.count(), "java_sections": java,
                           "losses_reported": reported, "faults": faults,
                           "unknown_outcomes": infos});
        if let Some(h) = handoffs.get(cell).filter(|h| !h.is_empty()) {
            let mut h = h.clone();
            h.sort_unstable();
            let at = |q: usize| h[(h.len() - 1) * q / 100] / 1000;
            c["handoffs"] = h.len().into();
            c["handoff_us_p50"] = at(50).into();
            c["handoff_us_p99"] = at(99).into();
            c["handoff_us_max"] = at(100).into();
        }
        cells.insert(cell.clone(), c);
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
    });
    (report, violations)
}

/// The report as a Markdown table, one row per cell.
pub(crate) fn markdown(report: &Value) -> String {
    let mut md = String::from(
        "| topology | nemesis | workload | sections (not Rust) | exclusion ops / overlaps / overstays / violations | loss honesty violations | fencing violations | permits violations | latch violations | liveness violations (longest free wait / bound, ms) | progress violations (longest gap, ms) | fair order pairs / violations | losses reported | faults |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
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
            let judged = |checker: &str| report["checkers"][checker].get(cell).is_some();
            let violations = |checker: &str| {
                if judged(checker) {
                    get(checker, cell, "violations").to_string()
                } else {
                    "n/a".to_owned()
                }
            };
            let fencing = violations("fencing");
            let permits = violations("permits");
            let latch = violations("latch");
            let liveness = if judged("liveness") {
                format!(
                    "{} ({} / {})",
                    get("liveness", cell, "violations"),
                    get("liveness", cell, "longest_free_wait_ms"),
                    get("liveness", cell, "bound_ms")
                )
            } else {
                "n/a".to_owned()
            };
            let progress = if judged("progress") {
                format!(
                    "{} ({})",
                    get("progress", cell, "violations"),
                    get("progress", cell, "longest_gap_ms")
                )
            } else {
                "n/a".to_owned()
            };
            let fair = if judged("fair_order") {
                format!(
                    "{} / {}",
                    get("fair_order", cell, "operations"),
                    get("fair_order", cell, "violations")
                )
            } else {
                "n/a".to_owned()
            };
            md.push_str(&format!(
                "| {t} | {n} | {w} | {} ({}) | {} / {} / {} / {} | {} | {fencing} | {permits} | {latch} | {liveness} | {progress} | {fair} | {} | {} |\n",
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
    md.push_str(&format!("\nTotal violations: {}.\n", report["violations"]));
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
    let mut md = markdown(&report);
    // The hand-off distribution reads better drawn than as percentiles; the image goes
    // beside report.md, which links it.
    let svg_path = dir.join("handoff.svg");
    match handoff_svg(&handoffs(&ops)) {
        Some(svg) => {
            std::fs::write(&svg_path, svg).map_err(|e| e.to_string())?;
            md.push_str(
                "\nHand-off latency per cell (release sent to the next waiter's grant): \
                 [handoff.svg](handoff.svg)\n\n![hand-off latency per cell](handoff.svg)\n",
            );
        }
        None => {
            let _ = std::fs::remove_file(&svg_path);
        }
    }
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

    /// `section` with its acquire and section lines marked with `access` (and permits).
    fn with(lines: Vec<String>, extra: &Value) -> Vec<String> {
        lines
            .into_iter()
            .map(|l| {
                let mut v: Value = serde_json::from_str(&l).unwrap();
                if let (Value::Object(v), Value::Object(e)) = (&mut v, extra) {
                    v.extend(e.clone());
                }
                v.to_string()
            })
            .collect()
    }

    #[test]
    fn readers_may_overlap_but_not_a_writer() {
        let read = json!({"access": "read"});
        let write = json!({"access": "write"});
        let mut h = with(section("a", 0, 100, true, true), &read);
        h.extend(with(section("b", 50, 200, true, true), &read));
        let (ex, _) = figures(&h);
        assert_eq!((ex.overlaps, ex.violations), (0, 0), "{ex:?}");
        assert_eq!(ex.extra["shared_read_overlaps"], 1);
        // A writer inside while a reader still held: two holds at once.
        h.extend(with(section("c", 150, 250, true, true), &write));
        let (ex, _) = figures(&h);
        assert_eq!((ex.overlaps, ex.violations), (1, 1), "{ex:?}");
    }

    fn permits_of(lines: &[String]) -> Figures {
        let ops = parse(lines);
        permits(&sections(&ops))
            .remove("single-none-lock-lease")
            .unwrap_or_default()
    }

    #[test]
    fn a_semaphore_with_more_holders_inside_than_permits_is_a_violation() {
        let permit = json!({"access": "permit", "permits": 2});
        let mut h = with(section("a", 0, 100, true, true), &permit);
        h.extend(with(section("b", 50, 200, true, true), &permit));
        h.extend(with(section("c", 150, 300, true, true), &permit));
        let f = permits_of(&h);
        assert_eq!((f.operations, f.overlaps, f.violations), (3, 2, 0), "{f:?}");
        assert_eq!(f.extra["most_inside"], 2);
        // The exclusion checker leaves permits to this one.
        assert_eq!(figures(&h).0.overlaps, 0);
        h.extend(with(section("d", 160, 170, true, true), &permit));
        let f = permits_of(&h);
        assert_eq!((f.violations, f.extra["most_inside"]), (1, 3), "{f:?}");
        assert!(f.evidence[0].contains("3 holders of 2 permits"), "{f:?}");
    }

    /// An observation of the lock, sent at `sent` and answered 1 ns later.
    fn observe(sent: u64, free: bool, queue: &[&str]) -> String {
        op(
            "obs",
            "observe",
            "ok",
            sent + 1,
            json!({"sent": sent, "free": free, "queue": queue, "thread": 9}),
        )
    }

    /// Observations every 10 ms from `from` to `to`.
    fn observations_of(from: u64, to: u64, free: bool, queue: &[&str]) -> Vec<String> {
        (from..to)
            .step_by(10_000_000)
            .map(|t| observe(t, free, queue))
            .collect()
    }

    /// One acquire call of `process` from `t0` to `t1` with `outcome`.
    fn call(process: &str, call: &str, t0: u64, t1: u64, outcome: &str) -> Vec<String> {
        vec![
            op(process, "acquire", "invoke", t0, json!({"call": call})),
            op(process, "acquire", outcome, t1, json!({"call": call})),
        ]
    }

    fn liveness_of(lines: &[String]) -> Figures {
        liveness(&parse(lines))
            .remove("single-none-lock-lease")
            .unwrap_or_default()
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn a_waiter_left_asleep_on_a_free_lock_is_a_liveness_violation() {
        // The lease is 100 ms, so the bound is 50 ms. w waits from 0 to 400 ms; the
        // lock is held until 100 ms, then seen free until 300 ms, then w gets it.
        let mut h = call("w", "lock", 0, 300 * MS + 5, "ok");
        h.extend(observations_of(0, 100 * MS, false, &[]));
        h.extend(observations_of(100 * MS, 300 * MS, true, &[]));
        let f = liveness_of(&h);
        assert_eq!((f.operations, f.violations), (1, 1), "{f:?}");
        assert_eq!(f.extra["bound_ms"], 50);
        assert!(f.extra["longest_free_wait_ms"] >= 180, "{f:?}");
    }

    #[test]
    fn a_waiter_woken_at_once_and_a_short_free_stretch_pass() {
        // Free for 30 ms (under the 50 ms bound), then w's grant.
        let mut h = call("w", "try_lock_for", 0, 130 * MS + 5, "ok");
        h.extend(observations_of(0, 100 * MS, false, &[]));
        h.extend(observations_of(100 * MS, 130 * MS, true, &[]));
        h.extend(observations_of(131 * MS, 200 * MS, false, &[]));
        let f = liveness_of(&h);
        assert_eq!((f.operations, f.violations), (1, 0), "{f:?}");
    }

    #[test]
    fn a_grant_between_free_observations_breaks_the_stretch() {
        // Seen free throughout, but others took and released the lock every 20 ms in
        // between: nothing proves it free for long, so w's wait is no violation.
        let mut h = call("w", "lock", 0, 400 * MS, "ok");
        h.extend(observations_of(0, 400 * MS, true, &[]));
        for k in 0..19 {
            let t = k * 20 * MS + 15 * MS;
            h.extend(call(&format!("x{k}"), "try_lock_for", t, t + 1, "ok"));
        }
        let f = liveness_of(&h);
        assert_eq!(f.violations, 0, "{f:?}");
    }

    #[test]
    fn a_waiter_that_gave_up_on_a_free_lock_is_flagged_unless_a_fault_explains_it() {
        let mut h = call("w", "try_lock_for", 0, 300 * MS, "fail");
        h.extend(observations_of(0, 310 * MS, true, &[]));
        assert_eq!(liveness_of(&h).violations, 1);
        // The same under a fault: a swallowed wake-up, counted but not a violation.
        h.push(op(
            "nemesis",
            "nemesis",
            "invoke",
            10 * MS,
            json!({"fault": "blackhole"}),
        ));
        h.push(op(
            "nemesis",
            "nemesis",
            "ok",
            20 * MS,
            json!({"fault": "blackhole"}),
        ));
        let f = liveness_of(&h);
        assert_eq!((f.violations, f.overstays), (0, 1), "{f:?}");
    }

    #[test]
    fn a_fair_lock_held_up_by_a_head_that_a_fault_delayed_is_no_liveness_violation() {
        // h, at the head of the queue, was caught by a fault at its start and takes its
        // turn late; w behind it waits while the lock is free. Not w's lost wake-up.
        let mut h = call("h", "try_lock_for", 0, 500 * MS, "fail");
        h.push(op(
            "nemesis",
            "nemesis",
            "invoke",
            0,
            json!({"fault": "sigstop"}),
        ));
        h.push(op(
            "nemesis",
            "nemesis",
            "ok",
            10 * MS,
            json!({"fault": "sigstop"}),
        ));
        h.extend(call("w", "lock", 200 * MS, 600 * MS, "ok"));
        h.extend(observations_of(200 * MS, 500 * MS, true, &["h:1", "w:1"]));
        assert_eq!(liveness_of(&h).violations, 0);
        // The same queue with a head that no fault touched: w's long wait is flagged.
        let mut h = call("h", "try_lock_for", 150 * MS, 500 * MS, "fail");
        h.extend(call("w", "lock", 200 * MS, 600 * MS, "ok"));
        h.extend(observations_of(200 * MS, 500 * MS, true, &["h:1", "w:1"]));
        assert!(liveness_of(&h).violations > 0);
    }

    fn fair_of(lines: &[String]) -> Figures {
        let lines = with(lines.to_vec(), &json!({"kind": "fair"}));
        fair_order(&parse(&lines))
            .remove("single-none-lock-lease")
            .unwrap_or_default()
    }

    #[test]
    fn a_fair_lock_that_grants_out_of_queue_order_is_flagged() {
        // a and b both wait with lock(); the queue showed a ahead of b; b got it first.
        let mut h = call("a", "lock", 0, 300 * MS, "ok");
        h.extend(call("b", "lock", 5 * MS, 200 * MS, "ok"));
        h.push(observe(50 * MS, false, &["a:1", "b:1"]));
        let f = fair_of(&h);
        assert_eq!((f.operations, f.violations), (1, 1), "{f:?}");
        assert!(f.evidence[0].contains("b/t0 (lock) was granted"), "{f:?}");
    }

    #[test]
    fn a_later_arrival_granted_before_a_queued_waiter_is_flagged() {
        // a was seen queued at 50 ms; b was sent at 60 ms, never seen queued (it took a
        // free lock at once, or jumped the queue), and was granted first.
        let mut h = call("a", "lock", 0, 300 * MS, "ok");
        h.push(observe(50 * MS, false, &["a:1"]));
        h.extend(call("b", "lock", 60 * MS, 100 * MS, "ok"));
        let f = fair_of(&h);
        assert_eq!(f.violations, 1, "{f:?}");
        assert!(f.evidence[0].contains("queued before it was sent"), "{f:?}");
        // b sent before a was seen queued: nothing proves a arrived first.
        let mut h = call("a", "lock", 0, 300 * MS, "ok");
        h.push(observe(50 * MS, false, &["a:1"]));
        h.extend(call("b", "lock", 40 * MS, 100 * MS, "ok"));
        assert_eq!(fair_of(&h).violations, 0);
    }

    #[test]
    fn fair_grants_in_queue_order_and_the_documented_exceptions_pass() {
        let mut h = call("a", "lock", 0, 200 * MS, "ok");
        h.extend(call("b", "lock", 5 * MS, 300 * MS, "ok"));
        h.push(observe(50 * MS, false, &["a:1", "b:1"]));
        assert_eq!(fair_of(&h).violations, 0);
        // A timed waiter ahead (its slot may end while it waits) is excused.
        let mut h = call("a", "try_lock_for", 0, 300 * MS, "ok");
        h.extend(call("b", "lock", 5 * MS, 200 * MS, "ok"));
        h.push(observe(50 * MS, false, &["a:1", "b:1"]));
        let f = fair_of(&h);
        assert_eq!((f.violations, f.overstays), (0, 1), "{f:?}");
        // So is one whose hold was gone by its section (its lease ran out first).
        let mut h = call("a", "lock", 0, 300 * MS, "ok");
        h.push(op("a", "section-skip", "ok", 300 * MS + 1, json!({})));
        h.extend(call("b", "lock", 5 * MS, 200 * MS, "ok"));
        h.push(observe(50 * MS, false, &["a:1", "b:1"]));
        let f = fair_of(&h);
        assert_eq!((f.violations, f.overstays), (0, 1), "{f:?}");
    }

    fn latch_of(lines: &[String]) -> Figures {
        latch(&parse(lines))
            .remove("single-none-lock-lease")
            .unwrap_or_default()
    }

    #[test]
    fn a_latch_wait_that_returns_before_the_last_count_down_is_a_violation() {
        let l = |p: &str, o: &str, k: &str, ns: u64, e: Value| {
            op(p, o, k, ns, merge_json(json!({"name": "L:latch:0"}), e))
        };
        let mut h = vec![
            l("a", "latch-set", "invoke", 0, json!({"count": 2})),
            l("a", "latch-set", "ok", 1, json!({"count": 2})),
            l("a", "count-down", "invoke", 100, json!({})),
            l("a", "count-down", "ok", 101, json!({})),
            l("b", "count-down", "invoke", 200, json!({})),
            l("b", "count-down", "ok", 201, json!({})),
            // Opened after the second count-down was sent: fine.
            l("c", "latch-wait", "invoke", 50, json!({})),
            l("c", "latch-wait", "ok", 202, json!({})),
        ];
        let f = latch_of(&h);
        assert_eq!((f.operations, f.violations), (1, 0), "{f:?}");
        // Opened before the second count-down was even sent.
        h.push(l("d", "latch-wait", "invoke", 60, json!({})));
        h.push(l("d", "latch-wait", "ok", 150, json!({})));
        // Timed out on a latch every count-down had opened before it began.
        h.push(l("e", "latch-wait", "invoke", 300, json!({})));
        h.push(l("e", "latch-wait", "fail", 2_000, json!({})));
        let f = latch_of(&h);
        assert_eq!((f.operations, f.violations), (3, 2), "{f:?}");
    }

    /// The kill_worker nemesis's start, naming its victim process.
    fn kill(victim: &str, ns: u64) -> String {
        json!({"cell": "single-none-lock-lease", "process": "nemesis", "language": "none",
               "name": "L", "op": "nemesis", "type": "invoke", "ns": ns,
               "fault": "kill_worker", "victim": victim})
        .to_string()
    }

    /// A grant to `process` (sent at `t0`, answered at `t1`) whose entry snapshot found
    /// its hold.
    fn grant(process: &str, t0: u64, t1: u64) -> Vec<String> {
        vec![
            op(
                process,
                "acquire",
                "invoke",
                t0,
                json!({"call": "lock_with_lease"}),
            ),
            op(
                process,
                "acquire",
                "ok",
                t1,
                json!({"call": "lock_with_lease"}),
            ),
            op(process, "section-start", "invoke", t1 + 1, json!({})),
            op(
                process,
                "section-start",
                "ok",
                t1 + 2,
                json!({"held": 1, "trusted": true}),
            ),
        ]
    }

    fn takeover_of(lines: &[String]) -> Figures {
        liveness(&parse(lines))
            .remove("single-none-lock-lease")
            .unwrap_or_default()
    }

    #[test]
    fn a_grant_before_a_killed_holders_lease_end_is_a_violation() {
        const MS: u64 = 1_000_000;
        // a's acquire was sent at 1 ms with a 100 ms lease and answered; a was killed at
        // 10 ms without a release, so its hold lives until 101 ms at the earliest.
        let mut dead = grant("a", MS, 2 * MS);
        dead.truncate(2);
        dead.push(kill("a", 10 * MS));
        let mut early = dead.clone();
        early.extend(grant("b", 5 * MS, 50 * MS));
        let f = takeover_of(&early);
        assert_eq!(f.violations, 1, "{f:?}");
        assert_eq!(f.extra.get("killed_holders"), Some(&1));
        // At the lease end (less than the epsilon early): on time; the delay is reported.
        let mut on_time = dead.clone();
        on_time.extend(grant("b", 5 * MS, 100 * MS));
        on_time.extend(grant("c", 5 * MS, 120 * MS));
        let f = takeover_of(&on_time);
        assert_eq!(f.violations, 0, "{f:?}");
        assert_eq!(f.extra.get("takeover_after_lease_ms_max"), Some(&0));
        // A release sent before the kill (it may have run) leaves nothing to judge, and
        // neither does a grant whose entry snapshot did not find its hold.
        let mut released = dead.clone();
        released.insert(2, op("a", "release", "invoke", 3 * MS, json!({})));
        released.extend(grant("b", 5 * MS, 50 * MS));
        assert_eq!(takeover_of(&released).violations, 0);
        let mut unheld = dead;
        unheld.extend(grant("b", 5 * MS, 50 * MS));
        unheld.pop();
        unheld.push(op("b", "section-start", "ok", 52 * MS, json!({"held": 0})));
        assert_eq!(takeover_of(&unheld).violations, 0);
    }

    #[test]
    fn hand_offs_are_timed_from_the_release_send_to_a_waiters_grant_and_drawn() {
        const MS: u64 = 1_000_000;
        let mut h = grant("a", 0, MS);
        h.push(op("a", "release", "invoke", 10 * MS, json!({})));
        h.push(op("a", "release", "ok", 12 * MS, json!({})));
        // b waited from 2 ms and was granted 5 ms after a's release was sent.
        h.extend(grant("b", 2 * MS, 15 * MS));
        h.push(op("b", "release", "invoke", 20 * MS, json!({})));
        h.push(op("b", "release", "ok", 21 * MS, json!({})));
        // a comes back after b's release: the releaser, not a waiter; no sample.
        h.extend(grant("a", 22 * MS, 23 * MS));
        let samples = handoffs(&parse(&h));
        assert_eq!(samples["single-none-lock-lease"], vec![5 * MS]);
        let svg = handoff_svg(&samples).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.ends_with("</svg>\n"),
            "{svg}"
        );
        assert!(
            svg.contains("single-none-lock-lease") && svg.contains("n=1"),
            "{svg}"
        );
        assert!(!svg.contains("<1<"), "unescaped label: {svg}");
        assert!(handoff_svg(&BTreeMap::new()).is_none());
    }

    fn merge_json(mut v: Value, e: Value) -> Value {
        if let (Value::Object(v), Value::Object(e)) = (&mut v, e) {
            v.extend(e);
        }
        v
    }
}
