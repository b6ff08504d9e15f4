//! The quorum engine: one request to every member of a set of independent Redis servers
//! at once, and the RedLock rules applied to their answers.
//!
//! A quorum lock is held when a majority (`n / 2 + 1`) of its members granted it, and
//! only for as long as none of their keys can have expired: its validity is the TTL minus
//! the time the round took minus an allowance for clock drift (TTL × drift factor, as
//! go-redsync computes it today). The engine knows nothing about what is asked; a lock
//! kind supplies a [`Question`] (the request for each member and how to read its
//! answer), and the engine does the rest:
//!
//! - [`vote`]: one round. Every request is written before any reply is read, so a round
//!   costs one round trip plus the slowest member, not the sum of them.
//! - [`acquire`]: rounds until granted, with the partial grants of a failed round undone
//!   on every member, a random pause between rounds, a retry limit and a deadline.
//! - an extend or a release is one [`vote`] whose [`Tally`] the lock kind reads.
//!
//! Members are reached through [`Members`]: any value that opens a [`Wire`] to member
//! `i` for a key. `[Arc<Core>]` is one (a client per server, each with its pool); other
//! sources of connections only need to implement the two traits.
//!
//! Two lock kinds build on it: the RedLock (`lock/composite/red.rs`), whose members are
//! RLocks asked with their own scripts, and the quorum token lock
//! (`token_lock/quorum.rs`), redsync's protocol.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Value;

use crate::core::Core;
use crate::error::{Error, NoQuorum, Result};
use crate::protocol::script::Call;
use crate::random;
use crate::transport::Checkout;

/// How many of `members` make a quorum: a majority.
pub(crate) fn needed(members: usize) -> usize {
    members / 2 + 1
}

/// The [`Error::NoQuorum`] of an `operation` on the lock `name` over `members` members
/// that only `agreed` of them did, with the members that failed: the one spelling of
/// that verdict for every quorum kind.
pub(crate) fn shortfall(
    name: String,
    operation: &'static str,
    members: usize,
    agreed: usize,
    failures: Vec<(usize, Error)>,
) -> Error {
    Error::NoQuorum(Box::new(NoQuorum {
        name,
        operation,
        members,
        needed: needed(members),
        agreed,
        too_slow: false,
        failures,
    }))
}

/// A connection that a round writes one request to, then reads its reply from.
pub(crate) trait Wire {
    /// Writes the packed request without waiting for the reply.
    fn send(&mut self, packed: &[u8]) -> redis::RedisResult<()>;
    /// Reads the reply, at most `within` (`None`: the connection's own timeout).
    fn recv(&mut self, within: Option<Duration>) -> redis::RedisResult<Value>;
    /// Loads `call`'s script (after `NOSCRIPT`), in the usual request-reply way.
    fn load(&mut self, call: &Call) -> redis::RedisResult<()>;
}

impl Wire for Checkout {
    fn send(&mut self, packed: &[u8]) -> redis::RedisResult<()> {
        Checkout::send(self, packed)
    }

    fn recv(&mut self, within: Option<Duration>) -> redis::RedisResult<Value> {
        Checkout::recv(self, within)
    }

    fn load(&mut self, call: &Call) -> redis::RedisResult<()> {
        call.load(self.conn()?)
    }
}

/// The members of a quorum and how to reach them.
pub(crate) trait Members: Sync {
    /// A connection to one member.
    type Wire<'a>: Wire + Send
    where
        Self: 'a;

    /// How many members there are.
    fn count(&self) -> usize;

    /// A connection to member `member`, on the node that owns `key`. With `wait` `None`
    /// only one that is open and idle will do (`Ok(None)` when there is none); with
    /// `Some(d)` one may be opened, waiting at most `d`.
    fn wire(
        &self,
        member: usize,
        key: &str,
        wait: Option<Duration>,
    ) -> Result<Option<Self::Wire<'_>>>;

    /// Whether any member was shut down; the engine then stops with `Shutdown`.
    fn is_stopped(&self) -> bool;

    /// Applies member `member`'s `MOVED` answer to its routing. Whether the member now
    /// routes the key elsewhere, so the request is worth sending again: a cluster client
    /// does, a single server or a sentinel master has nowhere else to send it.
    fn moved(&self, member: usize, err: &redis::RedisError) -> bool;
}

