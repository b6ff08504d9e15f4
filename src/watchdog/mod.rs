//! The watchdog: one thread per client that renews the leases of locks taken without an
//! explicit lease, and deletes spent unlock-latch keys off the caller's path.
//!
//! # Registry and races
//!
//! Holds are counted per `(lock name, owner field)`; each acquisition adds one and each
//! release takes one, so the watchdog stops renewing exactly at the full release. A
//! renewal works on a snapshot taken under the registry mutex and applies its results
//! only to the same [`Hold`] (`Arc::ptr_eq`): if the lock was released and taken again
//! meanwhile, the new hold has a new `Hold` and a stale "not held" answer cannot mark it
//! lost. The renewal script itself only extends a key whose owner field still exists, so
//! a renewal racing with the final unlock can never bring a released lock back.
//!
//! # Loss
//!
//! A renewal that finds the owner field gone marks the hold [`Loss::Lost`]. A failed
//! renewal (timeout, connection down) is retried after a quarter period; if no renewal
//! has been confirmed [`warning_margin`] (1.5 periods) before the lease ends, the hold
//! is marked [`Loss::PossiblyLost`], while that much lease is still left. The watchdog's
//! own connect and response timeouts are capped at [`attempt_cap`] (lease/12) so that a
//! dead server cannot block it past that moment. Either way the hold leaves the
//! registry: a holder that was told its lock may be gone is not kept alive.
//!
//! # Renewal kinds
//!
//! Most holds are a hash field whose key is extended while the field exists
//! ([`Renewal::Lock`]: RLock, fair lock, write lock; Redisson's `LockTask`). A read hold
//! also owns one timeout key per hold, which must be extended with it, or Redisson's read
//! unlock would take the reader for dead ([`Renewal::Read`], Redisson's `ReadLockTask`).
//! A string-token lock's hold is its key holding its token ([`Renewal::Token`]: a
//! compare-and-PEXPIRE). Each kind is renewed in batches by its own script; all answer
//! per hold, so the loss rules above hold for every kind.

pub(crate) mod hold;
pub(crate) mod hold_state;
pub(crate) mod renew;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded};
use parking_lot::Mutex;

use crate::error::Result;
use crate::transport::{Batching, Dedicated, Group};
use hold::{Hold, Loss};

/// How long spent latch keys wait so that many are deleted by one command.
const LATCH_BATCH_DELAY: Duration = Duration::from_millis(20);

/// How the watchdog renews a hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Renewal {
    /// `PEXPIRE` the hash while the owner field exists: RLock, fair lock, write lock.
    Lock,
    /// Extend the owner's read-hold timeout keys, and the hash, while the owner still
    /// has read holds.
    Read,
    /// `PEXPIRE` a string-token lock's key while it still holds the token (the "owner"
    /// of such a hold is its token).
    Token,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct HoldKey {
    kind: Renewal,
    name: String,
    owner: String,
}

impl HoldKey {
    fn new(kind: Renewal, name: &str, owner: &str) -> Self {
        Self {
            kind,
            name: name.to_owned(),
            owner: owner.to_owned(),
        }
    }
}

struct Entry {
    count: u32,
    hold: Arc<Hold>,
}

struct Shared {
    /// Keyed by `Arc<HoldKey>` so that a renewal's snapshot shares the names instead of
    /// copying two strings per hold every period (with 100,000 holds that copying, done
    /// under this mutex, stalled every `lock()` of the process for the whole snapshot).
    holds: Mutex<HashMap<Arc<HoldKey>, Entry>>,
    /// The earliest lease end among the holds registered since the thread last looked,
    /// as nanoseconds after `epoch` (`u64::MAX`: none). The thread keeps the earliest
    /// loss-warning deadline of the registry from its last walk; every other change
    /// (renewals, releases) only moves deadlines later or removes them, so this is all
    /// it needs between walks (see [`run`]).
    earliest_new: AtomicU64,
    epoch: Instant,
    latches: Mutex<Vec<String>>,
    /// Latches of releases with a try whose outcome was unknown: left to their PX while
    /// the client lives (a late try must find them), deleted at shutdown, when no newer
    /// hold of this client's owner fields can exist any more.
    kept_latches: Mutex<Vec<String>>,
    stop: AtomicBool,
}

