//! What the waiters and the subscriber sessions share: every channel some thread waits
//! on, the node whose session subscribes it, and each session's state. One mutex guards
//! it all, so a waiter's decision (kick, publish or nothing) is consistent with what the
//! channel's session is doing.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::thread::JoinHandle;

use crossbeam_channel::Sender;
use parking_lot::Mutex;

use crate::transport::Routes;

/// Which waiters a message on a channel wakes (Redisson's `LockPubSub`,
/// `SemaphorePubSub` and `CountDownLatchPubSub`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WakeRule {
    /// "0" wakes one waiter, "1" wakes them all; other payloads are ignored. Locks, fair
    /// waiters' own channels and the read-write lock channel.
    Lock,
    /// A positive number says that permits were added or released: it wakes every
    /// waiter, and each retries once. The number is not a budget: Redisson publishes the
    /// new count from some calls and the number added or released from others, and the
    /// count may have changed again before a waiter retries, so no waiter can be left
    /// asleep on the strength of it. Anything else (0, a negative count after a
    /// reduction, text) says nothing was added and wakes none.
    Semaphore,
    /// "0" (the count reached zero) wakes them all; "1" (a new count) and anything else
    /// wake none.
    Latch,
}

/// State shared by waiters and the session threads.
pub(super) struct Shared {
    pub(super) registry: Mutex<Registry>,
    pub(super) client_id: String,
    pub(super) stop: AtomicBool,
    pub(super) routes: Routes,
    pub(super) threads: Mutex<Vec<JoinHandle<()>>>,
}

/// Waiters by channel, and the sessions (one per node) that hold the subscriptions.
pub(super) struct Registry {
    pub(super) channels: HashMap<String, Channel>,
    pub(super) sessions: HashMap<String, SessionState>,
    pub(super) next_waiter: u64,
}

/// One subscriber session's state, by the node's address.
pub(super) struct SessionState {
    /// Wakes the session's thread out of an idle or back-off wait.
    pub(super) kick: Sender<()>,
    pub(super) mode: Mode,
    /// True while the control channel's subscription is confirmed and not being dropped.
    pub(super) control_live: bool,
    /// `redmutex:pubsub:<client-id>:<node>`: a publish there ends the session's socket
    /// read, so a new channel is subscribed at once.
    pub(super) control: String,
    /// A waiter published on the control channel since the session's last pass over the
    /// registry: that publish will make the session pass again, so later waiters need
    /// not publish too (10,000 waiters arriving at once sent 10,000 publishes, and the
    /// session made a full pass for each). Cleared by the pass, under the registry lock,
    /// in the same critical section that reads the wanted channels.
    pub(super) poked: bool,
    /// Channels of this session whose state or waiters changed in a way the session has
    /// to act on (a new channel, a last waiter gone, a subscription to make again, a
    /// channel moved in or out). A pass triggered by an event looks only at these, so a
    /// wake-up among 10,000 subscribed channels costs the session O(1), not a walk over
    /// all of them. Whoever makes such a change pushes the name here under the registry
    /// lock; the session takes the list under the same lock in its pass.
    pub(super) dirty: Vec<String>,
}

