//! What a guard knows of its hold.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::watchdog::hold::{Hold, Loss};
use crate::watchdog::{Renewal, Watchdog};

/// What a guard knows of its hold: the state it shares with the watchdog, whether the
/// watchdog renews it, and how early an unconfirmed renewal counts as possibly lost.
#[derive(Debug)]
pub(crate) struct HoldState {
    hold: Arc<Hold>,
    pub(crate) renewed: bool,
    /// The watchdog's warning margin (see `watchdog::warning_margin`), so that the guard
    /// applies the watchdog's own loss rule without asking it.
    margin: Duration,
}

impl HoldState {
    /// The state of a hold whose lease ends at `lease_end` at the latest: under the
    /// watchdog when `renewed`, else a fixed lease that nobody renews.
    pub(crate) fn until(
        watchdog: &Watchdog,
        renewal: (Renewal, &str, &str),
        renewed: bool,
        lease_end: Instant,
    ) -> Self {
        let (kind, name, owner) = renewal;
        let hold = if renewed {
            watchdog.register(kind, name, owner, lease_end)
        } else {
            Arc::new(Hold::new(lease_end, watchdog.label(name)))
        };
        Self {
            hold,
            renewed,
            margin: watchdog.margin(),
        }
    }

    pub(crate) fn hold(&self) -> &Hold {
        &self.hold
    }

    /// Why the hold is no longer trusted, if it is not: the watchdog's verdict, or the
    /// lease end known locally (from the acquire, or from the last renewal Redis
    /// confirmed). The local check is what tells a process that was frozen (a GC pause,
    /// SIGSTOP) longer than its lease, the moment it runs again.
    pub(crate) fn loss(&self) -> Option<Loss> {
        if let Some(loss) = self.hold.loss() {
            return Some(loss);
        }
        let now = Instant::now();
        if !self.renewed {
            return (now >= self.hold.lease_end()).then_some(Loss::Lost);
        }
        // The watchdog's rule (watchdog::warn_overdue): presumed lost when no renewal
        // has been confirmed `margin` before the end.
        let warn_at = self.hold.lease_end().checked_sub(self.margin);
        warn_at
            .is_none_or(|at| now >= at)
            .then_some(Loss::PossiblyLost)
    }
}
