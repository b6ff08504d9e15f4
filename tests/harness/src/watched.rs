//! Watching a watchdog hold for a while, on a machine that may be loaded.
//!
//! A renewed hold stays only as long as the holder's watchdog thread gets to run: on a
//! loaded machine it can be starved past its lease. The library's promise for that case
//! is not "the key stays" but "the guard says it may be lost before the key can be
//! gone" (the guard's `is_lost` applies the watchdog's warning margin to the lease end it
//! measured from the acquire or the last confirmed renewal, which is never later than
//! Redis's own expiry). [`watch_hold`] asserts exactly that: at every look the key still
//! holds the hold, or the guard already reported the loss.

use std::time::{Duration, Instant};

use redmutex::Loss;

/// For a hold whose key the test saw kept (there and renewed) the whole time: its guard
/// reports no loss, or a cautious one. A watchdog starved on a loaded machine past the
/// point where it could confirm a renewal in time says `PossiblyLost` and goes on
/// renewing; `Lost` (Redis said the hold is gone) would be wrong.
pub fn assert_kept_or_cautious(loss: Option<Loss>, what: &str) {
    assert!(
        matches!(loss, None | Some(Loss::PossiblyLost)),
        "{what}: the key stayed but the guard says {loss:?}"
    );
}

/// What [`watch_hold`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watched {
    /// The key held the hold at every look for the whole watch.
    Kept {
        /// How many looks there were.
        looks: u64,
        /// The lowest TTL seen, in milliseconds.
        lowest_ttl: i64,
        /// How many times the TTL rose between two looks (renewals seen).
        renewals: u64,
    },
    /// The key no longer held the hold at look `at_look`, `after` the watch began, and
    /// the guard had reported the loss by then.
    ReportedLost {
        /// The look that found the key gone.
        at_look: u64,
        /// When that was, from the watch's start.
        after: Duration,
    },
}

impl Watched {
    /// Whether the hold was kept for the whole watch.
    pub fn kept(&self) -> bool {
        matches!(self, Self::Kept { .. })
    }
}

/// Looks at a hold every `every` for `duration`: `look` returns the key's TTL in
/// milliseconds while the key still holds the hold (it may assert on it), `None` once it
/// does not. A look that finds it gone ends the watch, and then `is_lost` (the guard's)
/// must already say so: a hold gone without a report in time fails the test.
pub fn watch_hold(
    duration: Duration,
    every: Duration,
    look: impl FnMut() -> Option<i64>,
    is_lost: impl Fn() -> bool,
) -> Watched {
    watch_renewals(u64::MAX, duration, every, look, is_lost)
}

/// [`watch_hold`] that ends early, as [`Watched::Kept`], once it saw `wanted` renewals
/// (the TTL rose between two looks).
pub fn watch_renewals(
    wanted: u64,
    duration: Duration,
    every: Duration,
    mut look: impl FnMut() -> Option<i64>,
    is_lost: impl Fn() -> bool,
) -> Watched {
    let started = Instant::now();
    let end = started + duration;
    let (mut looks, mut lowest_ttl, mut renewals) = (0, i64::MAX, 0);
    let mut last = None;
    while Instant::now() < end {
        let Some(ttl) = look() else {
            let after = started.elapsed();
            assert!(
                is_lost(),
                "the key was gone at look {looks} ({after:?} in) and the guard had not \
                 reported the loss"
            );
            println!("the hold was reported lost and gone at look {looks} ({after:?} in)");
            return Watched::ReportedLost {
                at_look: looks,
                after,
            };
        };
        if last.is_some_and(|l| ttl > l) {
            renewals += 1;
        }
        last = Some(ttl);
        lowest_ttl = lowest_ttl.min(ttl);
        looks += 1;
        if renewals >= wanted {
            break;
        }
        // Sampling the key is the measurement itself here.
        std::thread::sleep(every);
    }
    Watched::Kept {
        looks,
        lowest_ttl,
        renewals,
    }
}

/// The TTL of `key` in milliseconds if it exists, read atomically with its existence
/// (`PTTL` answers -2 for a missing key): `None` once it is gone.
pub fn ttl_if_present(raw: &mut impl redis::ConnectionLike, key: &str) -> Option<i64> {
    let ttl: i64 = redis::cmd("PTTL").arg(key).query(raw).unwrap();
    (ttl != -2).then_some(ttl)
}
