//! Scheduled-job locks in ShedLock's Redis format, so that a Rust job and a Java
//! `@SchedulerLock` job of the same name never run at once.
//!
//! ShedLock's Redis providers (`shedlock-provider-redis-spring`, `-jedis4`, `-lettuce`,
//! all on its `InternalRedisLockProvider` since 6.10) keep one string key per job,
//! `<prefix>:<environment>:<name>` (`job-lock:default:<name>` by default), holding
//! `ADDED:<ISO time>@<hostname>:<uuid>` (before 6.10 without the `:<uuid>`):
//!
//! - a run starts with `SET key value NX PX <lockAtMostFor>`; a refused `SET` means the
//!   job runs elsewhere, and this run is skipped, never waited for;
//! - when the job ends before `lockAtLeastFor` has passed, the key's TTL becomes what is
//!   left of it, so that nobody runs the job again before then; otherwise the key is
//!   deleted;
//! - extending sets the TTL to the new `lockAtMostFor`, counted from now.
//!
//! ShedLock (without its `safeUpdate`, off by default) releases and extends without
//! looking at the value: a `DEL` or `SET XX`. This side always compares first (the
//! string-token lock's compare-and-delete and compare-and-`PEXPIRE` scripts), so a Rust
//! job that overran `lockAtMostFor` never deletes or shortens the lock a Java run holds.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::clock;
use crate::core::Core;
use crate::error::{Error, Result, short};
use crate::protocol::names;
use crate::token_lock::token::{self, ExtendBy, TokenReleased};

/// A ShedLock-compatible lock on one scheduled job: [`run_if_free`](Self::run_if_free)
/// runs the job only if no process (Rust or a Java service on ShedLock) runs it now or
/// ran it less than [`lock_at_least_for`](Self::lock_at_least_for) ago, and skips it
/// otherwise, without waiting. From [`Client::get_task_lock`](crate::Client::get_task_lock).
///
/// The settings are ShedLock's: [`lock_at_most_for`](Self::lock_at_most_for) is how long
/// the lock outlives a process that died in the job (set it well above the job's longest
/// run: a job still running then is no longer exclusive),
/// [`lock_at_least_for`](Self::lock_at_least_for) how long the lock stays after a job
/// that finished early (so that nodes whose clocks fire the same tick a little later
/// skip it), and the key's [`environment`](Self::environment) and
/// [`key_prefix`](Self::key_prefix) as the Java provider was built with
/// (`new RedisLockProvider(factory, "prod")`, `RedisLockProvider.Builder.keyPrefix`).
///
/// The lock is not renewed while the job runs (ShedLock's is not either); a long job
/// extends it with [`TaskLock::extend_active_lock`]. Inside the job,
/// [`TaskLock::assert_locked`] says whether the thread runs under a task lock, as
/// ShedLock's `LockAssert.assertLocked()` does. A job that asks for its own task lock
/// again on the same thread runs at once, as in ShedLock.
///
/// ```no_run
/// use std::time::Duration;
///
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// // The same lock as @SchedulerLock(name = "nightly-report", lockAtMostFor = "10m",
/// // lockAtLeastFor = "1m") in a Spring service on ShedLock's Redis provider.
/// let task = client
///     .get_task_lock("nightly-report")
///     .lock_at_most_for(Duration::from_secs(600))
///     .lock_at_least_for(Duration::from_secs(60));
/// match task.run_if_free(|| {
///     redmutex::TaskLock::assert_locked().expect("runs under the lock");
///     // ... the job ...
///     42
/// })? {
///     Some(rows) => println!("ran: {rows} rows"),
///     None => println!("skipped: it runs (or just ran) elsewhere"),
/// }
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Clone)]
pub struct TaskLock {
    core: Arc<Core>,
    name: String,
    environment: String,
    prefix: String,
    at_most: Duration,
    at_least: Duration,
}

impl std::fmt::Debug for TaskLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskLock")
            .field("key", &self.key())
            .field("lock_at_most_for", &self.at_most)
            .field("lock_at_least_for", &self.at_least)
            .finish()
    }
}

/// One job this thread runs under a task lock (innermost last).
struct Active {
    core: Arc<Core>,
    key: String,
    value: String,
    /// When the lock's current configuration began: the acquire (or the last extend)
    /// was sent after it, so the lease measured from it never outlasts the key's TTL.
    since: Instant,
    at_most: Duration,
    at_least: Duration,
}