impl Shared {
    /// Notes that a hold whose lease ends at `end` joined the registry.
    fn registered(&self, end: Instant) {
        let nanos = u64::try_from(end.saturating_duration_since(self.epoch).as_nanos())
            .unwrap_or(u64::MAX - 1);
        self.earliest_new.fetch_min(nanos, Ordering::Relaxed);
    }

    /// The earliest lease end registered since the last call, if any.
    fn take_registered(&self) -> Option<Instant> {
        match self.earliest_new.swap(u64::MAX, Ordering::Relaxed) {
            u64::MAX => None,
            nanos => self.epoch.checked_add(Duration::from_nanos(nanos)),
        }
    }
}

/// Handle to the watchdog thread; owned by the client.
pub(crate) struct Watchdog {
    shared: Arc<Shared>,
    kick: Sender<()>,
    thread: Mutex<Option<JoinHandle<()>>>,
    margin: Duration,
    name_labels: bool,
}

impl std::fmt::Debug for Watchdog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watchdog")
            .field("holds", &self.shared.holds.lock().len())
            .finish_non_exhaustive()
    }
}

/// The watchdog thread's settings.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) lease: Duration,
    pub(crate) batch_size: usize,
    /// Whether holds report their loss with the lock name as a metrics label.
    pub(crate) name_labels: bool,
}

impl Watchdog {
    /// Starts the thread; `dedicated` must have its timeouts capped at
    /// [`attempt_cap`] of the lease.
    pub(crate) fn start(dedicated: Dedicated, settings: Settings) -> Result<Self> {
        let shared = Arc::new(Shared {
            holds: Mutex::new(HashMap::new()),
            earliest_new: AtomicU64::new(u64::MAX),
            epoch: Instant::now(),
            latches: Mutex::new(Vec::new()),
            kept_latches: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        let (kick, kicked) = bounded(1);
        let thread_shared = Arc::clone(&shared);
        let margin = warning_margin(settings.lease);
        let name_labels = settings.name_labels;
        let thread = std::thread::Builder::new()
            .name("redmutex-watchdog".into())
            .spawn(move || run(&thread_shared, dedicated, &settings, &kicked))?;
        Ok(Self {
            shared,
            kick,
            thread: Mutex::new(Some(thread)),
            margin,
            name_labels,
        })
    }

    /// How long before its lease ends a renewed hold whose renewal was not confirmed
    /// counts as possibly lost; guards apply the same rule locally.
    pub(crate) fn margin(&self) -> Duration {
        self.margin
    }

    /// The lock name to label a hold's metrics with, if the client labels with names.
    pub(crate) fn label<'a>(&self, name: &'a str) -> Option<&'a str> {
        self.name_labels.then_some(name)
    }

    /// Adds one hold of `owner` on `name`, renewed the `kind` way, to the renewal
    /// registry and returns the shared state of that owner's holds.
    pub(crate) fn register(
        &self,
        kind: Renewal,
        name: &str,
        owner: &str,
        lease_end: Instant,
    ) -> Arc<Hold> {
        let key = HoldKey::new(kind, name, owner);
        // No kick: the thread ticks every renewal period whether or not anything is
        // held, so a new hold is renewed within one period, well inside its lease of
        // three periods. Waking the thread on every first hold would cost a context
        // switch per uncontended lock.
        let mut holds = self.shared.holds.lock();
        // A hold presumed lost stays registered to be renewed (see `warn_overdue`), but
        // its mark is never taken back: a new acquisition starts a fresh, unmarked hold
        // in its place, as it did when presumed-lost holds left the registry.
        if let Some(entry) = holds.get_mut(&key)
            && entry.hold.loss().is_none()
        {
            entry.count += 1;
            entry.hold.extend(lease_end);
            return Arc::clone(&entry.hold);
        }
        let hold = Arc::new(Hold::new(lease_end, self.label(name)));
        holds.insert(
            Arc::new(key),
            Entry {
                count: 1,
                hold: Arc::clone(&hold),
            },
        );
        // After the insert: the thread takes the mark before it walks, so either that
        // walk sees this hold or the mark waits for the thread's next look.
        self.shared.registered(lease_end);
        hold
    }

