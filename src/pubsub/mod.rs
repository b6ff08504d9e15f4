//! The pub/sub listener: one dedicated connection and one thread per client, shared by
//! every thread of the client that waits for a lock.
//!
//! # How a waiter avoids a lost wake-up
//!
//! A waiter registers in the [`Registry`] and then waits for a signal before it retries
//! the acquire script. The listener sends the first signal only after Redis confirmed the
//! channel's `SUBSCRIBE`; replies and messages on one connection arrive in the order Redis
//! processed them, so every unlock that Redis runs after that retry is delivered to us.
//! Signals are buffered (a channel of capacity one per waiter), so a message that arrives
//! between the retry and the waiter's sleep is not lost either. If the subscription cannot
//! be made (server down, ACL), waiters still sleep at most the lock's TTL, as Redisson's
//! waiters do, so they make progress without messages.
//!
//! # Listener states
//!
//! | mode           | listener thread is blocked on          | a new channel is requested by |
//! |----------------|----------------------------------------|-------------------------------|
//! | `Idle`         | the kick channel (no subscriptions)    | a kick                        |
//! | `Listening`    | the socket, with a short read timeout  | `PUBLISH` on the control channel |
//! | `Reconnecting` | the kick channel, with a back-off      | a kick                        |
//!
//! The control channel (`redmutex:pubsub:<client-id>`) is subscribed only while some lock
//! channel is, so an idle client has no subscriptions and sends no commands. The short
//! read timeout in `Listening` is only a local timer: it lets the listener drop channels
//! whose last waiter left, notice shutdown, and recover if a control message is lost; it
//! never sits on the path of a wake-up or of a new subscription.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded};
use parking_lot::Mutex;

use crate::error::{Error, Result, is_connection_error};
use crate::transport::{Connector, Node};

/// How long the listener sleeps on the socket before it looks at the registry again.
const LINGER: Duration = Duration::from_millis(100);
/// Longest pause between reconnect attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Which waiters a message on a channel wakes (Redisson's `LockPubSub`,
/// `SemaphorePubSub` and `CountDownLatchPubSub`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WakeRule {
    /// "0" wakes one waiter, "1" wakes them all; other payloads are ignored. Locks, fair
    /// waiters' own channels and the read-write lock channel.
    Lock,
    /// The payload is a permit count n: it wakes waiters in order while their needs fit
    /// in n, so single-permit waiters get min(n, waiters) wake-ups, as Redisson's latch
    /// semaphore hands out n permits. A payload that is not a positive integer wakes none.
    Semaphore,
    /// "0" (the count reached zero) wakes them all; "1" (a new count) and anything else
    /// wake none.
    Latch,
}

/// What a waiter listens for: a channel, the rule its messages follow, and how many
/// permits the waiter needs (1 for everything but multi-permit semaphore waits).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Interest<'a> {
    pub(crate) channel: &'a str,
    pub(crate) rule: WakeRule,
    pub(crate) need: u64,
}

/// What a message asks of a channel's waiters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wakes {
    None,
    One,
    All,
    /// Waiters whose needs add up to at most this many permits.
    Permits(u64),
}

impl WakeRule {
    /// Which waiters `payload` wakes.
    fn wakes(self, payload: &[u8]) -> Wakes {
        match (self, payload) {
            (Self::Lock, b"0") => Wakes::One,
            (Self::Lock, b"1") | (Self::Latch, b"0") => Wakes::All,
            (Self::Lock | Self::Latch, _) => Wakes::None,
            (Self::Semaphore, _) => std::str::from_utf8(payload)
                .ok()
                .and_then(|text| text.parse::<i64>().ok())
                .and_then(|n| u64::try_from(n).ok())
                .map_or(Wakes::None, Wakes::Permits),
        }
    }
}

/// Handle to the listener thread; owned by the client.
pub(crate) struct Listener {
    shared: Arc<Shared>,
    /// The node whose subscriptions this listener holds; its pool carries the control
    /// publishes.
    node: Arc<Node>,
    kick: Sender<()>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("control", &self.shared.control)
            .finish_non_exhaustive()
    }
}

/// State shared by waiters and the listener thread.
struct Shared {
    registry: Mutex<Registry>,
    control: String,
    stop: AtomicBool,
}

/// Waiters by channel, plus what the listener is doing; one mutex guards it all so that a
/// waiter's decision (kick, publish or nothing) is consistent with the listener's mode.
struct Registry {
    channels: HashMap<String, Channel>,
    mode: Mode,
    /// True while the control channel's subscription is confirmed and not being dropped.
    control_live: bool,
    next_waiter: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Idle,
    Listening,
    Reconnecting,
}