/// One client per member: each member's connections come from that client's pool.
impl Members for [Arc<Core>] {
    type Wire<'a> = Checkout;

    fn count(&self) -> usize {
        self.len()
    }

    fn wire(&self, member: usize, key: &str, wait: Option<Duration>) -> Result<Option<Checkout>> {
        let core = self
            .get(member)
            .ok_or_else(|| Error::Config(format!("no quorum member {member}")))?;
        core.checkout(key, wait)
    }

    fn is_stopped(&self) -> bool {
        self.iter().any(|c| c.is_stopped())
    }

    fn moved(&self, member: usize, err: &redis::RedisError) -> bool {
        self.get(member).is_some_and(|core| core.redirected(err))
    }
}

/// One member's request: the key it concerns (which routes it) and the call.
#[derive(Debug)]
pub(crate) struct Request<'a> {
    pub(crate) key: &'a str,
    pub(crate) call: Call,
}

/// What one member answered.
#[derive(Debug)]
pub(crate) enum Vote {
    /// It did what was asked: granted, extended, released.
    Yes,
    /// It answered, and refused: held by someone else, or the key is not ours any more.
    No,
    /// It could not be asked, did not answer in time, or answered with an error.
    Failed(Error),
}

/// A question put to every member: the request for each, and how to read an answer.
pub(crate) trait Question {
    /// The request for member `member`.
    fn request(&self, member: usize) -> Request<'_>;
    /// What member `member`'s successful reply means. Error replies never get here:
    /// they are [`Vote::Failed`].
    fn judge(&self, member: usize, reply: Value) -> Vote;
}

/// The answers of one round, and when it started and ended.
#[derive(Debug)]
pub(crate) struct Tally {
    pub(crate) votes: Vec<Vote>,
    pub(crate) started: Instant,
    pub(crate) finished: Instant,
}

impl Tally {
    pub(crate) fn yes(&self) -> usize {
        self.votes.iter().filter(|v| matches!(v, Vote::Yes)).count()
    }

    pub(crate) fn failed(&self) -> usize {
        self.votes
            .iter()
            .filter(|v| matches!(v, Vote::Failed(_)))
            .count()
    }

    /// Whether a majority said yes.
    pub(crate) fn has_quorum(&self) -> bool {
        self.yes() >= needed(self.votes.len())
    }

    /// Whether the failed members alone leave no majority possible: the failure is the
    /// servers', not contention.
    pub(crate) fn failures_prevent_quorum(&self) -> bool {
        let n = self.votes.len();
        self.failed() > n - needed(n)
    }

    /// Until when a hold of `ttl` granted in this round is valid: every key was set after
    /// the round started, so none expires before `started + ttl` (on a clock that runs
    /// at our rate); the drift allowance covers clocks that do not. `None` when that
    /// moment has passed already.
    pub(crate) fn valid_until(&self, ttl: Duration, drift_factor: f64) -> Option<Instant> {
        let until = (self.started + ttl).checked_sub(drift(ttl, drift_factor))?;
        (until > self.finished).then_some(until)
    }

    /// The error for a round that did not reach a quorum.
    pub(crate) fn no_quorum(self, name: &str, operation: &'static str, too_slow: bool) -> Error {
        let members = self.votes.len();
        let agreed = self.yes();
        let failures = self
            .votes
            .into_iter()
            .enumerate()
            .filter_map(|(i, v)| match v {
                Vote::Failed(e) => Some((i, e)),
                _ => None,
            })
            .collect();
        Error::NoQuorum(Box::new(NoQuorum {
            name: name.to_owned(),
            operation,
            members,
            needed: needed(members),
            agreed,
            too_slow,
            failures,
        }))
    }
}

/// The clock-drift allowance of a hold of `ttl`: `ttl × factor`, as redsync computes it.
/// (redsync once added 2 ms on top; it removed that term in 2019, and so do we.)
pub(crate) fn drift(ttl: Duration, factor: f64) -> Duration {
    Duration::try_from_secs_f64(ttl.as_secs_f64() * factor.max(0.0)).unwrap_or(ttl)
}

