//! One subscriber session: the thread that holds the subscriptions of the channels that
//! live on one node, over one dedicated RESP3 connection.
//!
//! # Reading the connection
//!
//! The connection speaks RESP3, where every message (`message`, `smessage`) and every
//! subscription change (`subscribe`, `ssubscribe`, their unsubscribes, solicited or not)
//! is a push frame, and only errors are replies. redis-rs hands every push frame to the
//! push sender in the order it read them, so the session takes all events from that one
//! queue, in the server's order.
//!
//! Two reads drive the socket. While listening, `PubSub::get_message` with a short read
//! timeout: its timeout leaves the connection in step. While waiting for the
//! confirmation of a command it sent, `recv_response` with the response timeout, which
//! also surfaces error replies (`MOVED` for a sharded subscription on the wrong node,
//! an ACL refusal); its timeout counts as a broken connection, since redis-rs would
//! then skip the next reply. Each command names one channel, so one reply answers it;
//! the commands of one pass go out pipelined (up to [`PIPELINE`] per write), and their
//! replies, which Redis sends in the order of the commands, are matched in turn.
//!
//! # Moves
//!
//! A channel lives where its slot's master is. It moves when a `SSUBSCRIBE` answers
//! `MOVED`, when the node drops a sharded subscription by itself (an unsolicited
//! `sunsubscribe`: the slot migrated away, or a failover demoted the node), when the
//! connection fails, and when the transport's topology generation changes. Each time its
//! waiters are woken (an unlock may have been published where we no longer listened),
//! and the channel is subscribed again where it lives now, whose confirmation wakes them
//! once more: any unlock after that retry reaches the new subscription.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, bounded};
use redis::{ErrorKind, PushInfo, PushKind, RedisError, ServerErrorKind, Value};

use super::registry::{Channel, ChannelState, Mode, Registry, SessionState, Shared, touch};
use super::teller::Teller;
use crate::error::is_connection_error;
use crate::transport::Kinds;

/// Makes sure a session serves the node at `addr`, starting its thread if none does
/// (under the registry lock, so a retiring session and a new waiter cannot cross).
/// False if the thread could not be started.
pub(super) fn ensure_session(shared: &Arc<Shared>, reg: &mut Registry, addr: &str) -> bool {
    if reg.sessions.contains_key(addr) {
        return true;
    }
    if shared.stop.load(Ordering::Acquire) {
        return false;
    }
    // Capacity one: a kick only says "look at the registry"; more would be redundant.
    let (kick, kicked) = bounded(1);
    let thread_shared = Arc::clone(shared);
    let thread_addr = addr.to_owned();
    let spawned = std::thread::Builder::new()
        .name("redmutex-pubsub".into())
        .spawn(move || run(&thread_shared, &thread_addr, &kicked));
    match spawned {
        Ok(thread) => {
            let mut threads = shared.threads.lock();
            threads.retain(|t| !t.is_finished());
            threads.push(thread);
        }
        Err(e) => {
            log::warn!("redmutex: cannot start a pub/sub thread for {addr}: {e}");
            return false;
        }
    }
    reg.sessions.insert(
        addr.to_owned(),
        SessionState {
            kick,
            mode: Mode::Idle,
            control_live: false,
            control: format!("redmutex:pubsub:{}:{addr}", shared.client_id),
            poked: false,
            dirty: Vec::new(),
        },
    );
    true
}

/// How long the session sleeps on the socket before it looks at the registry again.
const LINGER: Duration = Duration::from_millis(100);
/// Longest pause between reconnect attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// How often a session whose node is down looks for a new slot map during its back-off.
const MAP_CHECK: Duration = Duration::from_millis(50);
/// How often an idle session checks whether its node still matters.
const IDLE_RECHECK: Duration = Duration::from_secs(30);

/// How a session with one connection ended.
enum End {
    Stopped,
    /// No channel lives here and the node no longer serves slots.
    Retired,
    Broken(RedisError),
}