thread_local! {
    // ShedLock keeps the same per-thread stack (`LockAssert`, `LockExtender`).
    static ACTIVE: RefCell<Vec<Active>> = const { RefCell::new(Vec::new()) };
}

impl TaskLock {
    /// ShedLock's key prefix (`InternalRedisLockProvider.DEFAULT_KEY_PREFIX`).
    pub const DEFAULT_KEY_PREFIX: &'static str = "job-lock";
    /// ShedLock's environment when none is given (`ENV_DEFAULT`).
    pub const DEFAULT_ENVIRONMENT: &'static str = "default";
    /// The `lock_at_most_for` of a task lock that sets none. ShedLock has no default (its
    /// `@EnableSchedulerLock` asks for one); set it for the job.
    pub const DEFAULT_LOCK_AT_MOST_FOR: Duration = Duration::from_secs(60);

    pub(crate) fn new(core: Arc<Core>, name: String) -> Self {
        Self {
            core,
            name,
            environment: Self::DEFAULT_ENVIRONMENT.to_owned(),
            prefix: Self::DEFAULT_KEY_PREFIX.to_owned(),
            at_most: Self::DEFAULT_LOCK_AT_MOST_FOR,
            at_least: Duration::ZERO,
        }
    }

    /// The job's name, as given (ShedLock's lock name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Redis key: `<prefix>:<environment>:<name>`.
    pub fn key(&self) -> String {
        format!("{}:{}:{}", self.prefix, self.environment, self.name)
    }

    /// How long the lock lasts at most, from the start of a run (ShedLock's
    /// `lockAtMostFor`); [`DEFAULT_LOCK_AT_MOST_FOR`](Self::DEFAULT_LOCK_AT_MOST_FOR) unless set.
    #[must_use]
    pub fn lock_at_most_for(mut self, at_most: Duration) -> Self {
        self.at_most = at_most;
        self
    }

    /// How long the lock lasts at least, from the start of a run, however soon the job
    /// ends (ShedLock's `lockAtLeastFor`); zero unless set.
    #[must_use]
    pub fn lock_at_least_for(mut self, at_least: Duration) -> Self {
        self.at_least = at_least;
        self
    }

    /// The environment part of the key (the Java provider's `environment`),
    /// [`DEFAULT_ENVIRONMENT`](Self::DEFAULT_ENVIRONMENT) unless set.
    #[must_use]
    pub fn environment(mut self, environment: impl Into<String>) -> Self {
        self.environment = environment.into();
        self
    }

    /// The key's prefix (`RedisLockProvider.Builder.keyPrefix`; the Jedis and Lettuce
    /// providers always use [`DEFAULT_KEY_PREFIX`](Self::DEFAULT_KEY_PREFIX)).
    #[must_use]
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Runs `job` if the task is free: `Ok(Some(result))` when it ran under the lock,
    /// `Ok(None)` when it was skipped because another process (or thread) holds it.
    /// Never waits. When the job returns (or panics) the lock is released as ShedLock
    /// releases it: kept for what is left of `lock_at_least_for`, else deleted.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for an empty name, a zero `lock_at_most_for` or a
    /// `lock_at_least_for` longer than it (ShedLock refuses those too);
    /// [`Error::WrongType`] when the key is not a string; Redis, pool and shutdown errors
    /// from the acquire (the job did not run). After the job ran: [`Error::LockLost`]
    /// when the release found the key gone or holding another value (the job outlasted
    /// `lock_at_most_for`, or someone deleted the key), so it may not have run alone; a
    /// failed release is only logged, and the key expires at `lock_at_most_for`.
    pub fn run_if_free<T>(&self, job: impl FnOnce() -> T) -> Result<Option<T>> {
        self.validate()?;
        let key = self.key();
        if ACTIVE.with(|a| a.borrow().iter().any(|t| t.key == key)) {
            // This thread runs the job already, under this very lock (ShedLock's
            // `alreadyLockedBy`): run the nested call without a second lock.
            return Ok(Some(job()));
        }
        let Some(active) = self.acquire(key)? else {
            return Ok(None);
        };
        let running = Running::push(active);
        let value = job();
        match running.finish() {
            Ok(()) => Ok(Some(value)),
            Err(e) if e.is_not_held() => Err(e),
            Err(e) => {
                log::warn!(
                    "redmutex: releasing task lock {:?} failed, it expires at its \
                     lock_at_most_for: {e}",
                    short(&self.key())
                );
                Ok(Some(value))
            }
        }
    }

