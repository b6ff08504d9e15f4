//! Replica sync after an acquire, as Redisson's `checkLockSyncedSlaves`: `WAIT` on the
//! connection that ran the acquiring script, for the replicas the master has.
//!
//! Replication is asynchronous: a lock written to a master that dies before any replica
//! got it is gone after the failover, and the promoted replica grants it again. `WAIT n
//! timeout` blocks until `n` replicas acknowledged everything this *connection* wrote
//! (it counts per connection, so it must follow the script on the same one), or the
//! timeout passed, and answers how many did. As in Redisson, only "none acknowledged
//! while the master has replicas" fails the acquire: the caller undoes the hold and
//! tries again. Partial acknowledgement passes. It narrows the hole, it does not close
//! it: a replica that acknowledged may still not be the one promoted, and a write
//! acknowledged by no replica in time may still arrive later.
//!
//! The replica count comes from the master's `INFO replication` (the replicas in sync,
//! not `connected_slaves`, see [`connected_replicas`]), read on the same connection, kept per master (a cluster has several, each with its
//! own replicas) until the topology changes or a `WAIT` answers a different count. The
//! first `WAIT` that the server refuses (a proxy without it) turns the check off for
//! the client, with one warning.
//!
//! # A master being demoted
//!
//! "No replicas, so nothing to wait for" is not enough where the deployment can say
//! more. During a planned Sentinel failover the old master keeps taking writes until the
//! sentinels reconfigure it, and its replicas leave it first: it then counts none, and a
//! client that has not yet seen the switch would be granted locks there with no `WAIT`,
//! holds the new master never receives (issue 27). Before that, the replica promoted
//! leaves first, and the others acknowledge holds they drop when they follow it. So
//! whenever fewer replicas acknowledge than the master counted in this topology
//! generation (none counted, some silent, some gone), the topology is asked for its
//! [`Standing`]: a master the sentinels are replacing fails the acquire as unsynced
//! ([`Synced::Demoted`]; the caller undoes the hold and tries again, by then on the
//! master the sentinels name). Without an answer from the topology, a master that
//! counted replicas before in this generation and counts none now is taken for
//! one being demoted too. The question costs nothing while every replica acknowledges.
//!
//! "Counted before" starts from what the topology lists: the sentinels' replica count
//! for the master, when last asked. A client whose first acquire on a master comes
//! after a failover began (a new client, or a new generation's first acquire) has not
//! counted anything itself, and would otherwise take the replicas left as all there
//! were.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::config::Config;
use crate::error::is_connection_error;

/// How long the topology's word that a master with no replicas is not being replaced is
/// trusted without asking again. Only a master with no replica in sync gets it, and such
/// a master gives no hold a protection that a failover could keep (whichever replica a
/// failover promotes lacks it anyway), so the word only saves questions: several per
/// acquire on a master whose replicas are down or still syncing. A master that counted
/// replicas and lost them is asked at each acquire.
const VOUCHED_FOR: Duration = Duration::from_secs(1);

/// What the `WAIT` after one acquire found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Synced {
    /// No check: off, refused by the server, or nothing was taken.
    Unchecked,
    /// At least one replica acknowledged, or the master has none.
    Acked,
    /// The master counts `replicas` replicas and none acknowledged.
    NoneAcked { replicas: u64 },
    /// The master is being demoted (see the module docs): it had `replicas` replicas,
    /// and the acquire is not synced whatever `WAIT` said.
    Demoted { replicas: u64 },
}

/// What the deployment, besides the master itself, says about the master an acquire
/// ran on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Standing {
    /// The topology has no word of its own on masters (a single server, a cluster):
    /// the master's count stands.
    NoView,
    /// The topology vouches for the master: it is not being replaced.
    Settled,
    /// The topology could not be asked (every sentinel down).
    Unknown,
    /// The master is being replaced, for the reason given; `replicas` is how many
    /// replicas the topology knew for it.
    Demoted { replicas: u64, why: String },
}