    /// The registered hold state of `owner` on `name`, if any.
    pub(crate) fn hold(&self, kind: Renewal, name: &str, owner: &str) -> Option<Arc<Hold>> {
        let key = HoldKey::new(kind, name, owner);
        self.shared
            .holds
            .lock()
            .get(&key)
            .map(|e| Arc::clone(&e.hold))
    }

    /// Takes one hold off the registry after a release; `gone` drops all of the owner's
    /// holds (the release found none left in Redis).
    pub(crate) fn unregister(&self, kind: Renewal, name: &str, owner: &str, gone: bool) {
        let key = HoldKey::new(kind, name, owner);
        let mut holds = self.shared.holds.lock();
        if let Some(entry) = holds.get_mut(&key) {
            entry.count = entry.count.saturating_sub(1);
            if gone || entry.count == 0 {
                holds.remove(&key);
            }
        }
    }

    /// Drops every hold of this client on `name`, of every kind, and reports them lost (a
    /// force unlock deleted the key they all live in).
    pub(crate) fn forget_lock(&self, name: &str) {
        self.shared.holds.lock().retain(|key, entry| {
            if key.name != name {
                return true;
            }
            entry.hold.mark(Loss::Lost);
            false
        });
    }

    /// Queues a spent unlock latch for deletion. Its PX would delete it anyway; deleting
    /// it early keeps Redis clean without a third round trip on the unlock path.
    pub(crate) fn discard_latch(&self, key: String) {
        let mut latches = self.shared.latches.lock();
        let was_empty = latches.is_empty();
        latches.push(key);
        drop(latches);
        if was_empty {
            let _ = self.kick.try_send(());
        }
    }

    /// Number of holds being renewed.
    pub(crate) fn len(&self) -> usize {
        self.shared.holds.lock().len()
    }

    /// Keeps the latch of a release that had a try with an unknown outcome: it lives out
    /// its PX, or until this client shuts down (see `Shared::kept_latches`).
    pub(crate) fn keep_latch(&self, key: String) {
        self.shared.kept_latches.lock().push(key);
    }

    /// Stops the thread (after deleting pending and kept latches) and waits for it.
    pub(crate) fn shutdown(&self) {
        self.shared.stop.store(true, Ordering::Release);
        let _ = self.kick.try_send(());
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
    }
}

fn run(shared: &Shared, mut io: Dedicated, settings: &Settings, kicked: &Receiver<()>) {
    let period = settings.lease / 3;
    let mut next_tick = Instant::now() + period;
    let mut latch_due: Option<Instant> = None;
    let margin = warning_margin(settings.lease);
    // The earliest loss-warning deadline in the registry, as the last walk found it, or
    // earlier. Walking every hold on every wake-up cost O(holds) per latch flush: with
    // 10,000 holds and a release every few ms that kept the registry mutex, which every
    // `lock()` and `unlock()` of the client takes, busy for most of the time. So the
    // registry is walked only when that deadline comes and after each renewal tick (the
    // tick's failures are what make deadlines due). Between walks, deadlines only move
    // later (a renewal or re-entry extends a lease, a release removes a hold), so the
    // kept one stays a safe lower bound, and new holds come in through
    // `Shared::take_registered`. A hold registered while the thread sleeps is not seen
    // until it wakes, as before: no registration wakes it (see `Watchdog::register`),
    // and it wakes at least once per period, well before a new hold's warning falls due
    // (half a lease after its acquisition was sent).
    let mut next_warning: Option<Instant> = None;
    let mut walk = true;
    loop {
        if shared.stop.load(Ordering::Acquire) {
            // The client is going: no hold of its owner fields can come after this, so a
            // late try of a release has nothing newer to take off.
            let kept = std::mem::take(&mut *shared.kept_latches.lock());
            shared.latches.lock().extend(kept);
            flush_latches(shared, &mut io);
            break;
        }
        let now = Instant::now();
        if let Some(end) = shared.take_registered() {
            let warn_at = end.checked_sub(margin).unwrap_or(now);
            next_warning = Some(next_warning.map_or(warn_at, |w| w.min(warn_at)));
        }
        if walk || next_warning.is_some_and(|w| w <= now) {
            next_warning = warn_overdue(shared, now, margin);
            walk = false;
        }
        if next_tick <= now {
            // An idle tick costs a wake-up and no command.
            let renewed = shared.holds.lock().is_empty() || renew_all(shared, &mut io, settings);
            // A failed renewal is retried well before the next period, so one lost
            // reply does not eat a third of the lease.
            // On success the schedule keeps its beat (one tick per period, however long
            // the renewal took) unless it fell a whole period behind.
            let after = Instant::now();
            next_tick = if renewed {
                (next_tick + period).max(after)
            } else {
                after + period / 4
            };
            walk = true;
            continue;
        }
        let has_latches = !shared.latches.lock().is_empty();
        latch_due = match (has_latches, latch_due) {
            (false, _) => None,
            (true, None) => Some(now + LATCH_BATCH_DELAY),
            (true, due) => due,
        };
        if latch_due.is_some_and(|due| due <= now) {
            flush_latches(shared, &mut io);
            latch_due = None;
            continue;
        }
        let mut wake = latch_due.map_or(next_tick, |due| due.min(next_tick));
        if let Some(warning) = next_warning {
            wake = wake.min(warning);
        }
        if let Err(RecvTimeoutError::Disconnected) = kicked.recv_deadline(wake) {
            break;
        }
    }
}

