//! Learning a cluster at start: the first seed that answers `CLUSTER SLOTS` gives the
//! slot map, the map is checked, the pub/sub kind picked, and the scanner started.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use parking_lot::RwLock;
use redis::{ErrorKind, RedisError};

use super::super::connector::{Connector, Endpoint};
use super::super::nodes::Nodes;
use super::super::publish::{Kinds, Publish};
use super::super::slots::SlotMap;
use super::{Cluster, Shared, scan};
use crate::config::{Config, ShardedSubscriptionMode};
use crate::error::{Error, Result, is_connection_error};

impl Cluster {
    /// Learns the cluster from the first seed that answers `CLUSTER SLOTS`, checks it,
    /// picks the pub/sub kind, opens a connection per master and starts the scanner.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for a bad address, a seed that is a single server, or slots no
    /// master serves (with `check_slots_coverage`); [`Error::Permission`] or
    /// [`Error::Redis`] when the login is refused; [`Error::Redis`] naming every seed
    /// when none could be reached.
    pub(crate) fn open(config: &Config, name: &str) -> Result<Self> {
        let seeds: Vec<Endpoint> = config
            .cluster
            .node_addresses
            .iter()
            .map(|url| Endpoint::from_url(url, config))
            .collect::<Result<_>>()?;
        let Some(template) = seeds.first().cloned() else {
            return Err(Error::Config("no cluster node addresses".into()));
        };
        let (map, found) = learn(&seeds, config, name)?;
        check_coverage(&map, config)?;
        let publish = publishing(config, found.sharded);
        let (nodes, kicked) = Nodes::new(template, config, name);
        let shared = Arc::new(Shared {
            nodes,
            seeds: seeds.iter().map(Endpoint::addr).collect(),
            nat: config.cluster.nat_map.clone(),
            map: RwLock::new(Arc::new(map)),
            generation: AtomicU64::new(0),
            publish,
            script_flags: found.script_flags,
        });
        if config.pool_min_idle.unwrap_or(0) > 0 {
            warm(&shared);
        }
        let interval = config.cluster.scan_interval;
        Self::start(shared, "redmutex-cluster", move |shared| {
            scan::scan(shared, &kicked, interval);
        })
    }
}

/// What the probe at connect found out about the cluster's servers.
#[derive(Debug, Clone, Copy)]
struct Features {
    /// Sharded pub/sub works (and the mode is not `Off`).
    sharded: bool,
    /// Scripts may carry a `#!lua flags=` line (Redis 7.0+, as sharded pub/sub).
    script_flags: bool,
}

/// The slot map, and what the servers support, from the first seed that answers.
fn learn(seeds: &[Endpoint], config: &Config, name: &str) -> Result<(SlotMap, Features)> {
    let nat = &config.cluster.nat_map;
    let dial = |announced: String| {
        nat.iter()
            .find(|(from, _)| *from == announced)
            .map_or(announced, |(_, to)| to.clone())
    };
    let mut failures = Vec::new();
    for seed in seeds {
        let connector =
            Connector::to(seed, config.connection_timeout, config.response_timeout)?.named(name);
        match discover(&connector, config, &dial) {
            Ok(found) => return Ok(found),
            Err(Discovery::Unreachable(e)) => {
                log::warn!("redmutex: cluster seed {} unreachable: {e}", seed.addr());
                failures.push(e);
            }
            Err(Discovery::Fatal(e)) => return Err(e),
        }
    }
    // The first seed's own error keeps its kind, so the message's hint fits (refused,
    // timed out, TLS); the others are in the log.
    let seeds: Vec<String> = config
        .cluster
        .node_addresses
        .iter()
        .map(|url| crate::address::redact(url))
        .collect();
    let source = failures
        .into_iter()
        .next()
        .unwrap_or_else(|| RedisError::from((ErrorKind::Io, "no cluster node could be reached")));
    Err(Error::Connect {
        address: seeds.join(", "),
        source,
    })
}

/// With `check_slots_coverage`, a map with slots no master serves is refused.
fn check_coverage(map: &SlotMap, config: &Config) -> Result<()> {
    let uncovered = map.uncovered();
    if config.cluster.check_slots_coverage && !uncovered.is_empty() {
        let ranges: Vec<String> = uncovered
            .iter()
            .map(|r| format!("{}-{}", r.start(), r.end()))
            .collect();
        return Err(Error::Config(format!(
            "the cluster does not serve every hash slot (no master for slots {}); \
             fix the cluster or set check_slots_coverage(false)",
            ranges.join(", ")
        )));
    }
    Ok(())
}

