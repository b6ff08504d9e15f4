//! Redisson's waiting loop, written once for every lock kind, the semaphores and the
//! latch: try; if that fails, subscribe to the object's channel, then alternate sleeping
//! (until a wake-up, the retry bound the attempt gave, or the deadline) and trying. And
//! the one kind without messages, the spin lock: try, pause, try.

pub(crate) mod backoff;
pub(crate) mod cancel;

use std::time::{Duration, Instant};

use backoff::Pauses;

use crate::clock::{Wait, earliest};
use crate::core::Core;
use crate::error::{Error, Result};
use crate::pubsub::{Interest, Subscription, Woken};
use crate::transport;
use cancel::Cancel;

/// What one attempt found.
pub(crate) enum Attempt<T> {
    /// Got it.
    Done(T),
    /// Not yet; retry by this instant at the latest even without a message (`None`:
    /// only a message can help).
    RetryBy(Option<Instant>),
}

/// One attempt; if it fails and `wait` allows, subscribes to the interest's channel and
/// waits in turns until an attempt succeeds (`Some`) or the deadline passes (`None`).
///
/// The subscription is made before the second attempt, so no wake-up for a release that
/// Redis runs after that attempt can be missed (see [`wait_turns`]).
pub(crate) fn acquire_or_wait<T>(
    core: &Core,
    interest: Interest<'_>,
    wait: Wait,
    attempt: impl FnMut() -> Result<Attempt<T>>,
) -> Result<Option<T>> {
    acquire_or_wait_until(core, interest, wait, None, attempt)
}

/// [`acquire_or_wait`] that `cancel` ends with [`Error::Cancelled`]: at once if it is
/// cancelled already, else the moment it is while the waiter sleeps (see [`sleep`]). An
/// attempt is never cut short: its outcome, a grant included, is what the waiter returns.
pub(crate) fn acquire_or_wait_until<T>(
    core: &Core,
    interest: Interest<'_>,
    wait: Wait,
    cancel: Option<&Cancel>,
    mut attempt: impl FnMut() -> Result<Attempt<T>>,
) -> Result<Option<T>> {
    check(cancel)?;
    let retry_by = match outlive(attempt(), wait.deadline())? {
        Attempt::Done(t) => return Ok(Some(t)),
        Attempt::RetryBy(by) => by,
    };
    if matches!(wait, Wait::No) {
        return Ok(None);
    }
    let _waiting = (
        crate::metrics::Waiting::begin(),
        crate::futex_hash::Parked::begin(),
    );
    let subscription = core.subscribe(interest)?;
    wait_turns(
        &subscription,
        wait.deadline(),
        retry_by,
        false,
        cancel,
        attempt,
    )
}

/// How long a waiter pauses after an attempt that the deployment refused while changing
/// (see [`outlive`]) before it tries again.
const UNSETTLED_PAUSE: Duration = Duration::from_millis(100);

/// An attempt's outcome as a waiter with a deadline sees it: an error that says the
/// deployment is changing and nothing ran ([`Error::is_unsettled`]: a long slot migration
/// answers `TRYAGAIN` past the transport's retry budget) is one more failed attempt while
/// time is left, retried after [`UNSETTLED_PAUSE`]. Without a deadline (`lock()`) or
/// with the time up, the error goes to the caller: it is the only way such a caller can
/// learn the deployment is stuck.
fn outlive<T>(outcome: Result<Attempt<T>>, deadline: Option<Instant>) -> Result<Attempt<T>> {
    match outcome {
        Err(e) if e.is_unsettled() && deadline.is_some_and(|d| Instant::now() < d) => {
            log::debug!(
                "redmutex: an attempt was refused while the deployment changes ({e}); waiting on"
            );
            Ok(Attempt::RetryBy(
                Instant::now().checked_add(UNSETTLED_PAUSE),
            ))
        }
        other => other,
    }
}

