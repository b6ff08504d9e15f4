//! What the client reports through the [`metrics`](https://docs.rs/metrics) facade:
//! acquisitions, holds, waits, renewals, losses and pub/sub reconnects.
//!
//! redmutex only records; it installs no recorder and exports nothing. Without a recorder
//! every call below is a no-op (the facade checks for one with an atomic load). To collect
//! them, install any `metrics` recorder (for Prometheus, `metrics-exporter-prometheus`)
//! before creating clients, and call [`describe`] once to attach units and descriptions.
//! `docs/metrics.md` lists every metric with its unit, meaning and example alert rules.
//!
//! Lock names are not labels by default: a service that locks one key per order would
//! create one series per order. [`ConfigBuilder::metrics_lock_names`] adds a `name` label
//! to the per-lock metrics for deployments with a small, fixed set of locks.
//!
//! Names are dotted, as the `metrics` ecosystem writes them; the Prometheus exporter turns
//! `redmutex.lock.acquire.duration` into `redmutex_lock_acquire_duration` (and appends the
//! unit when asked to, e.g. `_seconds`).
//!
//! [`ConfigBuilder::metrics_lock_names`]: crate::ConfigBuilder::metrics_lock_names

use std::time::Duration;

use ::metrics::{
    Label, Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram,
};

/// Histogram, seconds: how long an acquisition of a lock took, from the call until the
/// guard or the refusal; labels `kind` (`RLock`, `RFairLock`, …, `TokenLock`,
/// `QuorumTokenLock`, `MultiLock`, `RedLock`), `outcome` (`acquired`,
/// `timeout`, `error`) and, when enabled, `name`. A `try_lock` that finds the lock busy
/// counts as `timeout`.
pub const ACQUIRE_DURATION: &str = "redmutex.lock.acquire.duration";
/// Histogram, count: how many acquire scripts one acquisition ran (1 when the lock was
/// free); labels `kind`, `outcome`, `name` as [`ACQUIRE_DURATION`]. Not recorded for a
/// `QuorumTokenLock`, whose rounds go to several servers.
pub const ACQUIRE_ATTEMPTS: &str = "redmutex.lock.acquire.attempts";
/// Histogram, seconds: how long a hold lasted, from its grant until its guard released
/// it (a detached guard records nothing); labels `kind` and, when enabled, `name`.
pub const HELD_DURATION: &str = "redmutex.lock.held.duration";
/// Gauge: holds currently represented by a live guard in this process; label `kind`.
pub const LOCKS_HELD: &str = "redmutex.locks.held";
/// Counter: waits begun, i.e. acquisitions (of locks, semaphores and latches) that did
/// not succeed at once and subscribed to wait.
pub const WAITS: &str = "redmutex.waits";
/// Gauge: threads of this process currently waiting for a lock, permit or latch.
pub const WAITERS: &str = "redmutex.waiters";
/// Counter: waiting threads woken by a message (an unlock, released permits, a latch
/// at zero).
pub const WAKEUPS: &str = "redmutex.wakeups";
/// Counter: holds whose lease the watchdog renewed.
pub const RENEWALS: &str = "redmutex.watchdog.renewals";
/// Counter: holds whose renewal failed (no answer, or an error); the watchdog retries
/// them soon, and presumes them lost when it cannot renew them in time.
pub const RENEWAL_FAILURES: &str = "redmutex.watchdog.renewal.failures";
/// Counter: holds found lost (`loss="lost"`: the key is gone or owned by another) or
/// presumed lost (`loss="possibly_lost"`: renewal could not be confirmed before the
/// lease might end); label `name` when enabled. Anything above zero deserves a look:
/// mutual exclusion may have been broken.
pub const LOSSES: &str = "redmutex.lock.losses";
/// Counter: times the pub/sub listener opened a new connection after losing one.
pub const PUBSUB_RECONNECTS: &str = "redmutex.pubsub.reconnects";
/// Counter: lock writes whose replication to the replicas could not be confirmed (`WAIT`
/// answered 0 with replicas connected), label `op`: `acquire` (each undone and retried or
/// failed with [`Error::NoSyncedReplicas`](crate::Error::NoSyncedReplicas), with
/// `check_lock_synced_slaves` on) or `release` (the release stands; with
/// [`sync_releases`](crate::Config::sync_releases) on). Recorded in sentinel and cluster
/// modes; a single server never records it.
pub const REPLICA_SYNC_FAILURES: &str = "redmutex.replica_sync.failures";

/// Attaches units and descriptions to every redmutex metric in the installed recorder.
/// Call it once, after installing the recorder; recording works without it.
pub fn describe() {
    describe_histogram!(
        ACQUIRE_DURATION,
        Unit::Seconds,
        "Time an acquisition took, by kind and outcome (acquired, timeout, error)"
    );
    describe_histogram!(
        ACQUIRE_ATTEMPTS,
        Unit::Count,
        "Acquire scripts run per acquisition"
    );
    describe_histogram!(
        HELD_DURATION,
        Unit::Seconds,
        "Time from a grant to its guard's release"
    );
    describe_gauge!(LOCKS_HELD, Unit::Count, "Holds with a live guard");
    describe_counter!(WAITS, Unit::Count, "Acquisitions that had to wait");
    describe_gauge!(WAITERS, Unit::Count, "Threads waiting now");
    describe_counter!(WAKEUPS, Unit::Count, "Waiters woken by a message");
    describe_counter!(RENEWALS, Unit::Count, "Leases renewed by the watchdog");
    describe_counter!(
        RENEWAL_FAILURES,
        Unit::Count,
        "Lease renewals that failed and will be retried"
    );
    describe_counter!(
        LOSSES,
        Unit::Count,
        "Holds found lost or presumed lost, by loss"
    );
    describe_counter!(
        PUBSUB_RECONNECTS,
        Unit::Count,
        "Pub/sub connections re-opened after a loss"
    );
    describe_counter!(
        REPLICA_SYNC_FAILURES,
        Unit::Count,
        "Lock writes whose replication could not be confirmed"
    );
}