/// The thread of the session for the node at `addr`.
pub(super) fn run(shared: &Arc<Shared>, addr: &str, kicked: &Receiver<()>) {
    let mut backoff = Duration::from_millis(50);
    // Whether the last connection broke (or could not be opened): the next one that
    // opens is a reconnect.
    let mut broken = false;
    loop {
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        // No connection is opened until some thread waits on a channel here.
        {
            let mut reg = shared.registry.lock();
            if !reg.has_work(addr) {
                if !shared.routes.is_current(addr) {
                    // Removed under the lock that waiters create sessions under, so a
                    // waiter arriving now starts a new session instead of kicking this
                    // one.
                    reg.sessions.remove(addr);
                    return;
                }
                if let Some(s) = reg.sessions.get_mut(addr) {
                    s.mode = Mode::Idle;
                }
                drop(reg);
                if let Err(RecvTimeoutError::Disconnected) = kicked.recv_timeout(IDLE_RECHECK) {
                    return;
                }
                continue;
            }
        }
        let connected = shared
            .routes
            .home_at(addr)
            .map_err(|e| RedisError::from((ErrorKind::Client, "no node", e.to_string())))
            .and_then(|home| Ok((home.connector.connect()?, home.connector)));
        let (conn, connector) = match connected {
            Ok(c) => c,
            Err(e) => {
                broken = true;
                lost(shared, addr, &e);
                rehome(shared, addr);
                if !pause_unless_remapped(shared, kicked, backoff) {
                    return;
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        backoff = Duration::from_millis(50);
        if std::mem::take(&mut broken) {
            crate::metrics::pubsub_reconnected();
        }
        let mut session = Session::new(shared, addr, conn, connector.response_timeout());
        match session.run(kicked) {
            End::Stopped => return,
            End::Retired => {}
            End::Broken(e) => {
                broken = true;
                lost(shared, addr, &e);
            }
        }
    }
}

/// Waits out a reconnect back-off, cut short by a kick or by a new slot map: a dead
/// master's replica is promoted after seconds, when the back-off has grown to its
/// maximum, and its channels must move there at once, not at the next attempt. The map
/// is the transport's, in this process (an atomic read), so looking at it costs nothing.
/// False when the client is gone.
fn pause_unless_remapped(shared: &Shared, kicked: &Receiver<()>, backoff: Duration) -> bool {
    let generation = shared.routes.generation();
    let until = Instant::now() + backoff;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || shared.routes.generation() != generation {
            return true;
        }
        match kicked.recv_timeout(left.min(MAP_CHECK)) {
            Ok(()) => return true,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return false,
        }
    }
}

/// The connection to `addr` failed: its idle pooled connections are suspect and the
/// topology may be changing (the transport hears it first, so the waiters woken next
/// retry on fresh connections), then every channel there is subscribed again.
fn lost(shared: &Shared, addr: &str, err: &RedisError) {
    log::warn!("redmutex: pub/sub connection to {addr} lost, resubscribing: {err}");
    shared.routes.unsettled(addr);
    shared.registry.lock().connection_lost(addr);
}

/// Moves every channel living at `addr` whose slot the transport now places elsewhere.
fn rehome(shared: &Arc<Shared>, addr: &str) {
    let here: Vec<String> = shared
        .registry
        .lock()
        .channels
        .iter()
        .filter(|(_, ch)| ch.home == addr)
        .map(|(name, _)| name.clone())
        .collect();
    let moves: Vec<(String, String)> = here
        .into_iter()
        .filter_map(|name| {
            let to = shared.routes.home(&name).ok()?.addr;
            (to != addr).then_some((name, to))
        })
        .collect();
    if moves.is_empty() {
        return;
    }
    let mut reg = shared.registry.lock();
    for (name, to) in moves {
        ensure_session(shared, &mut reg, &to);
        if let Some(kick) = reg.move_channel(&name, &to) {
            let _ = kick.try_send(());
        }
    }
}

/// One channel's part in a pass: marks it and lists it to (un)subscribe; false when its
/// entry can go (no waiters, nothing to undo).
fn step(
    name: &str,
    ch: &mut Channel,
    subscribe: &mut Vec<String>,
    unsubscribe: &mut Vec<String>,
) -> bool {
    match ch.state {
        ChannelState::Wanted | ChannelState::Refused if ch.waiters.is_empty() => false,
        ChannelState::Wanted => {
            ch.state = ChannelState::Subscribing;
            subscribe.push(name.to_owned());
            true
        }
        ChannelState::Subscribed if ch.waiters.is_empty() => {
            ch.state = ChannelState::Leaving;
            unsubscribe.push(name.to_owned());
            true
        }
        _ => true,
    }
}

/// The subscriptions one connection holds.
#[derive(Debug, Default, Clone, Copy)]
struct Held {
    plain: bool,
    sharded: bool,
}

impl Held {
    fn any(self) -> bool {
        self.plain || self.sharded
    }
}

/// The confirmations a pipeline of (un)subscribe commands waits for: one per channel,
/// in the order sent, so the next one due is always `channels[replies.len()]`.
struct Pending<'a> {
    kind: PushKind,
    channels: &'a [&'a str],
    replies: Vec<Reply>,
}