/// One master's replica count, as last read.
#[derive(Debug, Clone, Copy)]
struct Replicas {
    group: u64,
    /// The count to ask `WAIT` for; `None`: read it again. Zero is never kept: a master
    /// that counts no replicas is asked again at each acquire (see `alone`).
    count: Option<u64>,
    /// The most replicas this master counted in this generation, or since the
    /// topology last vouched for it with fewer.
    peak: u64,
    /// When the topology last vouched for the master while it counted none.
    vouched: Option<Instant>,
    generation: u64,
}

/// One client's replica-sync state.
#[derive(Debug)]
pub(crate) struct ReplicaSync {
    /// Off by configuration, by topology (a single server), or after a refused `WAIT`.
    on: AtomicBool,
    /// Releases are followed by `WAIT` ([`Config::sync_releases`]); off as `on` is.
    releases_on: AtomicBool,
    timeout: Duration,
    /// The connections' read timeout, restored after each `WAIT`.
    response_timeout: Duration,
    /// Per master (the transport's replica group of a key): its replica count and the
    /// topology generation it was read in. A handful of entries, one per master.
    replicas: Mutex<Vec<Replicas>>,
}

impl ReplicaSync {
    /// Sync as `config` says, where the topology replicates (`replicated`).
    pub(crate) fn new(config: &Config, replicated: bool) -> Self {
        Self {
            on: AtomicBool::new(replicated && config.check_lock_synced_slaves()),
            releases_on: AtomicBool::new(replicated && config.sync_releases()),
            timeout: config.replica_sync.slaves_sync_timeout,
            response_timeout: config.response_timeout,
            replicas: Mutex::new(Vec::new()),
        }
    }

    /// Whether acquires are followed by `WAIT`.
    pub(crate) fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Whether releases are followed by a `WAIT` (`Config::sync_releases`): when not, a
    /// release needs neither its key's replica group nor the topology's generation.
    pub(crate) fn releases_on(&self) -> bool {
        self.releases_on.load(Ordering::Relaxed)
    }

    /// Runs `WAIT` on `conn`, the connection whose last command was the acquiring
    /// script; `generation` is the topology's when the script was sent, `group` the
    /// master the key belonged to then. `standing` asks the topology about the master
    /// (see the module docs); it is called only when fewer replicas acknowledged than
    /// the master has counted in this generation.
    ///
    /// # Errors
    ///
    /// Only connection errors (the outcome of the acquire is then unknown, as after any
    /// lost reply). A server refusing `WAIT` or `INFO` turns the check off instead, so
    /// no error here can make the transport send the script again.
    pub(crate) fn after_acquire(
        &self,
        conn: &mut redis::Connection,
        generation: u64,
        group: u64,
        known: &dyn Fn() -> u64,
        standing: &dyn Fn() -> Standing,
    ) -> redis::RedisResult<Synced> {
        if !self.is_on() {
            return Ok(Synced::Unchecked);
        }
        let (replicas, peak, vouched) = match self.replicas(conn, group, generation, known) {
            Ok(found) => found,
            Err(e) => return self.refused(e, "INFO replication"),
        };
        if replicas == 0 {
            if peak == 0 && vouched.is_some_and(|at| at.elapsed() < VOUCHED_FOR) {
                return Ok(Synced::Acked);
            }
            return Ok(match standing() {
                Standing::Demoted { replicas, why } => {
                    log::debug!("redmutex: an acquire on a master with no replicas left: {why}");
                    Synced::Demoted {
                        replicas: replicas.max(peak),
                    }
                }
                Standing::Unknown if peak > 0 => Synced::Demoted { replicas: peak },
                Standing::Settled => {
                    self.vouched_for(group, generation, 0);
                    Synced::Acked
                }
                Standing::NoView | Standing::Unknown => Synced::Acked,
            });
        }
        let acked = match self.wait(conn, group, replicas) {
            Ok(n) => n,
            Err(e) => return self.refused(e, "WAIT"),
        };
        log::trace!("redmutex: acquire WAIT {replicas} (peak {peak}): {acked} acknowledged");
        if acked == 0 {
            return Ok(Synced::NoneAcked { replicas });
        }
        if acked < replicas.max(peak) {
            // Partial acknowledgement passes (as in Redisson), and so does a master that
            // counts fewer replicas than it had, unless replicas are missing because the
            // master is being replaced: the ones that acknowledged may be leaving it to
            // follow the new master, which never got the hold (the replica promoted
            // left first).
            match standing() {
                Standing::Demoted {
                    replicas: known,
                    why,
                } => {
                    log::debug!("redmutex: an acquire not counted as synced: {why}");
                    return Ok(Synced::Demoted {
                        replicas: known.max(peak),
                    });
                }
                Standing::Settled => self.vouched_for(group, generation, replicas),
                // Replicas missing and no sentinel answering: the one time the question
                // matters most is a failover under way, when the sentinels are busiest.
                // Without their word the missing replicas count as a demotion, as they do
                // when none is left; the caller undoes the hold and tries again.
                Standing::Unknown => {
                    log::debug!(
                        "redmutex: an acquire not counted as synced: {acked} of {} replicas \
                         acknowledged and no sentinel answered",
                        replicas.max(peak)
                    );
                    return Ok(Synced::Demoted {
                        replicas: replicas.max(peak),
                    });
                }
                Standing::NoView => {}
            }
        }
        Ok(Synced::Acked)
    }