/// How long before its lease ends a renewed hold whose renewal was not confirmed is
/// presumed lost: one period, plus room for one renewal attempt in flight at that moment
/// (the watchdog cannot warn while blocked in one; see [`attempt_cap`]).
pub(crate) fn warning_margin(lease: Duration) -> Duration {
    let period = lease / 3;
    period + 2 * attempt_cap(lease)
}

/// The watchdog's own connect timeout and response timeout are each capped at this, so
/// one renewal attempt blocks it at most twice as long.
pub(crate) fn attempt_cap(lease: Duration) -> Duration {
    lease / 12
}

/// Presumes lost every hold whose renewal has not been confirmed [`warning_margin`]
/// before its lease ends, and returns when the next such deadline falls.
///
/// Renewals normally land every period and push the lease end a full lease ahead, so
/// this never fires while Redis answers. When it does fire, the holder still has the
/// margin's worth of lease left to stop touching what the lock protects.
///
/// A hold presumed lost stays registered and keeps being renewed: the presumption is the
/// holder's warning, not a verdict. Dropping it (as this did once) made the loss certain
/// on a starved machine: the bench's 100,000 holds behind a tick that outlasted the
/// margin were then never renewed again, and 65 % of them expired. A renewal that finds
/// the key gone or owned by another still drops the hold as lost.
fn warn_overdue(shared: &Shared, now: Instant, margin: Duration) -> Option<Instant> {
    let mut overdue = Vec::new();
    let mut next: Option<Instant> = None;
    for (key, entry) in shared.holds.lock().iter() {
        if entry.hold.loss().is_some() {
            // Already told; a mark is never taken back, so nothing more to warn of.
            continue;
        }
        let warn_at = entry.hold.lease_end().checked_sub(margin).unwrap_or(now);
        if warn_at <= now {
            overdue.push((Arc::clone(key), Arc::clone(&entry.hold)));
        } else {
            next = Some(next.map_or(warn_at, |n| n.min(warn_at)));
        }
    }
    for (key, hold) in overdue {
        log::warn!(
            "redmutex: lock {:?} may be lost: its renewal could not be confirmed in time",
            key.name
        );
        hold.mark(Loss::PossiblyLost);
    }
    next
}

/// One registered hold, as a renewal sees it: the transport group its key belongs to,
/// its registry key and its shared state.
type Due = (Group, Arc<HoldKey>, Arc<Hold>);

/// Renews every registered hold; false if any batch could not be renewed.
///
/// The holds are grouped by renewal kind (each kind has its own script) and by the
/// transport's group (keys one multi-key script may touch together), then cut into
/// batches of at most `batch_size`.
fn renew_all(shared: &Shared, io: &mut Dedicated, settings: &Settings) -> bool {
    let mut due: Vec<Due> = shared
        .holds
        .lock()
        .iter()
        .map(|(k, e)| (io.group(&k.name), Arc::clone(k), Arc::clone(&e.hold)))
        .collect();
    let lease_ms = settings.lease.as_millis() as u64;
    let mut all_done = true;
    let batches = deadline_batches(
        &mut due,
        |(group, k, _)| (k.kind, *group),
        |(_, _, hold)| hold.lease_end(),
        settings.batch_size,
    );
    for batch in batches {
        let sent_at = Instant::now();
        let answer = renew_batch(io, batch, lease_ms);
        all_done &= apply_renewal(
            shared,
            batch,
            answer,
            sent_at + settings.lease,
            io,
            lease_ms,
        );
    }
    all_done
}