impl Pending<'_> {
    fn done(&self) -> bool {
        self.replies.len() == self.channels.len()
    }

    /// True when `push` is the confirmation due next (then it is recorded).
    fn confirms(&mut self, kind: &PushKind, channel: &str) -> bool {
        let due =
            !self.done() && self.kind == *kind && self.channels[self.replies.len()] == channel;
        if due {
            self.replies.push(Reply::Confirmed);
        }
        due
    }
}

/// How many (un)subscribe commands one write carries: subscribing 10,000 channels costs
/// 20 round trips instead of 10,000, and a batch's replies stay far below the server's
/// pub/sub output-buffer limits.
const PIPELINE: usize = 512;

/// What the server said to one (un)subscribe command.
enum Reply {
    Confirmed,
    /// `MOVED`: the channel's slot lives at this node now.
    Moved(Option<String>),
    /// Any other error (an ACL refusal): the command had no effect.
    Refused(RedisError),
}

/// What one pass over the registry asks of the session.
enum Plan {
    Idle,
    Listen,
    Change(Change),
}

struct Change {
    subscribe: Vec<String>,
    unsubscribe: Vec<String>,
    /// Subscribe (true) or drop (false) the control channel; `None`: leave it.
    control: Option<bool>,
}

struct Session<'a> {
    shared: &'a Arc<Shared>,
    addr: &'a str,
    conn: redis::Connection,
    events: mpsc::Receiver<PushInfo>,
    held: HashMap<String, Held>,
    /// The control channel is subscribed (or was refused: then it counts as on, and
    /// waiters rely on the read timeout instead).
    control_on: bool,
    generation: u64,
    response_timeout: Duration,
    kinds: Kinds,
    /// The next pass walks every channel instead of the dirty ones: the first pass of a
    /// connection (everything here must be subscribed on it), and the pass after a quiet
    /// read timeout, which also catches whatever no dirty mark announced.
    full_pass: bool,
    /// Signals the confirmed waiters (see `teller.rs`).
    teller: Teller,
}

impl<'a> Session<'a> {
    fn new(
        shared: &'a Arc<Shared>,
        addr: &'a str,
        mut conn: redis::Connection,
        response_timeout: Duration,
    ) -> Self {
        let (sender, events) = mpsc::channel();
        conn.set_push_sender(sender);
        Self {
            shared,
            addr,
            conn,
            events,
            held: HashMap::new(),
            control_on: false,
            generation: shared.routes.generation(),
            response_timeout,
            kinds: shared.routes.kinds(),
            full_pass: true,
            teller: Teller::default(),
        }
    }

    fn run(&mut self, kicked: &Receiver<()>) -> End {
        if let Err(e) = self.conn.set_read_timeout(Some(LINGER)) {
            return End::Broken(e);
        }
        loop {
            if self.shared.stop.load(Ordering::Acquire) {
                return End::Stopped;
            }
            let generation = self.shared.routes.generation();
            if generation != self.generation {
                self.generation = generation;
                rehome(self.shared, self.addr);
            }
            match self.plan() {
                Plan::Idle => {
                    // Connection kept open but unsubscribed: nothing to read until a kick.
                    match kicked.recv_timeout(IDLE_RECHECK) {
                        Err(RecvTimeoutError::Disconnected) => return End::Stopped,
                        Err(RecvTimeoutError::Timeout)
                            if !self.shared.routes.is_current(self.addr) =>
                        {
                            return End::Retired;
                        }
                        _ => {}
                    }
                }
                Plan::Listen => {
                    if let Err(e) = self.listen() {
                        return End::Broken(e);
                    }
                }
                Plan::Change(change) => {
                    if let Err(e) = self.apply(&change) {
                        return End::Broken(e);
                    }
                }
            }
        }
    }

