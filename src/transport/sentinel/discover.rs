//! Finding the master: every sentinel is asked on a kept connection, the masters they
//! name are ranked, and the best one that says `master` to `ROLE` wins (see the
//! [module docs](super)). The same questions tell whether a master is being demoted
//! ([`Shared::standing`]).

use std::sync::atomic::Ordering;

use parking_lot::Mutex;
use redis::{ErrorKind, RedisError, RedisResult};

use super::super::connector::{Connector, Endpoint};
use super::super::nodes::Resend;
use super::super::replica_sync::Standing;
use super::super::slots::join_host_port;
use super::Shared;
use crate::error::{Error, Result, is_connection_error};

/// What one sentinel said about the master.
enum Answer {
    /// The master it names, and how fresh its word is.
    Master(Report),
    /// The sentinel monitors no master of that name.
    Unknown,
    /// The address is a Redis server, but not a sentinel.
    NotSentinel(String),
    /// Down, unreachable, or an answer that made no sense.
    Unreachable(RedisError),
}

/// A kept connection to one sentinel, opened on first use.
#[derive(Default)]
pub(super) struct KeptConn(Mutex<Option<redis::Connection>>);

impl std::fmt::Debug for KeptConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptConn").finish_non_exhaustive()
    }
}

/// One sentinel's view of the master.
#[derive(Debug, Clone)]
struct Report {
    /// The master it names (`SENTINEL GET-MASTER-ADDR-BY-NAME`): during a failover it
    /// leads, already the promoted replica once that says `master`.
    named: String,
    /// Its configuration epoch for the master (`SENTINEL MASTER`): a failover raises it,
    /// so of two sentinels naming different masters the higher epoch knows better.
    epoch: u64,
    /// The address its master record is about: the old master until the switch.
    record: String,
    /// It is running a failover of that record's master now.
    failing_over: bool,
    /// The replicas it knows for the master.
    replicas: u64,
}

/// Why no master could be found.
#[derive(Debug)]
pub(super) struct NotFound {
    /// Every reachable sentinel said it knows no such master.
    unknown_everywhere: bool,
    /// A sentinel address that is a plain server (its description).
    not_sentinel: Option<String>,
    /// One line per sentinel.
    pub(super) details: Vec<String>,
    /// The first sentinel's connection error, when none could be asked.
    unreachable: Option<RedisError>,
    /// A named master that refused the login (its address and answer).
    refused: Option<(String, RedisError)>,
}

/// Why a named master could not be confirmed.
enum Unconfirmed {
    /// Down, unreachable, or not (yet) a master: another sentinel or a retry may help.
    Unusable(String),
    /// The master refused the login: no retry helps.
    Refused(RedisError),
}

impl Shared {
    /// What sentinel `i` says the master is, on its kept connection.
    fn ask(&self, i: usize) -> Answer {
        let sentinel = &self.sentinels[i];
        let mut kept = self.sentinel_conns[i].0.lock();
        let conn = match kept.take() {
            Some(conn) => conn,
            None => {
                let connector = match self.sentinel_connector(sentinel) {
                    Ok(c) => c,
                    Err(e) => {
                        return Answer::Unreachable(RedisError::from((
                            ErrorKind::Client,
                            "bad sentinel address",
                            e.to_string(),
                        )));
                    }
                };
                match connector.connect() {
                    Ok(c) => c,
                    Err(e) => return Answer::Unreachable(e),
                }
            }
        };
        let mut conn = conn;
        let answer = self.ask_on(&mut conn, sentinel);
        // A connection whose reply stream may be out of step is not kept.
        if !matches!(answer, Answer::Unreachable(_)) {
            *kept = Some(conn);
        }
        answer
    }