/// Cuts `items` into batches of at most `size` items of one class (renewal kind and
/// transport group: what one script call may carry), earliest lease end first: each
/// class is ordered by lease end before it is cut, and the batches come out in the order
/// of their earliest end. While Redis and the CPU keep up the order changes nothing; on
/// a starved machine, where a tick may not finish before holds expire, the holds
/// nearest their expiry are the ones renewed first.
fn deadline_batches<T, C: Ord + Copy>(
    items: &mut [T],
    class: impl Fn(&T) -> C,
    end: impl Fn(&T) -> Instant,
    size: usize,
) -> Vec<&[T]> {
    // Cached: reading a lease end takes the hold's mutex, once per item, not per compare.
    items.sort_by_cached_key(|item| (class(item), end(item)));
    let mut batches: Vec<&[T]> = items
        .chunk_by(|a, b| class(a) == class(b))
        .flat_map(|same| same.chunks(size.max(1)))
        .collect();
    batches.sort_by_cached_key(|batch| batch.first().map(&end));
    batches
}

/// Sends one batch (all of one kind and one group) to its script. Element i of the
/// answer says whether hold i is still held; `None`: the node could not look (a
/// cluster key that migrated), so its own master must be asked.
fn renew_batch(
    io: &mut Dedicated,
    batch: &[Due],
    lease_ms: u64,
) -> redis::RedisResult<Vec<Option<bool>>> {
    let Some((_, first, _)) = batch.first() else {
        return Ok(Vec::new());
    };
    let pairs: Vec<(&str, &str)> = batch
        .iter()
        .map(|(_, k, _)| (k.name.as_str(), k.owner.as_str()))
        .collect();
    let kind = first.kind;
    let declared = |held: Vec<bool>| held.into_iter().map(Some).collect();
    match io.batching() {
        Batching::Declared => io
            .run(&first.name, |c| match kind {
                Renewal::Lock => renew::renew(c, &pairs, lease_ms),
                Renewal::Read => renew::renew_reads(c, &pairs, lease_ms),
                Renewal::Token => renew::renew_tokens(c, &pairs, lease_ms),
            })
            .map(declared),
        // One call per master for any number of slots: locks/batch + masters calls
        // per period in all.
        Batching::PerNode { script_flags } => io.run_on_owner(&first.name, |c| match kind {
            Renewal::Lock => renew::renew_local(c, &pairs, lease_ms, script_flags),
            Renewal::Read => renew::renew_reads_local(c, &pairs, lease_ms, script_flags),
            Renewal::Token => renew::renew_tokens_local(c, &pairs, lease_ms, script_flags),
        }),
    }
}

/// Asks the master of one hold's key, by a routed single-key renewal (redirects
/// followed), whether it is still held: `None` when that could not be learned now.
fn confirm(io: &mut Dedicated, key: &HoldKey, lease_ms: u64) -> Option<bool> {
    let pair = [(key.name.as_str(), key.owner.as_str())];
    let answer = io.run(&key.name, |c| match key.kind {
        Renewal::Lock => renew::renew(c, &pair, lease_ms),
        Renewal::Read => renew::renew_reads(c, &pair, lease_ms),
        Renewal::Token => renew::renew_tokens(c, &pair, lease_ms),
    });
    match answer {
        Ok(held) if held.len() == 1 => held.first().copied(),
        Ok(_) => None,
        Err(e) => {
            log::debug!(
                "redmutex: could not confirm the hold of {:?}: {e}",
                key.name
            );
            None
        }
    }
}