struct Channel {
    rule: WakeRule,
    state: ChannelState,
    /// Someone already asked the listener to subscribe this channel.
    requested: bool,
    waiters: Vec<Waiter>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChannelState {
    /// Waiters exist; no SUBSCRIBE sent yet.
    Wanted,
    /// SUBSCRIBE sent; its confirmation signals every waiter.
    Subscribing,
    /// Confirmed: messages are delivered.
    Subscribed,
    /// UNSUBSCRIBE sent because the last waiter left.
    Leaving,
    /// Redis refused the subscription (ACL); waiters fall back to TTL-bounded sleeps.
    Refused,
}

struct Waiter {
    id: u64,
    signal: Sender<()>,
    /// Permits this waiter needs; 1 for everything but multi-permit semaphore waits.
    need: u64,
}

/// Wakes the first waiter that has no signal pending. A full buffer means that waiter
/// was already told and will retry anyway, so the wake-up goes to the next one.
fn wake_one(waiters: &[Waiter]) -> bool {
    waiters.iter().any(|w| w.signal.try_send(()).is_ok())
}

fn wake_all(waiters: &[Waiter]) {
    for w in waiters {
        let _ = w.signal.try_send(());
    }
}

impl Listener {
    /// Starts the listener thread. It opens its connection only when the first waiter
    /// needs it.
    pub(crate) fn start(client_id: &str, node: Arc<Node>) -> Result<Self> {
        let shared = Arc::new(Shared {
            registry: Mutex::new(Registry {
                channels: HashMap::new(),
                mode: Mode::Idle,
                control_live: false,
                next_waiter: 0,
            }),
            control: format!("redmutex:pubsub:{client_id}"),
            stop: AtomicBool::new(false),
        });
        // Capacity one: a kick only says "look at the registry"; more would be redundant.
        let (kick, kicked) = bounded(1);
        let thread_shared = Arc::clone(&shared);
        let connector = node.connector().clone();
        let thread = std::thread::Builder::new()
            .name("redmutex-pubsub".into())
            .spawn(move || run(&thread_shared, &connector, &kicked))?;
        Ok(Self {
            shared,
            node,
            kick,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Registers the calling thread as a waiter on the interest's channel. The returned
    /// subscription is signalled once the channel is subscribed (at once if it already
    /// is), then on every message its rule says should wake it, and after a reconnect. A
    /// [`WakeRule::Semaphore`] message wakes it only when its count covers the need.
    pub(crate) fn subscribe(&self, interest: Interest<'_>) -> Result<Subscription> {
        let Interest {
            channel,
            rule,
            need,
        } = interest;
        if self.shared.stop.load(Ordering::Acquire) {
            return Err(Error::Shutdown);
        }
        let (signal, signals) = bounded(1);
        let (id, action) = {
            let mut reg = self.shared.registry.lock();
            let id = reg.next_waiter;
            reg.next_waiter += 1;
            let (mode, control_live) = (reg.mode, reg.control_live);
            let ch = reg
                .channels
                .entry(channel.to_owned())
                .or_insert_with(|| Channel {
                    rule,
                    state: ChannelState::Wanted,
                    requested: false,
                    waiters: Vec::new(),
                });
            let action = action_for(ch.state, ch.requested, mode, control_live);
            match action {
                // Already confirmed (or known to be impossible): retry at once.
                Action::SignalNow => {
                    let _ = signal.try_send(());
                }
                Action::Kick | Action::Publish => ch.requested = true,
                Action::None => {}
            }
            ch.waiters.push(Waiter {
                id,
                signal,
                need: need.max(1),
            });
            (id, action)
        };
        match action {
            Action::Kick => {
                let _ = self.kick.try_send(());
            }
            Action::Publish => self.publish_control(),
            Action::SignalNow | Action::None => {}
        }
        Ok(Subscription {
            shared: Arc::clone(&self.shared),
            channel: channel.to_owned(),
            id,
            signals,
        })
    }

    /// Wakes the listener out of its socket read. Best effort: if it fails, the listener
    /// still re-plans after its read timeout.
    fn publish_control(&self) {
        if let Err(e) = self.node.publish(&self.shared.control, "0") {
            log::debug!("redmutex: control publish failed, listener re-plans on its timer: {e}");
        }
    }

    /// Stops the thread and waits for it. Waiters still registered are woken and then see
    /// [`Error::Shutdown`].
    pub(crate) fn shutdown(&self) {
        self.shared.stop.store(true, Ordering::Release);
        let _ = self.kick.try_send(());
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
    }
}

/// What a new waiter must do so that its channel gets subscribed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// Nothing: the subscription is on its way, or someone already asked for it.
    None,
    /// The channel is subscribed (or refused): signal the waiter at once.
    SignalNow,
    /// Wake an idle or reconnecting listener through its kick channel.
    Kick,
    /// End a listening listener's socket read with a control-channel publish.
    Publish,
}

/// The decision of [`Listener::subscribe_needing`] for a channel in `state`.
fn action_for(state: ChannelState, requested: bool, mode: Mode, control_live: bool) -> Action {
    match state {
        ChannelState::Subscribed | ChannelState::Refused => Action::SignalNow,
        // A reply is on its way; the listener re-plans when it arrives.
        ChannelState::Subscribing | ChannelState::Leaving => Action::None,
        ChannelState::Wanted if requested => Action::None,
        ChannelState::Wanted => match mode {
            Mode::Idle | Mode::Reconnecting => Action::Kick,
            Mode::Listening if control_live => Action::Publish,
            // The control subscription is being made or dropped: its reply makes the
            // listener re-plan.
            Mode::Listening => Action::None,
        },
    }
}

/// One waiter's registration on a channel; dropping it deregisters the waiter.
pub(crate) struct Subscription {
    shared: Arc<Shared>,
    channel: String,
    id: u64,
    signals: Receiver<()>,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("channel", &self.channel)
            .field("id", &self.id)
            .finish()
    }
}

/// Why [`Subscription::wait`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Woken {
    /// A signal: subscription confirmed, a message, or a reconnect.
    Signal,
    /// The deadline passed.
    Timeout,
    /// The listener stopped.
    Closed,
}

impl Subscription {
    /// Sleeps until a signal or `deadline` (`None`: no deadline).
    pub(crate) fn wait(&self, deadline: Option<Instant>) -> Woken {
        let got = match deadline {
            Some(d) => self.signals.recv_deadline(d).map_err(|e| e.is_timeout()),
            None => self.signals.recv().map_err(|_| false),
        };
        match got {
            Ok(()) => Woken::Signal,
            Err(true) => Woken::Timeout,
            Err(false) => Woken::Closed,
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut reg = self.shared.registry.lock();
        if let Some(ch) = reg.channels.get_mut(&self.channel) {
            ch.waiters.retain(|w| w.id != self.id);
            // A wake-up this waiter never used goes to the next waiter, so a release is
            // not swallowed by a waiter that gave up or got the lock another way.
            if self.signals.try_recv().is_ok() {
                wake_one(&ch.waiters);
            }
        }
        // The listener unsubscribes an empty channel on its next pass (within LINGER).
    }
}

/// What one pass over the registry asks the listener to do.
enum Plan {
    Idle,
    Listen,
    Change(Change),
}

fn plan(shared: &Shared, control_on: bool) -> Plan {
    let mut reg = shared.registry.lock();
    let mut subscribe = Vec::new();
    let mut unsubscribe = Vec::new();
    reg.channels.retain(|name, ch| match ch.state {
        ChannelState::Wanted | ChannelState::Refused if ch.waiters.is_empty() => false,
        ChannelState::Wanted => {
            ch.state = ChannelState::Subscribing;
            subscribe.push(name.clone());
            true
        }
        ChannelState::Subscribed if ch.waiters.is_empty() => {
            ch.state = ChannelState::Leaving;
            unsubscribe.push(name.clone());
            true
        }
        _ => true,
    });
    let want_control = !reg.channels.is_empty();
    if subscribe.is_empty() && unsubscribe.is_empty() && want_control == control_on {
        reg.mode = if want_control {
            Mode::Listening
        } else {
            Mode::Idle
        };
        return if want_control {
            Plan::Listen
        } else {
            Plan::Idle
        };
    }
    reg.mode = Mode::Listening;
    if !want_control {
        // From here on a PUBLISH on the control channel might not reach us.
        reg.control_live = false;
    }
    Plan::Change(Change {
        subscribe,
        unsubscribe,
        control: (want_control != control_on).then_some(want_control),
    })
}

/// Drops channels nobody waits on; true if any remain. When none do, the mode becomes
/// `Idle` under the same lock, so a waiter that registers afterwards sends a kick.
fn has_waiters(shared: &Shared) -> bool {
    let mut reg = shared.registry.lock();
    reg.channels.retain(|_, ch| !ch.waiters.is_empty());
    if reg.channels.is_empty() {
        reg.mode = Mode::Idle;
        return false;
    }
    true
}

/// How a session with one connection ended.
enum End {
    Stopped,
    Broken(redis::RedisError),
}

fn run(shared: &Shared, connector: &Connector, kicked: &Receiver<()>) {
    let mut backoff = Duration::from_millis(50);
    loop {
        if shared.stop.load(Ordering::Acquire) {
            break;
        }
        // No connection is opened until some thread waits.
        if !has_waiters(shared) {
            if kicked.recv().is_err() {
                break;
            }
            continue;
        }
        let mut conn = match connector.connect() {
            Ok(conn) => conn,
            Err(e) => {
                connection_lost(shared, &e);
                if let Err(RecvTimeoutError::Disconnected) = kicked.recv_timeout(backoff) {
                    break;
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        backoff = Duration::from_millis(50);
        match session(shared, &mut conn, kicked, connector.response_timeout()) {
            End::Stopped => break,
            End::Broken(e) => connection_lost(shared, &e),
        }
    }
    // Dropping every waiter's sender tells waiters still sleeping that we are gone.
    shared.registry.lock().channels.clear();
}

/// Every subscription died with the connection: mark them wanted again and wake every
/// waiter, since an unlock message may have been missed while we were away.
fn connection_lost(shared: &Shared, err: &redis::RedisError) {
    log::warn!("redmutex: pub/sub connection lost, resubscribing: {err}");
    let mut reg = shared.registry.lock();
    reg.mode = Mode::Reconnecting;
    reg.control_live = false;
    reg.channels.retain(|_, ch| {
        if ch.waiters.is_empty() {
            return false;
        }
        ch.state = ChannelState::Wanted;
        ch.requested = true;
        wake_all(&ch.waiters);
        true
    });
}

fn session(
    shared: &Shared,
    conn: &mut redis::Connection,
    kicked: &Receiver<()>,
    response_timeout: Duration,
) -> End {
    let mut ps = conn.as_pubsub();
    let mut control_on = false;
    if let Err(e) = ps.set_read_timeout(Some(LINGER)) {
        return End::Broken(e);
    }
    loop {
        if shared.stop.load(Ordering::Acquire) {
            return End::Stopped;
        }
        match plan(shared, control_on) {
            Plan::Idle => {
                // Connection kept open but unsubscribed: nothing to read until a kick.
                if kicked.recv().is_err() {
                    return End::Stopped;
                }
            }
            Plan::Listen => match ps.get_message() {
                Ok(msg) => deliver(shared, msg.get_channel_name(), msg.get_payload_bytes()),
                Err(e) if e.is_timeout() => {}
                Err(e) => return End::Broken(e),
            },
            Plan::Change(change) => {
                if let Err(e) = apply_change(shared, &mut ps, &change, response_timeout) {
                    return End::Broken(e);
                }
                if let Some(on) = change.control {
                    control_on = on;
                }
            }
        }
    }
}

/// The subscriptions one pass asks for.
struct Change {
    subscribe: Vec<String>,
    unsubscribe: Vec<String>,
    /// Subscribe (true) or drop (false) the control channel; `None`: leave it.
    control: Option<bool>,
}

/// Sends the (un)subscribe commands of one pass and records their confirmations. An
/// error is a broken connection; a refusal (ACL) marks the channel `Refused`.
fn apply_change(
    shared: &Shared,
    ps: &mut redis::PubSub<'_>,
    change: &Change,
    response_timeout: Duration,
) -> redis::RedisResult<()> {
    // Confirmations are read with the response timeout; a timeout here leaves the reply
    // stream out of step, so it counts as a broken connection.
    ps.set_read_timeout(Some(response_timeout))?;
    if change.control == Some(true) {
        // One channel per command keeps one reply per request, so every confirmation we
        // read belongs to the command we just sent.
        ps.subscribe(&shared.control)?;
        shared.registry.lock().control_live = true;
    }
    for name in &change.subscribe {
        let result = ps.subscribe(name);
        let refused = match result {
            Ok(()) => false,
            Err(e) if is_connection_error(&e) => return Err(e),
            Err(e) => {
                log::warn!(
                    "redmutex: cannot subscribe to {name}, waiters fall back to TTL waits: {e}"
                );
                true
            }
        };
        let mut reg = shared.registry.lock();
        if let Some(ch) = reg.channels.get_mut(name) {
            ch.state = if refused {
                ChannelState::Refused
            } else {
                ChannelState::Subscribed
            };
            wake_all(&ch.waiters);
        }
    }
    for name in &change.unsubscribe {
        ps.unsubscribe(name)?;
        let mut reg = shared.registry.lock();
        let empty = reg
            .channels
            .get(name)
            .is_some_and(|ch| ch.waiters.is_empty());
        if empty {
            reg.channels.remove(name);
        } else if let Some(ch) = reg.channels.get_mut(name) {
            // A waiter arrived while we were leaving: subscribe again.
            ch.state = ChannelState::Wanted;
            ch.requested = true;
        }
    }
    if change.control == Some(false) {
        ps.unsubscribe(&shared.control)?;
    }
    ps.set_read_timeout(Some(LINGER))
}

/// Hands one message to the waiters its channel's rule selects.
fn deliver(shared: &Shared, channel: &str, payload: &[u8]) {
    let reg = shared.registry.lock();
    // Messages on the control channel only exist to end the socket read.
    let Some(ch) = reg.channels.get(channel) else {
        return;
    };
    match ch.rule.wakes(payload) {
        Wakes::None => {}
        Wakes::One => {
            wake_one(&ch.waiters);
        }
        Wakes::All => wake_all(&ch.waiters),
        Wakes::Permits(mut left) => {
            // In registration order, like the FIFO hand-out of Redisson's latch
            // semaphore; a waiter already told (full buffer) will retry anyway and
            // takes nothing from the count.
            for w in &ch.waiters {
                if w.need <= left && w.signal.try_send(()).is_ok() {
                    left -= w.need;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_read_redissons_payloads() {
        assert_eq!(WakeRule::Lock.wakes(b"0"), Wakes::One);
        assert_eq!(WakeRule::Lock.wakes(b"1"), Wakes::All);
        assert_eq!(WakeRule::Lock.wakes(b"2"), Wakes::None);
        assert_eq!(WakeRule::Latch.wakes(b"0"), Wakes::All);
        assert_eq!(WakeRule::Latch.wakes(b"1"), Wakes::None);
        assert_eq!(WakeRule::Semaphore.wakes(b"3"), Wakes::Permits(3));
        assert_eq!(WakeRule::Semaphore.wakes(b"0"), Wakes::Permits(0));
        assert_eq!(WakeRule::Semaphore.wakes(b"-2"), Wakes::None);
        assert_eq!(WakeRule::Semaphore.wakes(b"x"), Wakes::None);
    }

    #[test]
    fn a_new_waiter_asks_for_its_channel_once_and_the_right_way() {
        use ChannelState::*;
        assert_eq!(
            action_for(Subscribed, true, Mode::Listening, true),
            Action::SignalNow
        );
        assert_eq!(
            action_for(Refused, true, Mode::Idle, false),
            Action::SignalNow
        );
        assert_eq!(
            action_for(Subscribing, true, Mode::Listening, true),
            Action::None
        );
        assert_eq!(
            action_for(Leaving, true, Mode::Listening, true),
            Action::None
        );
        assert_eq!(action_for(Wanted, true, Mode::Idle, false), Action::None);
        assert_eq!(action_for(Wanted, false, Mode::Idle, false), Action::Kick);
        assert_eq!(
            action_for(Wanted, false, Mode::Reconnecting, false),
            Action::Kick
        );
        assert_eq!(
            action_for(Wanted, false, Mode::Listening, true),
            Action::Publish
        );
        assert_eq!(
            action_for(Wanted, false, Mode::Listening, false),
            Action::None
        );
    }

    #[test]
    fn a_permit_count_wakes_the_waiters_it_can_serve() {
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..4).map(|_| bounded(1)).unzip();
        let needs = [2, 1, 1, 1];
        let waiters: Vec<Waiter> = senders
            .into_iter()
            .zip(needs)
            .enumerate()
            .map(|(i, (signal, need))| Waiter {
                id: i as u64,
                signal,
                need,
            })
            .collect();
        let mut registry = HashMap::new();
        registry.insert(
            "c".to_owned(),
            Channel {
                rule: WakeRule::Semaphore,
                state: ChannelState::Subscribed,
                requested: true,
                waiters,
            },
        );
        let shared = Shared {
            registry: Mutex::new(Registry {
                channels: registry,
                mode: Mode::Listening,
                control_live: true,
                next_waiter: 4,
            }),
            control: String::new(),
            stop: AtomicBool::new(false),
        };
        deliver(&shared, "c", b"1");
        let woken: Vec<bool> = receivers.iter().map(|r| r.try_recv().is_ok()).collect();
        assert_eq!(woken, [false, true, false, false]);
        deliver(&shared, "c", b"3");
        let woken: Vec<bool> = receivers.iter().map(|r| r.try_recv().is_ok()).collect();
        assert_eq!(woken, [true, true, false, false]);
    }
}