/// One round: `question`'s request to every member, every write before any read, then
/// every reply, each read by `started + budget` at the latest (`None`: each member's
/// own response timeout).
///
/// Ordering: members with an open idle connection are written first, in member order
/// (the usual case: one write each, no thread). A member without one (a cold pool, a
/// server that is down) would hold up every write after it while its connection opens,
/// so those members get theirs on scoped threads, which write as soon as they are
/// connected, while this thread reads the others' replies. Each reply is the first one
/// on its own connection, so a slow or dead member delays only itself: the round takes
/// about one round trip plus the slowest member, and a member that is down costs it the
/// budget at most.
///
/// A member that answers `NOSCRIPT` gets its script loaded and the call sent again, in
/// the usual request-reply way. A member whose pooled connection had died while idle
/// (the server restarted, an idle timeout, `CLIENT KILL`) failed at once and reached no
/// live server, so its request is sent again on another connection, as `Node::run` does
/// for single commands, right away, on a thread as a cold member is (not after the other
/// members' replies, which may take the whole budget). A member that is a cluster client
/// and answers `MOVED` learns the slot's new owner and is asked there, the same way: a
/// redirect means the script did not run. (`ASK`, a slot halfway through a migration, is
/// a failed vote; the next round asks again.) A timeout is never resent: the request may
/// have run.
pub(crate) fn vote<M: Members + ?Sized>(
    members: &M,
    question: &impl Question,
    budget: Option<Duration>,
) -> Tally {
    let started = Instant::now();
    let deadline = budget.and_then(|b| started.checked_add(b));
    let n = members.count();
    let requests: Vec<Request<'_>> = (0..n).map(|i| question.request(i)).collect();
    let ask = |i: usize, sent: Result<M::Wire<'_>>| -> Answer {
        let r = &requests[i];
        match sent.map(|mut wire| read_reply(&mut wire, r, deadline)) {
            // A write to a connection that died while idle (a broken pipe).
            Err(Error::Redis(e)) if died_idle(&e) => Answer::Resend(Error::Redis(e)),
            Err(e) => Answer::Failed(e),
            Ok(Ok(reply)) => Answer::Reply(reply),
            Ok(Err(e)) if died_idle(&e) => Answer::Resend(Error::from_redis(r.key, e)),
            // A slot that moved (a migration, a failover the member's map has not seen):
            // the script did not run there (Redis checks a script's keys first), so it
            // may be sent to the new owner, as the member's own calls are.
            Ok(Err(e)) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::Moved) => {
                if members.moved(i, &e) {
                    Answer::Resend(Error::from_redis(r.key, e))
                } else {
                    Answer::Failed(Error::from_redis(r.key, e))
                }
            }
            Ok(Err(e)) => Answer::Failed(Error::from_redis(r.key, e)),
        }
    };
    let open = |i: usize| -> Result<M::Wire<'_>> {
        let r = &requests[i];
        let wait = Some(remaining(deadline).unwrap_or(Duration::MAX));
        match members.wire(i, r.key, wait)? {
            Some(wire) => write(wire, r),
            None => Err(Error::Config(format!("no connection to quorum member {i}"))),
        }
    };
    // A member whose connection had died while idle is asked again at once, on another
    // connection, on a thread of its own (see below): a restarted member (dead pooled
    // connections, then `NOSCRIPT`) still has the round's budget for it, and the others'
    // replies are read meanwhile.
    let answer = |i: usize, sent: Result<M::Wire<'_>>| -> Answer {
        let mut answer = ask(i, sent);
        for _ in 0..DEAD_RESENDS {
            if !matches!(answer, Answer::Resend(_)) {
                break;
            }
            answer = ask(i, open(i));
        }
        answer
    };
    // Phase 1: write to every member with an idle connection.
    let mut warm = Vec::with_capacity(n);
    let mut cold = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        match members.wire(i, r.key, None) {
            Ok(Some(wire)) => warm.push((i, write(wire, r))),
            Ok(None) => cold.push(i),
            Err(e) => warm.push((i, Err(e))),
        }
    }
    // Phase 2: connect the cold members on their own threads while reading the warm
    // members' replies; each connection goes back to its pool once read.
    let mut answers: Vec<Option<Answer>> = (0..n).map(|_| None).collect();
    std::thread::scope(|s| {
        let (open, answer) = (&open, &answer);
        let mut connecting: Vec<_> = cold
            .iter()
            .map(|&i| (i, s.spawn(move || answer(i, open(i)))))
            .collect();
        for (i, sent) in warm {
            match ask(i, sent) {
                // Its next connection may take a while to open: on a thread of its own,
                // like a cold member's, so the replies after it are read meanwhile.
                Answer::Resend(_) => connecting.push((i, s.spawn(move || answer(i, open(i))))),
                reply => answers[i] = Some(reply),
            }
        }
        for (i, thread) in connecting {
            answers[i] = Some(thread.join().unwrap_or_else(|_| {
                Answer::Failed(Error::Io(std::io::Error::other(
                    "a connecting thread panicked",
                )))
            }));
        }
    });
    let votes = answers
        .into_iter()
        .enumerate()
        .map(|(i, answer)| {
            let answer = answer.unwrap_or_else(|| {
                Answer::Failed(Error::Config(format!("quorum member {i} was not asked")))
            });
            match answer {
                Answer::Reply(reply) => question.judge(i, reply),
                Answer::Failed(e) | Answer::Resend(e) => Vote::Failed(e),
            }
        })
        .collect();
    Tally {
        votes,
        started,
        finished: Instant::now(),
    }
}