/// The kinds scripts publish on and waiters subscribe with, from the configured mode
/// and whether the seed has sharded pub/sub.
fn publishing(config: &Config, sharded: bool) -> Publish {
    let heard = match (config.cluster.sharded_subscription_mode, sharded) {
        (ShardedSubscriptionMode::Off, _) | (ShardedSubscriptionMode::Auto, false) => {
            return Publish::PLAIN;
        }
        (ShardedSubscriptionMode::On, _) => Kinds::SHARDED,
        (ShardedSubscriptionMode::Auto, true) => Kinds::BOTH,
    };
    // A fleet mixing peers that listen either way (`publish_both`): one more publish
    // per release, so that none of them waits for a lease to end.
    let on = if config.cluster.publish_both {
        Kinds::BOTH
    } else {
        Kinds::SHARDED
    };
    Publish::new(on, heard)
}

/// One warm connection per master; a master that is down now is not an error yet (its
/// replica may be about to take over).
fn warm(shared: &Shared) {
    let masters: Vec<String> = shared.map().masters().map(str::to_owned).collect();
    for addr in masters {
        let warmed = shared.node(&addr).map_err(Error::from).and_then(|n| {
            let conn = n.pool.take()?;
            n.pool.give(conn);
            Ok(())
        });
        match warmed {
            Ok(()) => {}
            Err(e) => log::warn!("redmutex: cluster master {addr} not reachable: {e}"),
        }
    }
}

/// Why a seed could not tell us the cluster.
enum Discovery {
    /// Down or unreachable: try the next seed.
    Unreachable(RedisError),
    /// An answer that no other seed will change (not a cluster, login refused).
    Fatal(Error),
}

/// Asks one seed for the slot map and whether sharded pub/sub works
/// (`PUBSUB SHARDNUMSUB`, Redisson's probe), which also tells a server before 7.0.
fn discover(
    connector: &Connector,
    config: &Config,
    dial: &dyn Fn(String) -> String,
) -> std::result::Result<(SlotMap, Features), Discovery> {
    let classify = |e: RedisError| {
        if is_connection_error(&e) {
            Discovery::Unreachable(e)
        } else {
            Discovery::Fatal(Error::from_redis("", e))
        }
    };
    // A login the seed refuses is a failed first connection, as on a single server;
    // the PING after it finds a missing password, which the login alone does not.
    let mut conn = connector
        .open_checked(connector.addr())
        .map_err(|e| match e {
            Error::Connect { source, .. } if is_connection_error(&source) => {
                Discovery::Unreachable(source)
            }
            other => Discovery::Fatal(other),
        })?;
    let reply = match redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query::<redis::Value>(&mut conn)
    {
        Ok(reply) => reply,
        Err(e) if e.to_string().contains("cluster support disabled") => {
            return Err(Discovery::Fatal(Error::Config(format!(
                "{} is a single Redis server, not a cluster node (cluster support is \
                 disabled there); use Config::address for a single server",
                connector.addr()
            ))));
        }
        Err(e) => return Err(classify(e)),
    };
    let map = SlotMap::parse(&reply, connector.addr(), dial).map_err(|e| {
        Discovery::Fatal(Error::Config(format!(
            "{} answered CLUSTER SLOTS with something else than a slot map: {e}",
            connector.addr()
        )))
    })?;
    let mode = config.cluster.sharded_subscription_mode;
    // Redisson's probe (asked in every mode: it also tells whether scripts may carry
    // flags, which came with sharded pub/sub in 7.0): a server before 7.0 refuses it.
    let probe = redis::cmd("PUBSUB")
        .arg("SHARDNUMSUB")
        .arg("0")
        .query::<redis::Value>(&mut conn);
    let since_7_0 = match probe {
        Ok(_) => true,
        Err(e) if is_connection_error(&e) => return Err(Discovery::Unreachable(e)),
        // A user not allowed to probe: taken for a 7.0+ server, as before the probe
        // existed; AUTO then stays plain, as Redisson's does.
        Err(e) if e.code() == Some("NOPERM") => {
            return Ok((
                map,
                Features {
                    sharded: mode == ShardedSubscriptionMode::On,
                    script_flags: true,
                },
            ));
        }
        Err(e) => {
            if mode == ShardedSubscriptionMode::On {
                // Forced sharded pub/sub there would SSUBSCRIBE in vain, and every
                // waiter would sleep out the holder's lease: refuse at connect instead.
                return Err(Discovery::Fatal(Error::Config(format!(
                    "sharded_subscription_mode is On, but {} has no sharded pub/sub \
                     (SSUBSCRIBE/SPUBLISH need Redis 7.0+; PUBSUB SHARDNUMSUB answered: {e}); \
                     use Auto or Off there",
                    connector.addr()
                ))));
            }
            if mode == ShardedSubscriptionMode::Auto {
                // AUTO falls back to plain pub/sub, as Redisson's does: said once per client.
                log::warn!(
                    "redmutex: the cluster at {} has no sharded pub/sub (Redis before 7.0); \
                     unlock messages use PUBLISH/SUBSCRIBE, as Redisson's AUTO mode does",
                    connector.addr()
                );
            }
            false
        }
    };
    Ok((
        map,
        Features {
            sharded: since_7_0 && mode != ShardedSubscriptionMode::Off,
            script_flags: since_7_0,
        },
    ))
}