    fn ask_on(&self, conn: &mut redis::Connection, sentinel: &Endpoint) -> Answer {
        let reply: RedisResult<Option<(String, u16)>> = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(&self.master_name)
            .query(conn);
        let named = match reply {
            Ok(Some((host, port))) => join_host_port(&host, port),
            Ok(None) => return Answer::Unknown,
            Err(e)
                if e.to_string()
                    .to_ascii_lowercase()
                    .contains("unknown command") =>
            {
                return Answer::NotSentinel(format!(
                    "{} is a Redis server, not a sentinel (it does not know the SENTINEL command)",
                    sentinel.addr()
                ));
            }
            Err(e) => return Answer::Unreachable(e),
        };
        let record: RedisResult<Vec<String>> = redis::cmd("SENTINEL")
            .arg("MASTER")
            .arg(&self.master_name)
            .query(conn);
        let fields = match record {
            Ok(flat) => flat,
            Err(e) if is_connection_error(&e) => return Answer::Unreachable(e),
            // A sentinel user allowed GET-MASTER-ADDR-BY-NAME only: its word counts, with
            // no epoch to rank it by.
            Err(_) => Vec::new(),
        };
        let field = |name: &str| {
            fields
                .chunks(2)
                .find_map(|kv| (kv.len() == 2 && kv[0] == name).then_some(kv[1].as_str()))
        };
        let record = match (field("ip"), field("port").and_then(|p| p.parse().ok())) {
            (Some(host), Some(port)) => join_host_port(host, port),
            _ => named.clone(),
        };
        Answer::Master(Report {
            epoch: field("config-epoch")
                .and_then(|e| e.parse().ok())
                .unwrap_or(0),
            failing_over: field("flags").is_some_and(|f| f.contains("failover_in_progress")),
            replicas: field("num-slaves")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0),
            record,
            named,
        })
    }

    /// Connections to one sentinel.
    pub(super) fn sentinel_connector(&self, sentinel: &Endpoint) -> Result<Connector> {
        Ok(Connector::to(
            sentinel,
            self.nodes.connect_timeout(),
            self.nodes.response_timeout(),
        )?
        .named(self.nodes.name()))
    }

    /// Whether the node at `addr` says `master` to `ROLE`.
    fn confirm(&self, addr: &str) -> std::result::Result<(), Unconfirmed> {
        let unusable = |e: &dyn std::fmt::Display| Unconfirmed::Unusable(format!("{addr}: {e}"));
        let node = self.nodes.node(addr).map_err(|e| unusable(&e))?;
        let mut conn = node.pool.connector().connect().map_err(|e| {
            if is_connection_error(&e) {
                unusable(&e)
            } else {
                Unconfirmed::Refused(e)
            }
        })?;
        let role: redis::Value = redis::cmd("ROLE")
            .query(&mut conn)
            .map_err(|e| unusable(&e))?;
        let first = match &role {
            redis::Value::Array(parts) => parts.first(),
            _ => None,
        };
        match first {
            Some(redis::Value::BulkString(b)) if b.as_slice() == b"master" => {
                node.pool.give(conn);
                Ok(())
            }
            other => Err(Unconfirmed::Unusable(format!(
                "{addr}, which is not a master (ROLE says {other:?})"
            ))),
        }
    }

    /// Asks every sentinel, and returns the first master in their ranking (see
    /// [`ranked`]) that confirms its role. `known` is a master that needs no new `ROLE`
    /// check when it ranks first.
    ///
    /// Every sentinel is asked, not the first that answers: during a failover a
    /// sentinel that has not heard of it yet names the old master, which still says
    /// `master` to `ROLE` until the sentinels reconfigure it, seconds later.
    pub(super) fn find_master(
        &self,
        known: Option<&str>,
    ) -> std::result::Result<String, Box<NotFound>> {
        let mut failure = Box::new(NotFound {
            unknown_everywhere: true,
            not_sentinel: None,
            details: Vec::new(),
            unreachable: None,
            refused: None,
        });
        let mut reached = false;
        let mut reports = Vec::new();
        for (i, sentinel) in self.sentinels.iter().enumerate() {
            let at = sentinel.addr();
            match self.ask(i) {
                Answer::Master(report) => {
                    reached = true;
                    failure.unknown_everywhere = false;
                    reports.push((at, report));
                }
                Answer::Unknown => {
                    reached = true;
                    failure.details.push(format!(
                        "sentinel {at} knows no master named {:?}",
                        self.master_name
                    ));
                }
                Answer::NotSentinel(e) => {
                    failure.not_sentinel.get_or_insert(e.clone());
                    failure.details.push(e);
                }
                Answer::Unreachable(e) => {
                    failure.details.push(format!("sentinel {at}: {e}"));
                    failure.unreachable.get_or_insert(e);
                }
            }
        }
        for (addr, named_by) in ranked(&reports) {
            if known == Some(addr.as_str()) {
                self.note_replicas(&reports, &addr);
                return Ok(addr);
            }
            match self.confirm(&addr) {
                Ok(()) => {
                    self.note_replicas(&reports, &addr);
                    return Ok(addr);
                }
                Err(Unconfirmed::Unusable(e)) => {
                    failure
                        .details
                        .push(format!("sentinel {named_by} names {e}"));
                }
                Err(Unconfirmed::Refused(e)) => {
                    failure
                        .details
                        .push(format!("{addr} refused the login: {e}"));
                    failure.refused = Some((addr, e));
                    break;
                }
            }
        }
        failure.unknown_everywhere &= reached;
        if reached {
            failure.unreachable = None;
        }
        Err(failure)
    }

    /// Whether the sentinels are replacing the master, for an acquire sent in
    /// `generation` (see `replica_sync`). Asked only when the master counts no replicas
    /// or not all of them acknowledged; a master being replaced also makes the monitor
    /// ask for the new one at once, so the acquire's next try goes there.
    ///
    /// Evidence that it is being replaced: the master moved since the acquire was sent;
    /// a sentinel names another master with a configuration epoch no lower than that of
    /// any sentinel naming ours (a failover raises the epoch, so a sentinel that has not
    /// heard of it yet does not outvote one that has); or a sentinel is failing our
    /// master over right now (before the promoted replica says `master`, only its
    /// record's flags tell).
    pub(crate) fn standing(&self, generation: u64) -> Standing {
        // The master and the generation are read together: `install` bumps the
        // generation under the master's write lock, so while the read lock is held an
        // unchanged generation means the master named is the one the acquire ran on.
        // Read apart, the new master could be named with the old generation, and the
        // sentinels' word on it would vouch for a grant on the old one.
        let current = {
            let master = self.master.read();
            if self.generation() != generation {
                drop(master);
                return self.demoted(0, "the master moved while the acquire ran".into());
            }
            master.addr().to_owned()
        };
        let reports: Vec<(String, Report)> = (0..self.sentinels.len())
            .filter_map(|i| match self.ask(i) {
                Answer::Master(r) => Some((self.sentinels[i].addr(), r)),
                _ => None,
            })
            .collect();
        if reports.is_empty() {
            return Standing::Unknown;
        }
        let ours = reports
            .iter()
            .filter(|(_, r)| r.named == current)
            .map(|(_, r)| r.epoch)
            .max();
        self.note_replicas(&reports, &current);
        let known = reports
            .iter()
            .filter(|(_, r)| r.record == current)
            .map(|(_, r)| r.replicas)
            .max()
            .unwrap_or(0);
        for (at, r) in &reports {
            if r.named != current && ours.is_none_or(|e| r.epoch >= e) {
                let why = format!(
                    "sentinel {at} names {} as the master (config epoch {}), not {current}",
                    r.named, r.epoch
                );
                return self.demoted(known, why);
            }
            if r.record == current && r.failing_over {
                let why = format!("sentinel {at} is failing {current} over");
                return self.demoted(known, why);
            }
        }
        Standing::Settled
    }

    /// Keeps the most replicas any report lists for `master` (a sentinel's record of
    /// the master it names) as the [known](Shared::known_replicas) count. Reports whose
    /// record is another node say nothing about it: the figure stays.
    fn note_replicas(&self, reports: &[(String, Report)], master: &str) {
        if let Some(n) = reports
            .iter()
            .filter(|(_, r)| r.record == master)
            .map(|(_, r)| r.replicas)
            .max()
        {
            self.known_replicas.store(n, Ordering::Relaxed);
        }
    }

    fn demoted(&self, replicas: u64, why: String) -> Standing {
        self.kick();
        Standing::Demoted { replicas, why }
    }
}