    /// Decides what to (un)subscribe, under the registry lock, and marks the channels
    /// accordingly so that new waiters know a reply is on its way.
    fn plan(&mut self) -> Plan {
        let addr = self.addr;
        let mut reg = self.shared.registry.lock();
        let mut subscribe = Vec::new();
        let mut unsubscribe = Vec::new();
        let mut dirty = reg
            .sessions
            .get_mut(addr)
            .map(|s| std::mem::take(&mut s.dirty))
            .unwrap_or_default();
        if std::mem::take(&mut self.full_pass) {
            reg.channels.retain(|name, ch| {
                ch.home != addr || step(name, ch, &mut subscribe, &mut unsubscribe)
            });
            // Subscriptions of channels that left (no entry, or moved to another node).
            // `step` lists only channels that are here, so these are not listed twice.
            for (name, held) in &self.held {
                let here = reg.channels.get(name).is_some_and(|ch| ch.home == addr);
                if held.any() && !here {
                    unsubscribe.push(name.clone());
                }
            }
        } else {
            dirty.sort_unstable();
            dirty.dedup();
            for name in dirty {
                let here = match reg.channels.get_mut(&name) {
                    Some(ch) if ch.home == addr => {
                        if !step(&name, ch, &mut subscribe, &mut unsubscribe) {
                            reg.channels.remove(&name);
                        }
                        true
                    }
                    _ => false,
                };
                // A channel that left (gone, or moved to another node) while held here.
                if !here && self.held.get(&name).is_some_and(|h| h.any()) {
                    unsubscribe.push(name);
                }
            }
        }
        let want_control = reg.channels.values().any(|ch| ch.home == addr);
        let mut session = reg.sessions.get_mut(addr);
        if let Some(s) = session.as_deref_mut() {
            // This pass has read every channel wanted so far; a waiter arriving after it
            // must publish again (see `SessionState::poked`).
            s.poked = false;
        }
        if subscribe.is_empty() && unsubscribe.is_empty() && want_control == self.control_on {
            if let Some(s) = session {
                s.mode = if want_control {
                    Mode::Listening
                } else {
                    Mode::Idle
                };
            }
            return if want_control {
                Plan::Listen
            } else {
                Plan::Idle
            };
        }
        if let Some(s) = session {
            s.mode = Mode::Listening;
            if !want_control {
                // From here on a PUBLISH on the control channel might not reach us.
                s.control_live = false;
            }
        }
        Plan::Change(Change {
            subscribe,
            unsubscribe,
            control: (want_control != self.control_on).then_some(want_control),
        })
    }

    /// One read of up to [`LINGER`], then every event it brought.
    fn listen(&mut self) -> Result<(), RedisError> {
        let mut pubsub = self.conn.as_pubsub();
        let got = pubsub.get_message();
        // Dropping a `PubSub` unsubscribes everything (redis-rs's `exit_pubsub`);
        // this one only drove one read, and holds no state of its own.
        std::mem::forget(pubsub);
        self.drain(None);
        match got {
            Ok(_) => Ok(()),
            Err(e) if e.is_timeout() => {
                // A quiet moment: the next pass can afford to walk every channel.
                self.full_pass = true;
                Ok(())
            }
            // Nothing was asked, so an error reply means we are out of step.
            Err(e) => Err(e),
        }
    }

    /// Handles every event read so far, in order. A confirmation that `pending` waits
    /// for next is recorded there: it is the reply to a command we sent, not an event of
    /// its own.
    fn drain(&mut self, mut pending: Option<&mut Pending<'_>>) {
        while let Ok(push) = self.events.try_recv() {
            let channel = match push.data.first() {
                Some(Value::BulkString(bytes)) => String::from_utf8_lossy(bytes).into_owned(),
                _ => continue,
            };
            if let Some(p) = pending.as_deref_mut()
                && p.confirms(&push.kind, &channel)
            {
                continue;
            }
            match push.kind {
                PushKind::Message | PushKind::SMessage => {
                    let payload = match push.data.get(1) {
                        Some(Value::BulkString(bytes)) => bytes.as_slice(),
                        _ => b"",
                    };
                    self.shared.registry.lock().deliver(&channel, payload);
                }
                PushKind::SUnsubscribe | PushKind::Unsubscribe => {
                    self.dropped_by_server(&channel, push.kind == PushKind::SUnsubscribe);
                }
                _ => {}
            }
        }
    }

    /// The server dropped a subscription we did not ask to drop: the slot moved away or
    /// the node was demoted.
    fn dropped_by_server(&mut self, channel: &str, sharded: bool) {
        if let Some(held) = self.held.get_mut(channel) {
            if sharded {
                held.sharded = false;
            } else {
                held.plain = false;
            }
        }
        log::info!(
            "redmutex: {} dropped the subscription to {channel:?}; resubscribing where its slot lives",
            self.addr
        );
        self.shared.routes.refresh_soon();
        self.shared
            .registry
            .lock()
            .dropped_by_server(self.addr, channel);
    }