/// Tells the session at `home` (if there is one) to look at `channel` in its next pass.
pub(super) fn touch(sessions: &mut HashMap<String, SessionState>, home: &str, channel: &str) {
    if let Some(s) = sessions.get_mut(home) {
        s.dirty.push(channel.to_owned());
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Idle,
    Listening,
    Reconnecting,
}

pub(super) struct Channel {
    pub(super) rule: WakeRule,
    pub(super) state: ChannelState,
    /// Someone already asked the session to subscribe this channel.
    pub(super) requested: bool,
    pub(super) waiters: Vec<Waiter>,
    /// The node whose session subscribes it (the owner of its slot in a cluster).
    pub(super) home: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ChannelState {
    /// Waiters exist; no subscription sent yet (or it has to be made again).
    Wanted,
    /// Subscriptions sent; their confirmation signals every waiter.
    Subscribing,
    /// Confirmed: messages are delivered.
    Subscribed,
    /// Unsubscribe sent because the last waiter left.
    Leaving,
    /// Redis refused the subscription (ACL); waiters fall back to TTL-bounded sleeps.
    Refused,
}

pub(super) struct Waiter {
    pub(super) id: u64,
    pub(super) signal: Sender<()>,
    /// An observer (a leader watch): told of every message, never one of the waiters a
    /// message wakes, so it cannot take a wake-up that a waiting thread needs.
    pub(super) observer: bool,
}

/// Wakes the first waiter that has no signal pending. A full buffer means that waiter
/// was already told and will retry anyway, so the wake-up goes to the next one.
/// Observers are skipped.
pub(super) fn wake_one(waiters: &[Waiter]) -> bool {
    waiters
        .iter()
        .filter(|w| !w.observer)
        .any(|w| w.signal.try_send(()).is_ok())
}

/// Tells every observer that a message came; a full buffer already says so.
pub(super) fn tell_observers(waiters: &[Waiter]) {
    for w in waiters.iter().filter(|w| w.observer) {
        let _ = w.signal.try_send(());
    }
}

/// Wakes every waiter; returns how many had no signal pending.
pub(super) fn wake_all(waiters: &[Waiter]) -> usize {
    waiters
        .iter()
        .filter(|w| w.signal.try_send(()).is_ok())
        .count()
}

/// What a message asks of a channel's waiters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wakes {
    None,
    One,
    All,
}

impl WakeRule {
    /// Which waiters `payload` wakes.
    pub(super) fn wakes(self, payload: &[u8]) -> Wakes {
        match (self, payload) {
            (Self::Lock, b"0") => Wakes::One,
            (Self::Lock, b"1") | (Self::Latch, b"0") => Wakes::All,
            (Self::Lock | Self::Latch, _) => Wakes::None,
            (Self::Semaphore, _) => {
                let added = std::str::from_utf8(payload)
                    .ok()
                    .and_then(|text| text.parse::<i64>().ok())
                    .is_some_and(|n| n > 0);
                if added { Wakes::All } else { Wakes::None }
            }
        }
    }
}

impl Registry {
    /// Hands one message to the waiters its channel's rule selects.
    pub(super) fn deliver(&self, channel: &str, payload: &[u8]) {
        // Messages on the control channels only exist to end the socket read.
        let Some(ch) = self.channels.get(channel) else {
            return;
        };
        let woken = match ch.rule.wakes(payload) {
            Wakes::None => 0,
            Wakes::One => usize::from(wake_one(&ch.waiters)),
            // A waiter whose buffer is full was told already and retries anyway, after
            // this message, so it sees whatever the message announced.
            Wakes::All => {
                let observers = ch.waiters.iter().filter(|w| w.observer).count();
                wake_all(&ch.waiters).saturating_sub(observers)
            }
        };
        tell_observers(&ch.waiters);
        crate::metrics::woken(woken);
    }

    /// Every subscription of the session at `addr` died with its connection: mark its
    /// channels wanted again and wake their waiters, since an unlock message may have
    /// been missed while the session was away.
    pub(super) fn connection_lost(&mut self, addr: &str) {
        if let Some(s) = self.sessions.get_mut(addr) {
            s.mode = Mode::Reconnecting;
            s.control_live = false;
        }
        self.channels.retain(|_, ch| {
            if ch.home != addr {
                return true;
            }
            if ch.waiters.is_empty() {
                return false;
            }
            ch.state = ChannelState::Wanted;
            ch.requested = true;
            wake_all(&ch.waiters);
            true
        });
    }

    /// The node at `addr` dropped `channel`'s subscription of its own accord (the slot
    /// moved away, or the node was demoted): subscribe it again where it lives now, and
    /// wake its waiters, whose unlock may have been published where we no longer listen.
    pub(super) fn dropped_by_server(&mut self, addr: &str, channel: &str) {
        if let Some(ch) = self.channels.get_mut(channel)
            && ch.home == addr
            && matches!(
                ch.state,
                ChannelState::Subscribed | ChannelState::Subscribing
            )
        {
            ch.state = ChannelState::Wanted;
            ch.requested = true;
            wake_all(&ch.waiters);
            touch(&mut self.sessions, addr, channel);
        }
    }

    /// Moves `channel` to the session at `to`; returns the session to kick (`None` when
    /// it has to be started first). Its waiters are woken: whatever was published while
    /// it was subscribed at the wrong node did not reach us.
    pub(super) fn move_channel(&mut self, channel: &str, to: &str) -> Option<Sender<()>> {
        let ch = self.channels.get_mut(channel)?;
        if ch.home == to {
            return None;
        }
        // The old session drops its subscription, the new one makes it.
        let from = std::mem::replace(&mut ch.home, to.to_owned());
        ch.state = ChannelState::Wanted;
        ch.requested = true;
        wake_all(&ch.waiters);
        touch(&mut self.sessions, &from, channel);
        touch(&mut self.sessions, to, channel);
        self.sessions.get(to).map(|s| s.kick.clone())
    }

    /// True when some channel with waiters lives at `addr`. Channels without waiters
    /// that need no unsubscribe are dropped on the way.
    pub(super) fn has_work(&mut self, addr: &str) -> bool {
        self.channels.retain(|_, ch| {
            !(ch.waiters.is_empty()
                && matches!(ch.state, ChannelState::Wanted | ChannelState::Refused))
        });
        self.channels.values().any(|ch| ch.home == addr)
    }
}