    /// Whether the calling thread runs a job under a task lock whose lease has not run
    /// out (ShedLock's `LockAssert.assertLocked()`, which only checks the first part).
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`] outside every job; [`Error::LockLost`] when the innermost
    /// job's `lock_at_most_for` (counted from the start of its run or its last extend)
    /// has passed, so another process may run it too.
    pub fn assert_locked() -> Result<()> {
        ACTIVE.with(|a| match a.borrow().last() {
            None => Err(Error::NotHeld {
                name: "(no task lock on this thread)".to_owned(),
            }),
            Some(t) if t.since.elapsed() >= t.at_most => Err(Error::LockLost {
                name: t.key.clone(),
            }),
            Some(_) => Ok(()),
        })
    }

    /// Extends the innermost task lock of the calling thread, from now: it lasts at most
    /// `at_most` and at least `at_least` more (ShedLock's
    /// `LockExtender.extendActiveLock`), for a job that finds it needs longer.
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`] outside every job; [`Error::Config`] as
    /// [`run_if_free`](Self::run_if_free) for the two durations; [`Error::LockLost`] when
    /// the key is gone or holds another value (nothing changed); Redis, pool and shutdown
    /// errors.
    pub fn extend_active_lock(at_most: Duration, at_least: Duration) -> Result<()> {
        check_durations("the active task lock", at_most, at_least)?;
        let at_most_ms = clock::lease_ms(at_most)?;
        let (core, key, value) = ACTIVE.with(|a| {
            a.borrow()
                .last()
                .map(|t| (Arc::clone(&t.core), t.key.clone(), t.value.clone()))
                .ok_or_else(|| Error::NotHeld {
                    name: "(no task lock on this thread)".to_owned(),
                })
        })?;
        let since = Instant::now();
        let ttl = core.run(&key, |c| {
            token::token_extend(c, &key, &value, at_most_ms, ExtendBy::Set)
        })?;
        if ttl <= 0 {
            return Err(Error::LockLost { name: key });
        }
        ACTIVE.with(|a| {
            if let Some(t) = a.borrow_mut().last_mut() {
                t.since = since;
                t.at_most = at_most;
                t.at_least = at_least;
            }
        });
        Ok(())
    }

    fn validate(&self) -> Result<()> {
        if self.name.is_empty() {
            return Err(Error::Config("a task lock's name must not be empty".into()));
        }
        check_durations(&self.name, self.at_most, self.at_least)
    }

    /// One `SET key value NX PX lock_at_most_for`: the run's lock, or `None` when
    /// another holds the task.
    fn acquire(&self, key: String) -> Result<Option<Active>> {
        let at_most_ms = clock::lease_ms(self.at_most)?;
        let value = shedlock_value();
        let since = Instant::now();
        let taken = match self
            .core
            .run(&key, |c| token::token_acquire(c, &key, &value, at_most_ms))
        {
            Ok(answer) => answer.is_none(),
            // The reply was lost: the value is ours alone, so the key tells whether the
            // SET ran.
            Err(e) if e.is_transient() => {
                let held: Option<String> = self
                    .core
                    .run(&key, |c| redis::cmd("GET").arg(&key).query(c))?;
                if held.as_deref() != Some(value.as_str()) {
                    return Err(e);
                }
                true
            }
            Err(e) => return Err(e),
        };
        Ok(taken.then(|| Active {
            core: Arc::clone(&self.core),
            key,
            value,
            since,
            at_most: self.at_most,
            at_least: self.at_least,
        }))
    }
}

/// ShedLock's rule for the two durations (`LockConfiguration`).
fn check_durations(name: &str, at_most: Duration, at_least: Duration) -> Result<()> {
    if at_most.is_zero() {
        return Err(Error::Config(format!(
            "task lock `{}`: lock_at_most_for must be at least 1 ms",
            short(name)
        )));
    }
    if at_least > at_most {
        return Err(Error::Config(format!(
            "task lock `{}`: lock_at_least_for ({at_least:?}) is longer than lock_at_most_for \
             ({at_most:?})",
            short(name)
        )));
    }
    Ok(())
}