    /// Sends one `name` command per channel of `channels`, all in one write, and reads
    /// until each has its reply; the replies in the order of `channels`.
    ///
    /// Each command names one channel, so each has exactly one reply (its confirmation
    /// push, or an error), and Redis answers pipelined commands in the order sent: the
    /// confirmations and errors read are matched to the commands strictly in turn, and
    /// messages read in between are ordinary events.
    fn commands(
        &mut self,
        name: &str,
        kind: PushKind,
        channels: &[&str],
    ) -> Result<Vec<Reply>, RedisError> {
        let mut packed = Vec::new();
        for channel in channels {
            packed.extend(redis::cmd(name).arg(*channel).get_packed_command());
        }
        self.conn.send_packed_command(&packed)?;
        let mut pending = Pending {
            kind,
            channels,
            replies: Vec::with_capacity(channels.len()),
        };
        while !pending.done() {
            // An error reply comes back as a value (RESP3), not as an `Err`.
            let got = match self.conn.recv_response() {
                Ok(Value::ServerError(e)) => Err(RedisError::from(e)),
                other => other,
            };
            match got {
                Ok(_) => self.drain(Some(&mut pending)),
                Err(e) if is_connection_error(&e) => return Err(e),
                Err(e) => {
                    // The pushes read before the error answer earlier commands; the
                    // error answers the first command still unanswered.
                    self.drain(Some(&mut pending));
                    let reply = if e.kind() == ErrorKind::Server(ServerErrorKind::Moved) {
                        Reply::Moved(self.shared.routes.moved(&e))
                    } else {
                        Reply::Refused(e)
                    };
                    if !pending.done() {
                        pending.replies.push(reply);
                    }
                }
            }
        }
        Ok(pending.replies)
    }

    /// One command for one channel (the control channel).
    fn command(&mut self, name: &str, kind: PushKind, channel: &str) -> Result<Reply, RedisError> {
        let mut replies = self.commands(name, kind, &[channel])?;
        Ok(replies.pop().unwrap_or(Reply::Confirmed))
    }

    /// Sends the commands of one pass and records their outcomes. A timeout or I/O error
    /// is a broken connection; a refusal marks the channel `Refused`.
    fn apply(&mut self, change: &Change) -> Result<(), RedisError> {
        // Confirmations are read with the response timeout; a timeout here leaves the
        // reply stream out of step, so it counts as a broken connection.
        self.conn.set_read_timeout(Some(self.response_timeout))?;
        let control = self.control_channel();
        if change.control == Some(true) {
            let accepted = match self.command("SUBSCRIBE", PushKind::Subscribe, &control)? {
                Reply::Confirmed => true,
                Reply::Moved(_) | Reply::Refused(_) => {
                    log::warn!(
                        "redmutex: control channel refused on {}; new waiters wait up to {LINGER:?} for their subscription",
                        self.addr
                    );
                    false
                }
            };
            self.control_on = true;
            if let Some(s) = self.shared.registry.lock().sessions.get_mut(self.addr) {
                s.control_live = accepted;
            }
        }
        for names in change.subscribe.chunks(PIPELINE) {
            self.subscribe(names)?;
        }
        for names in change.unsubscribe.chunks(PIPELINE) {
            self.unsubscribe(names)?;
        }
        if change.control == Some(false) {
            self.command("UNSUBSCRIBE", PushKind::Unsubscribe, &control)?;
            self.control_on = false;
        }
        self.conn.set_read_timeout(Some(LINGER))
    }

    fn control_channel(&self) -> String {
        self.shared
            .registry
            .lock()
            .sessions
            .get(self.addr)
            .map(|s| s.control.clone())
            .unwrap_or_default()
    }

