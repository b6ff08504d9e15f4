//! Who leads an election, and when that changes, seen from outside it (Curator's
//! `LeaderLatch.getLeader()` and etcd's `Observe`): read from the leader lock's hash, and
//! followed through the lock's unlock messages with its TTL as the fallback.
//!
//! Redis keeps no acquisition time, so "since when" is what an observer saw: the change
//! happened after the last read that showed the old state and no later than the read
//! that showed the new one.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded, unbounded};

use crate::core::Core;
use crate::error::{Error, Result};
use crate::protocol::names;
use crate::pubsub::{Interest, Subscription, WakeRule, Woken};
use crate::transport;

/// Which kind of client holds the leader lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LeaderClient {
    /// The client this observer belongs to.
    ThisClient,
    /// Another redmutex client: a connection named `redmutex:<client-id>` is open on the
    /// lock's server.
    Redmutex,
    /// A client that is no redmutex client: a Redisson client (or another that writes
    /// Redisson's owner field), whose id is the `RedissonClient.getId()` of that process.
    Redisson,
    /// The server would not list its clients (`CLIENT LIST` refused), so the kind is not
    /// known.
    Unknown,
}

/// The holder of a leader lock, as one read of Redis saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Leader {
    /// The lock hash's field: `<client-id>:<thread>`.
    pub owner: String,
    /// The client id: a redmutex [`Client::id`](crate::Client::id) or a Redisson client's
    /// `getId()`.
    pub client_id: String,
    /// The holder's thread: a redmutex thread number or a Java thread id.
    pub thread: String,
    /// What kind of client the id belongs to.
    pub client: LeaderClient,
    /// Its hold count (a leader that asked twice holds twice).
    pub holds: u32,
    /// What was left of its lease at the read; `None` when the key has no TTL.
    pub lease_left: Option<Duration>,
    /// The first read that showed this holder (the read of [`LeaderLatch::current`] or
    /// the change that announced it).
    ///
    /// [`LeaderLatch::current`]: crate::LeaderLatch::current
    pub seen_since: SystemTime,
    /// The last read before that which showed another holder or none: the holder took
    /// the lock after it. `None` when it held the lock at the observer's first read.
    pub taken_after: Option<SystemTime>,
}

/// Why a [`LeaderChange`] was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ChangeCause {
    /// The first report of [`LeaderLatch::changes`]: who led when observing began.
    ///
    /// [`LeaderLatch::changes`]: crate::LeaderLatch::changes
    Initial,
    /// An unlock message on the lock's channel came first: the leader stepped down (or
    /// was forced out), and the read after the message saw the change.
    Released,
    /// No message: the leader's lease ran out (it died or froze), and the read at the
    /// end of its TTL saw the change.
    Expired,
    /// A read while nobody led found a leader (an acquisition publishes nothing), or a
    /// change came without either of the above (the key deleted, a reconnect).
    Observed,
}

/// One change of leadership; [`LeaderLatch::changes`](crate::LeaderLatch::changes).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaderChange {
    /// Who led before (as last read); `None`: nobody did.
    pub previous: Option<Leader>,
    /// Who leads now; `None`: nobody does.
    pub current: Option<Leader>,
    /// What led to the read that saw it.
    pub cause: ChangeCause,
    /// When the read that saw it was sent.
    pub seen_at: SystemTime,
}

/// The changes of one election's leadership, as they are seen; from
/// [`LeaderLatch::changes`](crate::LeaderLatch::changes). Dropping it stops the
/// observing thread.
#[derive(Debug)]
pub struct LeaderChanges {
    changes: Receiver<Result<LeaderChange>>,
    // Dropped with this value: the observer thread's wait sees the disconnect.
    _stop: Sender<Infallible>,
}

impl LeaderChanges {
    /// The next change, waiting as long as it takes. `Err` when observing failed (a
    /// Redis error, the client shut down); then no more changes come.
    ///
    /// # Errors
    ///
    /// [`Error::Shutdown`] once the client is shut down; the Redis error that stopped the
    /// observer ([`Error::WrongType`] when the key is no lock).
    pub fn recv(&self) -> Result<LeaderChange> {
        self.changes.recv().unwrap_or(Err(Error::Shutdown))
    }