/// What became of one member's request before it was judged.
enum Answer {
    Reply(Value),
    Failed(Error),
    /// Nothing ran, and sending again may reach the member: its connection had died
    /// while idle, or its slot moved and the member now routes the key to the new owner.
    Resend(Error),
}

/// Writes `r` on `wire`.
fn write<W: Wire>(mut wire: W, r: &Request<'_>) -> Result<W> {
    match wire.send(r.call.packed()) {
        Ok(()) => Ok(wire),
        Err(e) => Err(Error::from_redis(r.key, e)),
    }
}

/// What is left of the time until `deadline`; `None` without one.
fn remaining(deadline: Option<Instant>) -> Option<Duration> {
    deadline.map(|d| d.saturating_duration_since(Instant::now()))
}

/// How often a request is sent again after finding its connection dead; a pool may hold
/// several connections that died with their server.
const DEAD_RESENDS: usize = 17;

/// Whether `e` says the connection was already dead: closed or reset by the peer at once,
/// not a timeout (after a timeout the request may have run).
fn died_idle(e: &redis::RedisError) -> bool {
    e.is_connection_dropped() && !e.is_timeout()
}

/// Member `r`'s reply, by `deadline`; after `NOSCRIPT` the script is loaded and the call
/// sent once more.
fn read_reply(
    wire: &mut impl Wire,
    r: &Request<'_>,
    deadline: Option<Instant>,
) -> redis::RedisResult<Value> {
    let within = || deadline.map(|d| d.saturating_duration_since(Instant::now()));
    match wire.recv(within()) {
        Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
            // NOSCRIPT means the call did not run; sending it again cannot apply it twice.
            if within().is_some_and(|w| w.is_zero()) {
                return Err(e);
            }
            wire.load(&r.call)?;
            wire.send(r.call.packed())?;
            wire.recv(within())
        }
        other => other,
    }
}

/// How an acquisition retries.
#[derive(Debug, Clone)]
pub(crate) struct Policy {
    /// Rounds at most; `None`: until the deadline (or forever without one).
    pub(crate) tries: Option<u32>,
    /// The pause between rounds is drawn uniformly from this range.
    pub(crate) retry_delay: (Duration, Duration),
    /// The drift allowance per unit of TTL (redsync: 0.01).
    pub(crate) drift_factor: f64,
    /// How long one round may wait for replies; `None`: each member's response timeout.
    pub(crate) budget: Option<Duration>,
}

/// A hold granted by a quorum.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Grant {
    /// Until when the hold is valid (see [`Tally::valid_until`]).
    pub(crate) valid_until: Instant,
    /// How many members granted it.
    pub(crate) members: usize,
}