/// How an acquisition ended.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Outcome {
    Acquired,
    Timeout,
    Error,
}

impl Outcome {
    /// The outcome of an acquisition that answers a guard, `None` (not acquired in
    /// time) or an error.
    pub(crate) fn of<T>(result: &crate::Result<Option<T>>) -> Self {
        match result {
            Ok(Some(_)) => Self::Acquired,
            Ok(None) => Self::Timeout,
            Err(_) => Self::Error,
        }
    }

    /// The outcome of an acquisition that waits as long as it takes: a guard or an
    /// error.
    pub(crate) fn of_guard<T>(result: &crate::Result<T>) -> Self {
        match result {
            Ok(_) => Self::Acquired,
            Err(_) => Self::Error,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Acquired => "acquired",
            Self::Timeout => "timeout",
            Self::Error => "error",
        }
    }
}

/// The labels of a per-lock metric: the kind, maybe one more, and the lock name when the
/// client was configured to label with names (`name` is `None` otherwise). Static strings
/// are borrowed, so without names this builds one small vector and copies no text.
fn labels(
    kind: &'static str,
    extra: Option<(&'static str, &'static str)>,
    name: Option<&str>,
) -> Vec<Label> {
    let mut labels = Vec::with_capacity(3);
    labels.push(Label::from_static_parts("kind", kind));
    if let Some((k, v)) = extra {
        labels.push(Label::from_static_parts(k, v));
    }
    if let Some(name) = name {
        labels.push(Label::new("name", name.to_owned()));
    }
    labels
}

/// One acquisition of a lock of `kind` ended with `outcome` after `elapsed` and
/// `attempts` script runs (`None`: the kind does not count them); an acquired one
/// starts a hold.
pub(crate) fn acquisition(
    kind: &'static str,
    name: Option<&str>,
    outcome: Outcome,
    elapsed: Duration,
    attempts: Option<u32>,
) {
    let labels = labels(kind, Some(("outcome", outcome.label())), name);
    if let Some(attempts) = attempts {
        histogram!(ACQUIRE_ATTEMPTS, labels.clone()).record(f64::from(attempts));
    }
    histogram!(ACQUIRE_DURATION, labels).record(elapsed);
    if matches!(outcome, Outcome::Acquired) {
        gauge!(LOCKS_HELD, "kind" => kind).increment(1.0);
    }
}

/// Runs `acquire`, an acquisition of a composition of locks (`MultiLock`, `RedLock`),
/// and records it as one acquisition of `kind` (no name, no attempt count: its members
/// record their own, under their own kinds).
pub(crate) fn composite<R>(
    kind: &'static str,
    outcome: impl FnOnce(&R) -> Outcome,
    acquire: impl FnOnce() -> R,
) -> R {
    let started = std::time::Instant::now();
    let result = acquire();
    acquisition(kind, None, outcome(&result), started.elapsed(), None);
    result
}

/// A guard of a lock of `kind` ended: released after `held`, or detached (`None`).
pub(crate) fn guard_ended(kind: &'static str, name: Option<&str>, held: Option<Duration>) {
    gauge!(LOCKS_HELD, "kind" => kind).decrement(1.0);
    if let Some(held) = held {
        histogram!(HELD_DURATION, labels(kind, None, name)).record(held);
    }
}

/// A thread waiting, from its first failed attempt until it stops waiting: counts the
/// wait and keeps the waiters gauge up while it lives.
#[derive(Debug)]
pub(crate) struct Waiting(());

impl Waiting {
    pub(crate) fn begin() -> Self {
        counter!(WAITS).increment(1);
        gauge!(WAITERS).increment(1.0);
        Self(())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        gauge!(WAITERS).decrement(1.0);
    }
}

/// `n` waiters were woken by one message.
pub(crate) fn woken(n: usize) {
    if n > 0 {
        counter!(WAKEUPS).increment(n as u64);
    }
}

/// The watchdog renewed `n` holds.
pub(crate) fn renewed(n: usize) {
    counter!(RENEWALS).increment(n as u64);
}

/// The watchdog failed to renew `n` holds.
pub(crate) fn renewal_failed(n: usize) {
    counter!(RENEWAL_FAILURES).increment(n as u64);
}

/// A hold became lost (`loss` "lost") or presumed lost ("possibly_lost"): the label of
/// the `Loss` variant, which the hold module names so that metrics stays below it.
pub(crate) fn lost(loss: &'static str, name: Option<&str>) {
    let mut labels = vec![Label::from_static_parts("loss", loss)];
    if let Some(name) = name {
        labels.push(Label::new("name", name.to_owned()));
    }
    counter!(LOSSES, labels).increment(1);
}

/// A lock write reached no replica (`WAIT` answered 0 with replicas connected); `op` is
/// `acquire` or `release`.
pub(crate) fn replica_sync_failed(op: &'static str) {
    counter!(REPLICA_SYNC_FAILURES, "op" => op).increment(1);
}

/// The pub/sub listener connected again after losing its connection.
pub(crate) fn pubsub_reconnected() {
    counter!(PUBSUB_RECONNECTS).increment(1);
}