    /// Makes the subscriptions `names` lack here (sharded first: a `MOVED` there says a
    /// channel lives elsewhere before anything else is sent for it), then tells each
    /// channel's waiters. One pipeline per kind of subscription.
    fn subscribe(&mut self, names: &[String]) -> Result<(), RedisError> {
        let mut held: Vec<Held> = names
            .iter()
            .map(|n| self.held.get(n).copied().unwrap_or_default())
            .collect();
        // Per channel: the state its waiters are told, and where it moved.
        let mut outcome: Vec<(ChannelState, Option<String>)> =
            vec![(ChannelState::Subscribed, None); names.len()];
        let steps = [
            (self.kinds.sharded, "SSUBSCRIBE", PushKind::SSubscribe, true),
            (self.kinds.plain, "SUBSCRIBE", PushKind::Subscribe, false),
        ];
        for (wanted, command, kind, sharded) in steps {
            if !wanted {
                continue;
            }
            // Channels still on course (not moved, not refused) that lack this kind.
            let due: Vec<usize> = (0..names.len())
                .filter(|&i| {
                    outcome[i].0 == ChannelState::Subscribed
                        && !(if sharded {
                            held[i].sharded
                        } else {
                            held[i].plain
                        })
                })
                .collect();
            if due.is_empty() {
                continue;
            }
            let channels: Vec<&str> = due.iter().map(|&i| names[i].as_str()).collect();
            let replies = self.commands(command, kind, &channels)?;
            for (&i, reply) in due.iter().zip(replies) {
                match reply {
                    Reply::Confirmed if sharded => held[i].sharded = true,
                    Reply::Confirmed => held[i].plain = true,
                    Reply::Moved(to) => outcome[i] = (ChannelState::Wanted, to),
                    Reply::Refused(e) => {
                        log::warn!(
                            "redmutex: cannot subscribe to {}, waiters fall back to TTL waits: {e}",
                            names[i]
                        );
                        outcome[i] = (ChannelState::Refused, None);
                    }
                }
            }
        }
        for (name, held) in names.iter().zip(held) {
            self.held.insert(name.clone(), held);
        }
        let mut told = Vec::new();
        let mut reg = self.shared.registry.lock();
        for (name, (state, moved_to)) in names.iter().zip(outcome) {
            if let Some(to) = moved_to {
                ensure_session(self.shared, &mut reg, &to);
                if let Some(kick) = reg.move_channel(name, &to) {
                    let _ = kick.try_send(());
                }
                continue;
            }
            let registry = &mut *reg;
            if let Some(ch) = registry.channels.get_mut(name)
                && ch.home == self.addr
                && ch.state == ChannelState::Subscribing
            {
                // Confirmed: every unlock Redis runs from now on reaches us, so each
                // waiter may retry now and sleep afterwards.
                ch.state = state;
                told.extend(ch.waiters.iter().map(|w| w.signal.clone()));
                if state == ChannelState::Wanted {
                    // `MOVED` without a new home: try again in the next pass.
                    touch(&mut registry.sessions, self.addr, name);
                }
            }
        }
        drop(reg);
        // The waiters are told after the registry lock is released, and by the teller
        // thread: waking a pipeline's worth of threads takes milliseconds, during which
        // new waiters, leaving waiters and the delivery of messages would otherwise queue
        // for the lock, and the session would read no message. A signal sent late finds
        // its waiter retrying later, or gone: a confirmation announces no release, so a
        // gone waiter loses nothing by it, and a waiter registering meanwhile sees the
        // new state and is signalled at once. A message delivered meanwhile (under the
        // lock) finds these waiters' buffers still empty and wakes one of them; the
        // confirmation then finds that buffer full, and the one retry serves both.
        // Messages are still delivered under the lock, because a leaving waiter passes on
        // an unused message only if it finds it there.
        self.teller.tell(told);
        Ok(())
    }

    /// Drops every subscription `names` have here, then settles their registry entries.
    fn unsubscribe(&mut self, names: &[String]) -> Result<(), RedisError> {
        let held: Vec<Held> = names
            .iter()
            .map(|n| self.held.remove(n).unwrap_or_default())
            .collect();
        let sharded: Vec<&str> = names
            .iter()
            .zip(&held)
            .filter(|(_, h)| h.sharded)
            .map(|(n, _)| n.as_str())
            .collect();
        let plain: Vec<&str> = names
            .iter()
            .zip(&held)
            .filter(|(_, h)| h.plain)
            .map(|(n, _)| n.as_str())
            .collect();
        if !sharded.is_empty() {
            self.commands("SUNSUBSCRIBE", PushKind::SUnsubscribe, &sharded)?;
        }
        if !plain.is_empty() {
            self.commands("UNSUBSCRIBE", PushKind::Unsubscribe, &plain)?;
        }
        let mut guard = self.shared.registry.lock();
        let reg = &mut *guard;
        for name in names {
            let Some(ch) = reg.channels.get_mut(name) else {
                continue;
            };
            if ch.home != self.addr || ch.state != ChannelState::Leaving {
                continue;
            }
            if ch.waiters.is_empty() {
                reg.channels.remove(name);
            } else {
                // A waiter arrived while we were leaving: subscribe again.
                ch.state = ChannelState::Wanted;
                ch.requested = true;
                touch(&mut reg.sessions, self.addr, name);
            }
        }
        Ok(())
    }
}