/// RedLock's acquisition: rounds of `ask` until a majority grants within validity.
///
/// After a round that did not get there, `undo` is put to **every** member, not only to
/// those that said yes: a member whose reply was lost may have granted all the same, and
/// the undo (a compare-and-delete on our token) is harmless where nothing was granted.
/// Then, unless the tries or the time are used up, the thread pauses for a random delay
/// and tries again.
///
/// Returns `Ok(None)` when the lock stayed held elsewhere. Returns [`Error::NoQuorum`]
/// at once when the members that failed leave no majority possible (the servers are the
/// problem, not contention), and after the last round when that round was granted too
/// late to be valid.
///
/// # Errors
///
/// As above; [`Error::Shutdown`] when a member's client was shut down.
pub(crate) fn acquire<M: Members + ?Sized>(
    members: &M,
    policy: &Policy,
    ttl: Duration,
    deadline: Option<Instant>,
    (name, ask, undo): (&str, &impl Question, &impl Question),
) -> Result<Option<Grant>> {
    let mut tries = 0u32;
    loop {
        if members.is_stopped() {
            return Err(Error::Shutdown);
        }
        let tally = vote(members, ask, policy.budget);
        let valid_until = tally.valid_until(ttl, policy.drift_factor);
        if let (true, Some(valid_until)) = (tally.has_quorum(), valid_until) {
            return Ok(Some(Grant {
                valid_until,
                members: tally.yes(),
            }));
        }
        let undone = vote(members, undo, policy.budget);
        if undone.failed() > 0 {
            log::debug!(
                "redmutex: {} of {} undo requests for {name:?} failed; their grants expire \
                 with the TTL",
                undone.failed(),
                undone.votes.len()
            );
        }
        tries += 1;
        let too_slow = tally.has_quorum();
        if tally.failures_prevent_quorum() {
            return Err(tally.no_quorum(name, "acquire", false));
        }
        let pause = random::between(policy.retry_delay.0, policy.retry_delay.1);
        let out_of_tries = policy.tries.is_some_and(|t| tries >= t);
        let out_of_time = deadline.is_some_and(|d| Instant::now() + pause >= d);
        if out_of_tries || out_of_time {
            return if too_slow {
                Err(tally.no_quorum(name, "acquire", true))
            } else {
                Ok(None)
            };
        }
        std::thread::sleep(pause);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(votes: Vec<Vote>, elapsed: Duration) -> Tally {
        let started = Instant::now();
        Tally {
            votes,
            started,
            finished: started + elapsed,
        }
    }

    fn failed() -> Vote {
        Vote::Failed(Error::Shutdown)
    }

    #[test]
    fn a_majority_is_needed() {
        assert_eq!(
            [1, 2, 3, 4, 5, 6, 7].map(needed),
            [1, 2, 2, 3, 3, 4, 4],
            "n/2+1"
        );
        let t = tally(
            vec![Vote::Yes, Vote::Yes, Vote::Yes, Vote::No, failed()],
            Duration::ZERO,
        );
        assert!(t.has_quorum());
        assert!(!t.failures_prevent_quorum());
        let t = tally(
            vec![Vote::Yes, Vote::Yes, failed(), failed(), failed()],
            Duration::ZERO,
        );
        assert!(!t.has_quorum());
        assert!(t.failures_prevent_quorum());
        // Two refusals and one failure: contention, not an outage.
        let t = tally(
            vec![Vote::Yes, Vote::Yes, Vote::No, Vote::No, failed()],
            Duration::ZERO,
        );
        assert!(!t.has_quorum() && !t.failures_prevent_quorum());
    }

    #[test]
    fn validity_is_ttl_minus_elapsed_minus_drift() {
        let ttl = Duration::from_secs(10);
        assert_eq!(drift(ttl, 0.01), Duration::from_millis(100));
        let t = tally(vec![Vote::Yes], Duration::from_millis(400));
        let until = t.valid_until(ttl, 0.01).unwrap();
        assert_eq!(until - t.finished, Duration::from_millis(9_500));
        // A round that took the whole TTL (less the drift) leaves nothing.
        let t = tally(vec![Vote::Yes], Duration::from_millis(9_900));
        assert!(t.valid_until(ttl, 0.01).is_none());
        assert!(
            tally(vec![Vote::Yes], Duration::ZERO)
                .valid_until(ttl, 2.0)
                .is_none()
        );
    }

    #[test]
    fn no_quorum_names_the_failed_members() {
        let t = tally(
            vec![Vote::Yes, failed(), Vote::No, failed(), failed()],
            Duration::ZERO,
        );
        let Error::NoQuorum(d) = t.no_quorum("q", "acquire", false) else {
            panic!("not NoQuorum");
        };
        assert_eq!((d.members(), d.needed(), d.agreed()), (5, 3, 1));
        let failed: Vec<usize> = d.failures().iter().map(|(i, _)| *i).collect();
        assert_eq!(failed, [1, 3, 4]);
        let text = d.to_string();
        assert!(
            text.contains("acquire reached 1 of 5 members, 3 needed"),
            "{text}"
        );
        assert!(text.contains("member 3:"), "{text}");
    }
}