    /// Runs `WAIT` on `conn`, the connection whose last command was a release script
    /// that changed the lock (see [`Config::sync_releases`]). Only the count matters
    /// here, not the master's standing: a release on a master being demoted cannot be
    /// made to count on the new one, and its hold there (if it had one) ends with its
    /// lease. `Acked` when every replica or at least one acknowledged, `NoneAcked` when
    /// none did, `Unchecked` when the `WAIT` is off or refused.
    ///
    /// # Errors
    ///
    /// Only connection errors: the release's outcome is known by then, so the caller
    /// reports the missing confirmation and keeps the outcome.
    pub(crate) fn after_release(
        &self,
        conn: &mut redis::Connection,
        generation: u64,
        group: u64,
    ) -> redis::RedisResult<Synced> {
        if !self.releases_on.load(Ordering::Relaxed) {
            return Ok(Synced::Unchecked);
        }
        let (replicas, _, _) = match self.replicas(conn, group, generation, &|| 0) {
            Ok(found) => found,
            Err(e) => return self.refused(e, "INFO replication"),
        };
        if replicas == 0 {
            return Ok(Synced::Acked);
        }
        match self.wait(conn, group, replicas) {
            Ok(0) => Ok(Synced::NoneAcked { replicas }),
            Ok(_) => Ok(Synced::Acked),
            Err(e) => self.refused(e, "WAIT"),
        }
    }

    /// The replica count to `WAIT` for on the master of `group` (cached for this
    /// `generation`, else read from `conn`), with its peak and the topology's last word
    /// on it. A master first counted in this generation starts from the replicas the
    /// topology lists for it (`known`), not only from what it counts now.
    fn replicas(
        &self,
        conn: &mut redis::Connection,
        group: u64,
        generation: u64,
        known: &dyn Fn() -> u64,
    ) -> redis::RedisResult<(u64, u64, Option<Instant>)> {
        // A redirect may have sent the script to another master than `group` names; the
        // count is then that master's guess. Harmless: too high a count makes WAIT wait
        // out its timeout and answer the real one (which drops the count below), too low
        // a count returns early; "none acknowledged" is exact either way.
        let (cached, mut peak, vouched) = self
            .replicas
            .lock()
            .iter()
            .find(|r| r.group == group && r.generation == generation)
            .map_or_else(|| (None, known(), None), |r| (r.count, r.peak, r.vouched));
        if let Some(n) = cached {
            return Ok((n, peak, vouched));
        }
        let count = connected_replicas(conn)?;
        log::trace!("redmutex: INFO replication: {count} replicas in sync (peak {peak})");
        peak = peak.max(count);
        let mut all = self.replicas.lock();
        // Entries of older generations describe masters as they were.
        all.retain(|r| r.group != group && r.generation == generation);
        all.push(Replicas {
            group,
            count: (count > 0).then_some(count),
            peak,
            // Read only where the master still counts none.
            vouched,
            generation,
        });
        Ok((count, peak, vouched))
    }