/// `Err(Cancelled)` when `cancel` was cancelled.
fn check(cancel: Option<&Cancel>) -> Result<()> {
    match cancel {
        Some(c) if c.is_cancelled() => Err(Error::Cancelled),
        _ => Ok(()),
    }
}

/// Sleeps on `subscription` until a signal, `until` (`None`: no bound) or `cancel`,
/// whichever comes first; the cancel is [`Error::Cancelled`].
///
/// A cancel wakes the sleeper as a message does: both are a ready channel of one
/// `select`, so there is no polling and no window in which a cancel goes unheard (a
/// handle cancelled before the sleep is ready at once). A signal that came together with
/// the cancel stays buffered, and the subscription's drop hands it to the next waiter, so
/// a cancelled waiter swallows no release.
fn sleep(
    subscription: &Subscription,
    until: Option<Instant>,
    cancel: Option<&Cancel>,
) -> Result<Woken> {
    match cancel {
        None => Ok(subscription.wait(until)),
        Some(c) => subscription
            .wait_or_stop(until, c.receiver())
            .ok_or(Error::Cancelled),
    }
}

/// [`acquire_or_wait`] for a thread that owes the lock's woken waiters a courtesy (see
/// `fairness.rs`) until `hold_back`: instead of trying at once, it registers as a waiter
/// and sleeps until an unlock message or `hold_back` (or its deadline), then tries, and
/// from there on waits as every waiter does.
///
/// The waiter is registered after every waiter already there, and a message wakes the
/// first one without a pending signal, so a thread of this client that was already
/// waiting is woken before the courteous one.
///
/// Where the channel was already subscribed, the first signal comes at once and only says
/// so; it is taken, and the sleep waits for the next, a message (or a reconnect's
/// wake-up, which ends the courtesy early, harmlessly). Where the subscription is new,
/// the woken waiter may take and release the lock before it is confirmed, and that
/// release's message would not reach us: waiting on for another would idle the lock for
/// the whole window. So the attempt follows the confirmation instead; the subscribe round
/// trip it waited is about what the woken waiter needs to take the lock.
///
/// No wake-up is lost: if `hold_back` comes before the subscription is confirmed, the
/// confirmation is still buffered and brings one more attempt after it, as in
/// [`wait_turns`]; otherwise the attempt below already runs after it.
pub(crate) fn acquire_after_courtesy<T>(
    core: &Core,
    interest: Interest<'_>,
    wait: Wait,
    hold_back: Instant,
    cancel: Option<&Cancel>,
    mut attempt: impl FnMut() -> Result<Attempt<T>>,
) -> Result<Option<T>> {
    check(cancel)?;
    let deadline = wait.deadline();
    let _waiting = (
        crate::metrics::Waiting::begin(),
        crate::futex_hash::Parked::begin(),
    );
    let subscription = core.subscribe(interest)?;
    let until = earliest(Some(hold_back), deadline);
    let signals = if subscription.was_live() { 2 } else { 1 };
    for _ in 0..signals {
        match sleep(&subscription, until, cancel)? {
            Woken::Closed => return Err(Error::Shutdown),
            Woken::Timeout => break,
            Woken::Signal => {}
        }
    }
    // Whatever ended the courtesy, one attempt follows, even at the deadline: as a first
    // attempt it is owed to every acquisition, `tryLock(0)` included.
    match outlive(attempt(), deadline)? {
        Attempt::Done(t) => Ok(Some(t)),
        Attempt::RetryBy(by) => wait_turns(&subscription, deadline, by, true, cancel, attempt),
    }
}

