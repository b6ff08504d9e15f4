//! The reentry policies: what a second acquisition by the thread that holds a lock does.
//! A type parameter of [`Reentrant`](super::Reentrant) and [`Fair`](super::Fair), as
//! lock_api's `RawReentrantMutex<R, G>` takes its policy, so the non-reentrant kinds are
//! the same kinds with one rule changed rather than copies that forward to them.

use crate::protocol::hash;

/// A reentry policy: [`Counted`] or [`Refused`]. Sealed: only this crate implements it.
pub trait Reentry: std::fmt::Debug + Send + Sync + 'static {
    /// Whether a re-entry counts one more hold; else it is refused.
    const COUNTS: bool;
    /// The public name of `Lock<Reentrant<Self>>`, for `Debug`, logs and metrics.
    const LOCK: &'static str;
    /// The public name of `Lock<Fair<Self>>`.
    const FAIR_LOCK: &'static str;
}

/// Every re-entry is one more hold, released one at a time (Redisson's `RLock` and
/// `RFairLock`). The default policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counted;

/// A re-entry fails at once with [`Error::AlreadyHeld`](crate::Error::AlreadyHeld) and
/// changes nothing (Redisson 4.4+'s non-reentrant locks, whose client throws
/// `IllegalMonitorStateException` there).
#[derive(Debug, Clone, Copy, Default)]
pub struct Refused;

impl Reentry for Counted {
    const COUNTS: bool = true;
    const LOCK: &'static str = "RLock";
    const FAIR_LOCK: &'static str = "RFairLock";
}

impl Reentry for Refused {
    const COUNTS: bool = false;
    const LOCK: &'static str = "RNonReentrantLock";
    const FAIR_LOCK: &'static str = "RNonReentrantFairLock";
}

/// The rule the acquire scripts get under policy `R`.
pub(crate) fn rule<R: Reentry>() -> hash::Reentry {
    if R::COUNTS {
        hash::Reentry::Counted
    } else {
        hash::Reentry::Refused
    }
}