    /// `WAIT replicas timeout` on `conn`: how many replicas acknowledged this
    /// connection's writes. Another answer than `replicas` drops the cached count.
    fn wait(
        &self,
        conn: &mut redis::Connection,
        group: u64,
        replicas: u64,
    ) -> redis::RedisResult<u64> {
        // WAIT may block for the whole sync timeout: the socket must wait longer.
        conn.set_read_timeout(Some(self.timeout + self.response_timeout))?;
        let acked = redis::cmd("WAIT")
            .arg(replicas)
            .arg(self.timeout.as_millis().min(u128::from(u64::MAX)) as u64)
            .query::<u64>(conn);
        conn.set_read_timeout(Some(self.response_timeout))?;
        let acked = acked?;
        if acked != replicas {
            // Redisson reads the count again when WAIT answers another one: a replica
            // may have left or joined. The peak stays: it is what tells a master that
            // lost its replicas from one that never had any.
            for r in self.replicas.lock().iter_mut().filter(|r| r.group == group) {
                r.count = None;
            }
        }
        Ok(acked)
    }

    /// The topology vouched for the master of `group` while it counted `count`
    /// replicas: fewer than its peak is no longer a sign of a demotion, so the peak
    /// comes down to `count` and later acquires ask no more until it falls below that.
    /// With none counted, the word is also kept for [`VOUCHED_FOR`].
    fn vouched_for(&self, group: u64, generation: u64, count: u64) {
        let mut all = self.replicas.lock();
        if let Some(r) = all
            .iter_mut()
            .find(|r| r.group == group && r.generation == generation)
        {
            r.peak = count;
            r.vouched = (count == 0).then(Instant::now);
        }
    }

    /// A failed `INFO` or `WAIT`: a broken connection is the caller's error; a refusal
    /// turns the check off for good, with one warning.
    fn refused(&self, err: redis::RedisError, what: &str) -> redis::RedisResult<Synced> {
        if is_connection_error(&err) {
            return Err(err);
        }
        let releases = self.releases_on.swap(false, Ordering::Relaxed);
        if self.on.swap(false, Ordering::Relaxed) | releases {
            log::warn!(
                "redmutex: the server refused {what} ({err}); lock writes are no longer \
                 followed by WAIT (check_lock_synced_slaves and sync_releases are off from \
                 now on)"
            );
        }
        Ok(Synced::Unchecked)
    }
}

/// The replicas in sync, from `INFO replication`: `slaveN:` lines with `state=online`.
///
/// `connected_slaves` also counts a replica still waiting for or receiving a full resync
/// (`wait_bgsave`, `send_bulk`), which cannot acknowledge anything until the resync is
/// done; counting it would make `WAIT` wait out its timeout after every acquire. After a
/// failover that is the normal case for seconds (the server's default
/// `repl-diskless-sync-delay` alone is 5 s), and each timed-out acquire was undone and
/// tried again.
fn connected_replicas(conn: &mut redis::Connection) -> redis::RedisResult<u64> {
    let info: String = redis::cmd("INFO").arg("replication").query(conn)?;
    Ok(in_sync_replicas(&info))
}

fn in_sync_replicas(info: &str) -> u64 {
    info.lines()
        .filter_map(|l| l.strip_prefix("slave"))
        .filter_map(|l| l.split_once(':'))
        .filter(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .filter(|(_, fields)| fields.trim_end().split(',').any(|f| f == "state=online"))
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::in_sync_replicas;

    #[test]
    fn only_online_replicas_are_counted() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:3\r\n\
            slave0:ip=127.0.0.1,port=7001,state=online,offset=4242,lag=0\r\n\
            slave1:ip=127.0.0.1,port=7002,state=wait_bgsave,offset=0,lag=0\r\n\
            slave2:ip=127.0.0.1,port=7003,state=send_bulk,offset=0,lag=1\r\n\
            slave_read_repl_offset:1\r\nmaster_repl_offset:4242\r\n";
        assert_eq!(in_sync_replicas(info), 1);
        assert_eq!(
            in_sync_replicas("# Replication\r\nrole:master\r\nconnected_slaves:0\r\n"),
            0
        );
    }
}