/// Applies one batch's answer: a confirmed renewal moves the lease end to `lease_end`,
/// a hold found gone is reported lost; a failed batch is left for the retry. Returns
/// whether every hold of the batch got an answer.
///
/// With [`Batching::PerNode`] a hold the node did not find (or could not look at) is
/// confirmed by its key's own master before it is called lost: a key that migrated to
/// another master looks missing on the old one.
fn apply_renewal(
    shared: &Shared,
    batch: &[Due],
    answer: redis::RedisResult<Vec<Option<bool>>>,
    lease_end: Instant,
    io: &mut Dedicated,
    lease_ms: u64,
) -> bool {
    let held = match answer {
        Ok(held) if held.len() == batch.len() => held,
        other => {
            let e = match other {
                Err(e) => e.to_string(),
                Ok(v) => {
                    io.reset();
                    format!(
                        "renewal answered {} results for {} locks",
                        v.len(),
                        batch.len()
                    )
                }
            };
            // Retried soon; `warn_overdue` tells the holders if it keeps failing.
            crate::metrics::renewal_failed(batch.len());
            log::warn!(
                "redmutex: renewal of {} lock(s) failed, retrying: {e}",
                batch.len()
            );
            return false;
        }
    };
    let confirming = matches!(io.batching(), Batching::PerNode { .. });
    let mut answered = true;
    let mut renewed = 0;
    for ((_, key, hold), still_held) in batch.iter().zip(held) {
        let still_held = match still_held {
            Some(false) | None if confirming => confirm(io, key, lease_ms),
            other => other,
        };
        match still_held {
            Some(true) => {
                renewed += 1;
                hold.extend(lease_end);
            }
            Some(false) => {
                log::warn!(
                    "redmutex: lock {:?} was lost: the key is gone or owned by another",
                    key.name
                );
                forget(shared, key, hold, Loss::Lost);
            }
            // Left for the retry a quarter period later (a slot in the middle of a
            // migration answers TRYAGAIN to the two-key read renewal).
            None => answered = false,
        }
    }
    crate::metrics::renewed(renewed);
    answered
}

/// Marks the hold and drops it from the registry, unless the registry already holds a
/// newer hold for the same owner.
fn forget(shared: &Shared, key: &HoldKey, hold: &Arc<Hold>, loss: Loss) {
    hold.mark(loss);
    let mut holds = shared.holds.lock();
    if holds.get(key).is_some_and(|e| Arc::ptr_eq(&e.hold, hold)) {
        holds.remove(key);
    }
}

/// Deletes the spent latches queued so far, a chunk per command and per group.
fn flush_latches(shared: &Shared, io: &mut Dedicated) {
    let mut keys = std::mem::take(&mut *shared.latches.lock());
    if keys.is_empty() {
        return;
    }
    keys.sort_by_key(|k| io.group(k));
    let mut rest = keys.as_slice();
    while let Some(first) = rest.first() {
        let group = io.group(first);
        let len = rest
            .iter()
            .take(512)
            .take_while(|k| io.group(k) == group)
            .count();
        let (chunk, tail) = rest.split_at(len);
        rest = tail;
        let deleted = match io.batching() {
            Batching::Declared => io.run(first, |c| redis::cmd("DEL").arg(chunk).query::<i64>(c)),
            Batching::PerNode { script_flags } => {
                io.run_on_owner(first, |c| renew::delete_local(c, chunk, script_flags))
            }
        };
        if let Err(e) = deleted {
            // They expire on their own within the latch lifetime.
            log::debug!(
                "redmutex: could not delete {} unlock latches: {e}",
                chunk.len()
            );
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::deadline_batches;

    #[test]
    fn batches_go_out_earliest_lease_end_first_within_one_class() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // (class, lease end): class 1's holds end soonest, but they are listed last.
        let mut items = vec![
            (0u8, at(900)),
            (0, at(100)),
            (0, at(500)),
            (1, at(50)),
            (1, at(700)),
            (0, at(300)),
        ];
        let batches = deadline_batches(&mut items, |i| i.0, |i| i.1, 2);
        let got: Vec<Vec<(u8, u64)>> = batches
            .iter()
            .map(|b| {
                b.iter()
                    .map(|(c, end)| (*c, end.duration_since(t0).as_millis() as u64))
                    .collect()
            })
            .collect();
        assert_eq!(
            got,
            vec![
                vec![(1, 50), (1, 700)],
                vec![(0, 100), (0, 300)],
                vec![(0, 500), (0, 900)],
            ]
        );
        // A batch never mixes classes, and none exceeds the size.
        assert!(
            batches
                .iter()
                .all(|b| b.len() <= 2 && b.iter().all(|i| i.0 == b[0].0))
        );
    }
}
