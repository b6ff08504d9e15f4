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
//! The replica count comes from the master's `INFO replication` (`connected_slaves`),
//! read on the same connection, kept per master (a cluster has several, each with its
//! own replicas) until the topology changes or a `WAIT` answers a different count. The first `WAIT` that the server refuses (a proxy without it)
//! turns the check off for the client, with one warning.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::config::Config;
use crate::error::is_connection_error;

/// What the `WAIT` after one acquire found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Synced {
    /// No check: off, refused by the server, or nothing was taken.
    Unchecked,
    /// At least one replica acknowledged, or the master has none.
    Acked,
    /// The master counts `replicas` replicas and none acknowledged.
    NoneAcked { replicas: u64 },
}

/// One master's replica count, as last read.
#[derive(Debug, Clone, Copy)]
struct Replicas {
    group: u64,
    count: u64,
    generation: u64,
}

/// One client's replica-sync state.
#[derive(Debug)]
pub(crate) struct ReplicaSync {
    /// Off by configuration, by topology (a single server), or after a refused `WAIT`.
    on: AtomicBool,
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
            timeout: config.replica_sync.slaves_sync_timeout,
            response_timeout: config.response_timeout,
            replicas: Mutex::new(Vec::new()),
        }
    }

    /// Whether acquires are followed by `WAIT`.
    pub(crate) fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Runs `WAIT` on `conn`, the connection whose last command was the acquiring
    /// script; `generation` is the topology's when the script was sent, `group` the
    /// master the key belonged to then.
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
    ) -> redis::RedisResult<Synced> {
        if !self.is_on() {
            return Ok(Synced::Unchecked);
        }
        // A redirect may have sent the script to another master than `group` names; the
        // count is then that master's guess. Harmless: too high a count makes WAIT wait
        // out its timeout and answer the real one (which drops the entry below), too low
        // a count returns early; "none acknowledged" is exact either way.
        let cached = self
            .replicas
            .lock()
            .iter()
            .find(|r| r.group == group && r.generation == generation)
            .map(|r| r.count);
        let replicas = match cached {
            Some(n) => n,
            None => match connected_replicas(conn) {
                Ok(count) => {
                    let mut all = self.replicas.lock();
                    all.retain(|r| r.group != group && r.generation == generation);
                    all.push(Replicas {
                        group,
                        count,
                        generation,
                    });
                    count
                }
                Err(e) => return self.refused(e, "INFO replication"),
            },
        };
        if replicas == 0 {
            return Ok(Synced::Acked);
        }
        // WAIT may block for the whole sync timeout: the socket must wait longer.
        conn.set_read_timeout(Some(self.timeout + self.response_timeout))?;
        let acked = redis::cmd("WAIT")
            .arg(replicas)
            .arg(self.timeout.as_millis().min(u128::from(u64::MAX)) as u64)
            .query::<u64>(conn);
        conn.set_read_timeout(Some(self.response_timeout))?;
        let acked = match acked {
            Ok(n) => n,
            Err(e) => return self.refused(e, "WAIT"),
        };
        if acked != replicas {
            // Redisson reads the count again when WAIT answers another one: a replica
            // may have left or joined.
            self.replicas.lock().retain(|r| r.group != group);
        }
        Ok(if acked == 0 {
            Synced::NoneAcked { replicas }
        } else {
            Synced::Acked
        })
    }

    /// A failed `INFO` or `WAIT`: a broken connection is the caller's error; a refusal
    /// turns the check off for good, with one warning.
    fn refused(&self, err: redis::RedisError, what: &str) -> redis::RedisResult<Synced> {
        if is_connection_error(&err) {
            return Err(err);
        }
        if self.on.swap(false, Ordering::Relaxed) {
            log::warn!(
                "redmutex: the server refused {what} ({err}); acquires are no longer checked \
                 against replicas (check_lock_synced_slaves is off from now on)"
            );
        }
        Ok(Synced::Unchecked)
    }
}

/// `connected_slaves` from `INFO replication`.
fn connected_replicas(conn: &mut redis::Connection) -> redis::RedisResult<u64> {
    let info: String = redis::cmd("INFO").arg("replication").query(conn)?;
    Ok(info
        .lines()
        .find_map(|l| l.strip_prefix("connected_slaves:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0))
}