/// The masters the sentinels name, best first, each with the first sentinel naming
/// it: by the highest configuration epoch among the sentinels naming it (a failover
/// raises the epoch, so the newest word wins), then by how many sentinels name it, then
/// in the order of the sentinel list.
fn ranked(reports: &[(String, Report)]) -> Vec<(String, String)> {
    // (master, first sentinel naming it, best epoch, votes), in first-seen order.
    let mut masters: Vec<(String, String, u64, usize)> = Vec::new();
    for (at, r) in reports {
        match masters.iter_mut().find(|m| m.0 == r.named) {
            Some(m) => {
                m.2 = m.2.max(r.epoch);
                m.3 += 1;
            }
            None => masters.push((r.named.clone(), at.clone(), r.epoch, 1)),
        }
    }
    // A stable sort keeps the list order among equals.
    masters.sort_by(|a, b| b.2.cmp(&a.2).then(b.3.cmp(&a.3)));
    masters.into_iter().map(|m| (m.0, m.1)).collect()
}

/// The master at start: the sentinels are asked until one names a confirmed master,
/// within the retry budget when they name one that is not (yet) confirmed (a failover
/// in progress). Answers that no retry changes fail at once.
pub(super) fn first_master(shared: &Shared) -> Result<String> {
    let mut resend = Resend::within(shared.nodes.budget());
    loop {
        let failure = match shared.find_master(None) {
            Ok(addr) => return Ok(addr),
            Err(failure) => failure,
        };
        if let Some(e) = failure.not_sentinel {
            return Err(Error::Config(e));
        }
        if failure.unknown_everywhere {
            return Err(Error::Config(format!(
                "no sentinel monitors a master named {:?} ({})",
                shared.master_name,
                failure.details.join("; ")
            )));
        }
        if let Some((addr, source)) = failure.refused {
            // A refused login, a database the master does not have, or another refusal.
            let shown = format!("master {:?} at {addr}", shared.master_name);
            return Err(shared
                .nodes
                .node(&addr)?
                .pool
                .connector()
                .first_failure(&shown, source));
        }
        if let Some(source) = failure.unreachable {
            let sentinels: Vec<String> = shared.sentinels.iter().map(Endpoint::addr).collect();
            let address = format!("sentinels {}", sentinels.join(", "));
            // Every sentinel logs in with the same credentials (sentinelUsername,
            // sentinelPassword), so one refusal is the answer for all of them.
            if crate::address::is_login_refusal(&source) {
                return Err(Error::Auth {
                    address,
                    user: shared.sentinels[0].user().to_owned(),
                    source: Box::new(source),
                });
            }
            return Err(Error::Connect { address, source });
        }
        if !resend.pause(&shared.nodes) {
            return Err(Error::Redis(RedisError::from((
                ErrorKind::Io,
                "the sentinels named no live master",
                failure.details.join("; "),
            ))));
        }
    }
}