/// The job running on this thread under its lock: popped and released when it ends,
/// also when the job panics.
struct Running {
    depth: usize,
    done: bool,
}

impl Running {
    fn push(active: Active) -> Self {
        let depth = ACTIVE.with(|a| {
            let mut a = a.borrow_mut();
            a.push(active);
            a.len()
        });
        Self { depth, done: false }
    }

    /// Pops this job's entry and releases its lock.
    fn finish(mut self) -> Result<()> {
        self.done = true;
        self.release()
    }

    fn release(&self) -> Result<()> {
        // Jobs nest strictly (each run pops what it pushed before returning), so this
        // job's entry is the last one.
        let Some(active) = ACTIVE.with(|a| {
            let mut a = a.borrow_mut();
            (a.len() == self.depth).then(|| a.pop()).flatten()
        }) else {
            return Ok(());
        };
        release(&active)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // The job panicked: release as if it had returned, and let the panic go on.
        if let Err(e) = self.release() {
            log::warn!("redmutex: releasing a task lock after its job panicked failed: {e}");
        }
    }
}

/// ShedLock's end of a run: the key lives on for what is left of `lock_at_least_for`,
/// else it is deleted; either only while it holds this run's value.
fn release(active: &Active) -> Result<()> {
    let Active {
        core, key, value, ..
    } = active;
    // Whole milliseconds left, truncated as ShedLock's `Duration.toMillis()` is: 0 means
    // the minimum has passed.
    let left = active.at_least.saturating_sub(active.since.elapsed());
    let keep_ms = clock::capped_ms(left);
    let lost = || Error::LockLost { name: key.clone() };
    if keep_ms > 0 {
        let ttl = core.run(key, |c| {
            token::token_extend(c, key, value, keep_ms, ExtendBy::Set)
        })?;
        return if ttl > 0 { Ok(()) } else { Err(lost()) };
    }
    // The token lock's channel: a redmutex `TokenLock` waiting on the same key wakes.
    let channel = names::token_channel(key);
    let publish = core.publish_command();
    match core.run(key, |c| {
        token::token_release(c, [key, &channel], value, publish)
    })? {
        TokenReleased::Deleted => Ok(()),
        TokenReleased::Other | TokenReleased::Gone => Err(lost()),
    }
}

/// A value in ShedLock's format: `ADDED:<UTC time with ms>@<hostname>:<uuid>`.
fn shedlock_value() -> String {
    let now = i64::try_from(clock::now_ms()).unwrap_or(i64::MAX);
    let id = uuid::Uuid::new_v4().hyphenated();
    format!("ADDED:{}@{}:{id}", crate::utc::timestamp(now), hostname())
}

/// This machine's name, as Java's `InetAddress.getLocalHost().getHostName()` mostly
/// gives it; `unknown` when it cannot be read (ShedLock's fallback too).
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_have_shedlocks_shape() {
        let value = shedlock_value();
        let rest = value.strip_prefix("ADDED:").unwrap();
        let (time, rest) = rest.split_once('@').unwrap();
        assert_eq!(time.len(), "2026-12-01T09:30:12.345Z".len(), "{time}");
        assert!(time.ends_with('Z'));
        let (host, id) = rest.rsplit_once(':').unwrap();
        assert!(!host.is_empty());
        assert_eq!(id.len(), 36, "{id}");
    }

    #[test]
    fn durations_follow_shedlocks_rules() {
        let one = Duration::from_secs(1);
        assert!(check_durations("j", one, one).is_ok());
        assert!(check_durations("j", one, Duration::ZERO).is_ok());
        assert!(matches!(
            check_durations("j", Duration::ZERO, Duration::ZERO),
            Err(Error::Config(_))
        ));
        assert!(matches!(
            check_durations("j", one, one * 2),
            Err(Error::Config(_))
        ));
    }

    #[test]
    fn outside_a_job_nothing_is_locked() {
        assert!(matches!(
            TaskLock::assert_locked(),
            Err(Error::NotHeld { .. })
        ));
        assert!(matches!(
            TaskLock::extend_active_lock(Duration::from_secs(1), Duration::ZERO),
            Err(Error::NotHeld { .. })
        ));
    }
}