    /// The next change within `timeout`: `Ok(None)` when none came.
    ///
    /// # Errors
    ///
    /// As [`recv`](Self::recv).
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Option<LeaderChange>> {
        match self.changes.recv_timeout(timeout) {
            Ok(change) => change.map(Some),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(Error::Shutdown),
        }
    }

    /// The channel itself, for a `select!` with other channels.
    pub fn receiver(&self) -> &Receiver<Result<LeaderChange>> {
        &self.changes
    }
}

/// After a change that left the election without a leader, the candidate a release woke
/// takes the lock within a few round trips, and its acquisition publishes nothing: read
/// again after these pauses before falling back to the slow vacancy read.
const FOLLOW_UPS: [Duration; 3] = [
    Duration::from_millis(20),
    Duration::from_millis(100),
    Duration::from_millis(500),
];

/// Reads who holds `name` now.
pub(crate) fn current(core: &Core, name: &str) -> Result<Option<Leader>> {
    let now = SystemTime::now();
    Ok(read(core, name)?.map(|held| held.into_leader(core, name, now, None)))
}

/// Starts the observing thread of `name`.
pub(crate) fn changes(core: Arc<Core>, name: String) -> Result<LeaderChanges> {
    let (tx, rx) = unbounded();
    let (stop, stopped) = bounded::<Infallible>(0);
    // Subscribed before the first read, so that a release Redis runs after that read
    // reaches us; the observer never counts as a waiter (see `Listener::observe`).
    let channel = names::lock_channel(&name);
    let subscription = core.observe(Interest {
        channel: &channel,
        rule: WakeRule::Lock,
    })?;
    std::thread::Builder::new()
        .name("redmutex-leader".into())
        .spawn(move || {
            let observer = Observer {
                core: &core,
                name: &name,
                tx: &tx,
            };
            if let Err(e) = observer.run(&subscription, &stopped) {
                let _ = tx.send(Err(e));
            }
        })
        .map_err(Error::Io)?;
    Ok(LeaderChanges {
        changes: rx,
        _stop: stop,
    })
}

/// One read of the lock: the owner field and its count, and the key's TTL.
struct Held {
    owner: String,
    holds: u32,
    pttl: i64,
}

impl Held {
    fn into_leader(
        self,
        core: &Core,
        name: &str,
        seen_since: SystemTime,
        taken_after: Option<SystemTime>,
    ) -> Leader {
        let (client_id, thread) = self
            .owner
            .rsplit_once(':')
            .map_or((self.owner.as_str(), ""), |(id, t)| (id, t));
        let client = kind_of(core, name, client_id);
        Leader {
            client_id: client_id.to_owned(),
            thread: thread.to_owned(),
            client,
            holds: self.holds,
            lease_left: u64::try_from(self.pttl).ok().map(Duration::from_millis),
            seen_since,
            taken_after,
            owner: self.owner,
        }
    }
}

/// `HGETALL` and `PTTL` of the lock, in one round trip on its node.
fn read(core: &Core, name: &str) -> Result<Option<Held>> {
    let (fields, pttl): (Vec<(String, String)>, i64) = core.run(name, |c| {
        redis::pipe()
            .cmd("HGETALL")
            .arg(name)
            .cmd("PTTL")
            .arg(name)
            .query(c)
    })?;
    // An RLock's hash has one field, its holder's; skip anything that is no hold count.
    Ok(fields.into_iter().find_map(|(owner, count)| {
        let holds = count.parse::<u32>().ok()?;
        (owner.contains(':') && holds > 0).then_some(Held { owner, holds, pttl })
    }))
}

/// Whose client `client_id` is: ours, a redmutex client with a named connection on the
/// lock's node, or (no such connection) a Redisson one.
fn kind_of(core: &Core, name: &str, client_id: &str) -> LeaderClient {
    if client_id == core.id() {
        return LeaderClient::ThisClient;
    }
    let wanted = format!("name={} ", transport::connection_name(client_id));
    match core.run(name, |c| {
        redis::cmd("CLIENT").arg("LIST").query::<String>(c)
    }) {
        Ok(list) if list.lines().any(|l| l.contains(&wanted)) => LeaderClient::Redmutex,
        Ok(_) => LeaderClient::Redisson,
        Err(_) => LeaderClient::Unknown,
    }
}

/// The observing thread's state.
struct Observer<'a> {
    core: &'a Core,
    name: &'a str,
    tx: &'a Sender<Result<LeaderChange>>,
}