/// Redisson's spin-lock loop, for objects whose releases publish nothing: one attempt,
/// then a pause from `pauses` and another attempt, until one succeeds (`Some`) or the
/// deadline passes (`None`). A pause that would end past the deadline is cut short
/// there, and the attempt at its end is the last. Nothing here can miss a release: each
/// attempt reads the lock itself, so one that follows a release sees it.
pub(crate) fn poll<T>(
    wait: Wait,
    mut pauses: Pauses,
    cancel: Option<&Cancel>,
    mut attempt: impl FnMut() -> Result<Attempt<T>>,
) -> Result<Option<T>> {
    check(cancel)?;
    let deadline = wait.deadline();
    if let Attempt::Done(t) = outlive(attempt(), deadline)? {
        return Ok(Some(t));
    }
    let _waiting = (!matches!(wait, Wait::No)).then(crate::metrics::Waiting::begin);
    loop {
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Ok(None);
        }
        let pause = pauses.next_pause();
        let wake = now
            .checked_add(pause)
            .map(|at| earliest(Some(at), deadline));
        let at = wake.flatten();
        match cancel {
            // The pause ends early, at once, when the handle is cancelled.
            Some(c) => {
                if c.sleep_until(at.or_else(|| now.checked_add(pause))) {
                    return Err(Error::Cancelled);
                }
            }
            None => std::thread::sleep(at.map_or(pause, |at| at.saturating_duration_since(now))),
        }
        if let Attempt::Done(t) = outlive(attempt(), deadline)? {
            return Ok(Some(t));
        }
    }
}

/// [`acquire_or_wait`] without a deadline: waits as long as it takes.
pub(crate) fn acquire_forever<T>(
    core: &Core,
    interest: Interest<'_>,
    attempt: impl FnMut() -> Result<Attempt<T>>,
) -> Result<T> {
    // Without a deadline the loop only ends with a success or an error (shutdown
    // included), so `None` cannot come back; it maps to `Shutdown` all the same rather
    // than to a panic.
    acquire_or_wait(core, interest, Wait::Forever, attempt)?.ok_or(Error::Shutdown)
}

/// Redisson's waiting loop, after a first failed attempt and with `subscription` already
/// registered: sleep until a signal, `retry_by` or the deadline, then try again, until an
/// attempt succeeds (`Some`) or the deadline passes (`None`).
///
/// The first signal comes when the listener has confirmed the channel's subscription, so
/// the first retry runs after it: any release that Redis runs after that retry publishes
/// a message that reaches us (see pubsub.rs), and a message that arrives between a retry
/// and the next sleep stays buffered. No wake-up is lost.
///
/// A sleep that ends at the deadline gives up without another attempt, as Redisson's
/// `tryLock` does; a fair waiter whose time is up leaves the queue and passes the turn
/// on rather than taking the lock late.
///
/// Retries after a wake-up (a message, a reconnect, the TTL) take the pool's urgent lane
/// ([`transport::urgent`]): a lock's hand-off waits on them, and they must not queue
/// behind the first attempts of thousands of threads that just started waiting. The
/// retry that follows the subscription's confirmation is such a first-comer's own second
/// attempt, so it waits its turn (`urgent_from_start` false), unless the caller's
/// subscription was confirmed before it came here.
///
/// A `cancel` ends only a sleep (see [`sleep`]): after a signal the attempt always
/// follows, since the signal may be the one wake-up a release sent, and a waiter that
/// took it must either use it or leave it to the next.
fn wait_turns<T>(
    subscription: &Subscription,
    deadline: Option<Instant>,
    mut retry_by: Option<Instant>,
    urgent_from_start: bool,
    cancel: Option<&Cancel>,
    mut attempt: impl FnMut() -> Result<Attempt<T>>,
) -> Result<Option<T>> {
    let mut urgent = urgent_from_start;
    let expired = || deadline.is_some_and(|d| Instant::now() >= d);
    loop {
        if expired() {
            return Ok(None);
        }
        match sleep(subscription, earliest(retry_by, deadline), cancel)? {
            Woken::Closed => return Err(Error::Shutdown),
            Woken::Timeout if expired() => return Ok(None),
            Woken::Signal | Woken::Timeout => {}
        }
        let outcome = if urgent {
            transport::urgent(&mut attempt)
        } else {
            attempt()
        };
        urgent = true;
        match outlive(outcome, deadline)? {
            Attempt::Done(t) => return Ok(Some(t)),
            Attempt::RetryBy(by) => retry_by = by,
        }
    }
}
