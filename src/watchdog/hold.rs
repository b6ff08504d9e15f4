//! What the client knows of one hold: whether it is still trusted, when its lease ends,
//! and who wants to hear when it is lost. Shared by a lock's guards and the watchdog.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, bounded};
use parking_lot::Mutex;

/// Why a hold is no longer trusted; see [`LockGuard::loss`](crate::LockGuard::loss).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Loss {
    /// Redis says the lock is gone or held by someone else.
    Lost,
    /// Renewal failed and the lease may end before the next attempt; the lock may
    /// already belong to someone else.
    PossiblyLost,
}

impl Loss {
    /// The `loss` label of the losses metric.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Lost => "lost",
            Self::PossiblyLost => "possibly_lost",
        }
    }
}

const HELD: u8 = 0;
const POSSIBLY_LOST: u8 = 1;
const LOST: u8 = 2;

/// One owner's holds on one lock, as this client knows them.
pub(crate) struct Hold {
    state: AtomicU8,
    /// When the lease ends at the latest, on this process's monotonic clock: measured
    /// from when the acquiring or renewing command was sent.
    lease_end: Mutex<Instant>,
    /// Told once, on the first loss.
    listeners: Mutex<Vec<Sender<Loss>>>,
    /// The lock's name as a metrics label, when the client labels with names.
    label: Option<Box<str>>,
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hold")
            .field("loss", &self.loss())
            .field("lease_end", &*self.lease_end.lock())
            .finish()
    }
}

impl Hold {
    /// A hold whose lease ends at `lease_end`; `label` is the lock name its loss is
    /// reported under in the metrics, if names are labels.
    pub(crate) fn new(lease_end: Instant, label: Option<&str>) -> Self {
        Self {
            state: AtomicU8::new(HELD),
            lease_end: Mutex::new(lease_end),
            listeners: Mutex::new(Vec::new()),
            label: label.map(Into::into),
        }
    }

    /// The loss recorded so far, if any.
    pub(crate) fn loss(&self) -> Option<Loss> {
        match self.state.load(Ordering::Acquire) {
            LOST => Some(Loss::Lost),
            POSSIBLY_LOST => Some(Loss::PossiblyLost),
            _ => None,
        }
    }

    pub(crate) fn lease_end(&self) -> Instant {
        *self.lease_end.lock()
    }

    /// Moves the lease end later; an earlier instant (a late reply of an older renewal)
    /// changes nothing.
    pub(crate) fn extend(&self, lease_end: Instant) {
        let mut end = self.lease_end.lock();
        if lease_end > *end {
            *end = lease_end;
        }
    }

    /// Sets the lease end to `lease_end`, earlier or later: for a hold whose lease was
    /// replaced by an explicit `PEXPIRE` (a MultiLock member's temporary lease).
    pub(crate) fn set_lease_end(&self, lease_end: Instant) {
        *self.lease_end.lock() = lease_end;
    }

    /// Records a loss and tells the listeners, once. `Lost` may follow `PossiblyLost`.
    pub(crate) fn mark(&self, loss: Loss) {
        let new = match loss {
            Loss::Lost => LOST,
            Loss::PossiblyLost => POSSIBLY_LOST,
        };
        // fetch_max: a hold only ever gets worse, and only the first change notifies.
        let old = self.state.fetch_max(new, Ordering::AcqRel);
        // Counted once per step down (held, possibly lost, lost), never per repeat.
        if old < new {
            crate::metrics::lost(loss.label(), self.label.as_deref());
        }
        if old == HELD {
            for listener in self.listeners.lock().drain(..) {
                let _ = listener.try_send(loss);
            }
        }
    }

    /// A receiver that gets one message at the first loss (at once if it already
    /// happened).
    pub(crate) fn subscribe(&self) -> Receiver<Loss> {
        let (tx, rx) = bounded(1);
        let mut listeners = self.listeners.lock();
        // Checked under the listener lock, which `mark` drains under: no loss can slip
        // between the check and the registration.
        match self.loss() {
            Some(loss) => {
                let _ = tx.try_send(loss);
            }
            None => listeners.push(tx),
        }
        rx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_only_gets_worse_and_tells_once() {
        let hold = Hold::new(Instant::now(), None);
        let early = hold.subscribe();
        hold.mark(Loss::PossiblyLost);
        hold.mark(Loss::Lost);
        assert_eq!(early.try_recv(), Ok(Loss::PossiblyLost));
        assert!(early.try_recv().is_err());
        assert_eq!(hold.loss(), Some(Loss::Lost));
        hold.mark(Loss::PossiblyLost);
        assert_eq!(hold.loss(), Some(Loss::Lost));
        assert_eq!(hold.subscribe().try_recv(), Ok(Loss::Lost));
    }
}