/// What woke the observer.
enum Woke {
    Message,
    Timer,
}

impl Observer<'_> {
    fn run(&self, subscription: &Subscription, stopped: &Receiver<Infallible>) -> Result<()> {
        // The first signal says the subscription is confirmed (or refused: then the TTL
        // alone drives us). A read after it misses no release; a short bound keeps a
        // server that never confirms from delaying the first report.
        let confirm = self.core.config().response_timeout();
        if sleep(subscription, stopped, Instant::now() + confirm).is_none() {
            return Ok(());
        }
        let mut read_at = SystemTime::now();
        let mut sent = Instant::now();
        let mut leader = self
            .read()?
            .map(|held| held.into_leader(self.core, self.name, read_at, None));
        if !self.send(None, leader.clone(), ChangeCause::Initial, read_at) {
            return Ok(());
        }
        let mut follow_ups = 0;
        loop {
            let wake_at = self.next_read(leader.as_ref(), sent, &mut follow_ups);
            let woke = match sleep(subscription, stopped, wake_at) {
                None => return Ok(()),
                Some(woke) => woke,
            };
            let before = read_at;
            read_at = SystemTime::now();
            sent = Instant::now();
            let held = self.read()?;
            let same = match (&leader, &held) {
                (Some(l), Some(h)) => l.owner == h.owner,
                (None, None) => true,
                _ => false,
            };
            if same {
                // The same holder, renewed (or re-entered): only its lease moved.
                if let (Some(l), Some(h)) = (leader.as_mut(), held) {
                    l.holds = h.holds;
                    l.lease_left = u64::try_from(h.pttl).ok().map(Duration::from_millis);
                }
                continue;
            }
            let cause = match (&woke, &leader) {
                (Woke::Message, _) => ChangeCause::Released,
                (Woke::Timer, Some(old)) if old.lease_left.is_some() => ChangeCause::Expired,
                (Woke::Timer, _) => ChangeCause::Observed,
            };
            let next = held.map(|h| h.into_leader(self.core, self.name, read_at, Some(before)));
            follow_ups = if next.is_none() { FOLLOW_UPS.len() } else { 0 };
            let previous = std::mem::replace(&mut leader, next);
            if !self.send(previous, leader.clone(), cause, read_at) {
                return Ok(());
            }
        }
    }

    /// [`read`], again after a transient failure (as often and as late as the client's
    /// retry settings say).
    fn read(&self) -> Result<Option<Held>> {
        self.core.retrying(|| read(self.core, self.name))
    }

    /// When to read again without a message: when the leader's TTL runs out (counted
    /// from when the read that saw it was sent, so never early), or, with nobody
    /// leading, after the follow-up pauses and then every watchdog lease (the TTL a new
    /// leader's lock gets): never more often than a lease, beyond the follow-ups.
    fn next_read(&self, leader: Option<&Leader>, sent: Instant, follow_ups: &mut usize) -> Instant {
        match leader {
            Some(l) => match l.lease_left {
                // One ms more: the read lands after the expiry, not on it.
                Some(left) => sent + left + Duration::from_millis(1),
                // Persistent: only a message can end it.
                None => sent + Duration::from_secs(86_400),
            },
            None if *follow_ups > 0 => {
                let pause = FOLLOW_UPS[FOLLOW_UPS.len() - *follow_ups];
                *follow_ups -= 1;
                Instant::now() + pause
            }
            None => Instant::now() + self.core.watchdog_timeout(),
        }
    }

    /// Sends a change; false when nobody listens any more.
    fn send(
        &self,
        previous: Option<Leader>,
        current: Option<Leader>,
        cause: ChangeCause,
        seen_at: SystemTime,
    ) -> bool {
        self.tx
            .send(Ok(LeaderChange {
                previous,
                current,
                cause,
                seen_at,
            }))
            .is_ok()
    }
}

/// Sleeps until a signal (`Some(Message)`), `deadline` (`Some(Timer)`) or the observer's
/// end (`None`: its `LeaderChanges` was dropped, or the client shut down).
fn sleep(
    subscription: &Subscription,
    stopped: &Receiver<Infallible>,
    deadline: Instant,
) -> Option<Woke> {
    match subscription.wait_or_stop(Some(deadline), stopped)? {
        Woken::Signal => Some(Woke::Message),
        Woken::Timeout => Some(Woke::Timer),
        Woken::Closed => None,
    }
}
