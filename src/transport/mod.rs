//! The one seam for Redis I/O: every command, script call, subscription and renewal
//! reaches Redis through this module, addressed by the key (or channel) it concerns,
//! never through a connection picked by the caller.
//!
//! A deployment is a set of nodes plus a rule that maps a key to the node that owns it.
//! A single server is one node that owns every key ([`single`]); a Redis Cluster maps a
//! key's hash slot to its master and keeps that map current ([`cluster`]). Lock kinds,
//! semaphores and the latch never see nodes: they call
//! [`Core::run`](crate::core::Core::run) with the key of the object, and the transport
//! decides where the command goes, what is sent again after a failure (never a command
//! whose reply may have been lost), and which publish command the scripts use.
//!
//! | need                         | entry point                         |
//! |------------------------------|-------------------------------------|
//! | one command or script        | [`Transport::run`]                  |
//! | how unlocks are published    | [`Transport::publish`] → [`Publish`] |
//! | where subscriptions go       | [`Transport::routes`] → [`Routes`]  |
//! | the watchdog's connections   | [`Transport::dedicated`] → [`Dedicated`] |
//! | a connection driven by hand  | [`Transport::checkout`] → [`Checkout`] |
//!
//! `docs/design.md` ("How a topology plugs in") says what a new topology implements.

mod checkout;
mod cluster;
mod connector;
mod dial;
mod nodes;
mod pool;
pub(crate) mod publish;
pub(crate) mod replica_sync;
mod sentinel;
mod single;
// Items that `admin` re-exports are `pub`; without that feature nothing reaches them.
#[cfg_attr(not(feature = "admin"), allow(unreachable_pub))]
pub(crate) mod slots;
mod turns;

use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use crate::error::Result;
use publish::Publish;
use replica_sync::Standing;

pub(crate) use checkout::Checkout;
pub(crate) use connector::Connector;
pub(crate) use turns::urgent;

/// How the client reaches Redis: its nodes and the rule that routes a key to one.
#[derive(Debug)]
pub(crate) struct Transport {
    topology: Topology,
}

/// What a client's connections call themselves: `redmutex:<client-id>`, so that
/// `CLIENT LIST` (and `redmutex status`) can tell whether a lock's holder is connected.
/// Every connection to every node carries it.
pub(crate) fn connection_name(client_id: &str) -> String {
    format!("redmutex:{client_id}")
}

#[derive(Debug)]
enum Topology {
    Single(Arc<single::Node>),
    Cluster(cluster::Cluster),
    Sentinel(sentinel::Sentinel),
}

impl Transport {
    /// Connects to the deployment `config` names: the master the sentinels name when it
    /// has a master name, a cluster when it has node addresses, else the single server
    /// at its address. Every connection is named after `client_id`
    /// ([`connection_name`]).
    ///
    /// # Errors
    ///
    /// [`Error::Config`](crate::Error::Config) for an address that does not parse, a
    /// pool that cannot be filled, a cluster address that is a single server or a
    /// cluster with slots nobody serves, a sentinel address that is a plain server or a
    /// master name no sentinel knows; [`Error::Connect`](crate::Error::Connect) when
    /// the first connection fails (for a cluster: when no seed answers; in sentinel
    /// mode: when no sentinel answers or the master refuses the login);
    /// [`Error::Permission`](crate::Error::Permission) or
    /// [`Error::Redis`](crate::Error::Redis) when a cluster seed refuses.
    pub(crate) fn open(config: &Config, client_id: &str) -> Result<Self> {
        let name = connection_name(client_id);
        let topology = if config.is_sentinel() {
            Topology::Sentinel(sentinel::Sentinel::open(config, &name)?)
        } else if config.is_cluster() {
            Topology::Cluster(cluster::Cluster::open(config, &name)?)
        } else {
            Topology::Single(Arc::new(single::Node::open(config, &name)?))
        };
        Ok(Self { topology })
    }

    /// Runs `f` on a pooled connection to the node that owns `key`, classifying its
    /// error for the object `key` names. `f` runs again only when the previous try
    /// certainly did not run (a redirect, a refused connection, a pooled connection
    /// found dead before sending); never after a timeout.
    pub(crate) fn run<T>(
        &self,
        key: &str,
        f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        match &self.topology {
            Topology::Single(node) => node.run(key, f),
            Topology::Cluster(c) => c.run(key, f),
            Topology::Sentinel(s) => s.run(key, f),
        }
    }

    /// [`run`](Self::run) for a request that must not run twice (an acquire: a second
    /// run takes a second hold): after any connection failure, including a pooled
    /// connection whose read saw it closed, the error comes back. That read cannot tell
    /// a connection that was dead before the request from one closed after the server
    /// ran it, so the caller must find out (see `levels.rs`). Redirects and refusals,
    /// which say the request did not run, are still followed.
    pub(crate) fn run_once<T>(
        &self,
        key: &str,
        f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        match &self.topology {
            Topology::Single(node) => node.run_once(key, f),
            // Neither resends after a connection failure.
            Topology::Cluster(c) => c.run(key, f),
            Topology::Sentinel(s) => s.run(key, f),
        }
    }

    /// A connection to the node that owns `key`, for a caller that writes a request and
    /// reads its reply in two steps (the quorum engine writes to every member before it
    /// reads any reply). See [`Checkout`]. With `wait` `None` only an idle connection
    /// will do (`Ok(None)` when there is none); otherwise one may be opened, waiting at
    /// most `wait` (and never longer than the connection timeout). On a cluster the
    /// connection goes to the slot's master as the map names it now: a redirect comes
    /// back as the request's error reply.
    ///
    /// # Errors
    ///
    /// [`Error::PoolTimeout`](crate::Error::PoolTimeout) when no connection becomes free
    /// in time; a connect error for a cluster master that cannot be reached.
    pub(crate) fn checkout(&self, key: &str, wait: Option<Duration>) -> Result<Option<Checkout>> {
        match &self.topology {
            Topology::Single(node) => node.checkout(wait),
            Topology::Cluster(c) => c.checkout(key, wait),
            Topology::Sentinel(s) => s.checkout(key, wait),
        }
    }

    /// Whether the master of a key has replicas that an acquire can wait for (sentinel
    /// and cluster modes, as Redisson's; see `replica_sync`).
    pub(crate) fn replicates(&self) -> bool {
        matches!(self.topology, Topology::Sentinel(_) | Topology::Cluster(_))
    }

    /// Which master `key` lives on, as an index that stays valid within one
    /// [`generation`](Self::generation): replica counts are kept per master.
    pub(crate) fn replica_group(&self, key: &str) -> u64 {
        match &self.topology {
            Topology::Single(_) | Topology::Sentinel(_) => 0,
            Topology::Cluster(c) => c.shared().group(key),
        }
    }

    /// What the topology says about the master an acquire ran on, `generation` being
    /// the topology's when it was sent (see `replica_sync`).
    pub(crate) fn standing(&self, generation: u64) -> Standing {
        match &self.topology {
            Topology::Single(_) | Topology::Cluster(_) => Standing::NoView,
            Topology::Sentinel(s) => s.shared().standing(generation),
        }
    }

    /// How many replicas the topology itself lists for the current master (the
    /// sentinels' `num-slaves` when last asked); 0 where it has no such word (a single
    /// server, a cluster). The replica check's starting peak (see `replica_sync`).
    pub(crate) fn known_replicas(&self) -> u64 {
        match &self.topology {
            Topology::Single(_) | Topology::Cluster(_) => 0,
            Topology::Sentinel(s) => s.shared().known_replicas(),
        }
    }

    /// Changes whenever the owner of some key may have changed (a failover).
    pub(crate) fn generation(&self) -> u64 {
        match &self.topology {
            Topology::Single(_) => 0,
            Topology::Cluster(c) => c.shared().generation(),
            Topology::Sentinel(s) => s.shared().generation(),
        }
    }

    /// How unlock and release messages are published, as the Redisson clients of this
    /// deployment listen for them.
    pub(crate) fn publish(&self) -> Publish {
        match &self.topology {
            Topology::Single(_) | Topology::Sentinel(_) => Publish::PLAIN,
            Topology::Cluster(c) => c.shared().publish(),
        }
    }

    /// Where the listener's subscriptions go.
    pub(crate) fn routes(&self) -> Routes {
        Routes(match &self.topology {
            Topology::Single(node) => RoutesOf::Single(Arc::clone(node)),
            Topology::Cluster(c) => RoutesOf::Cluster(Arc::clone(c.shared())),
            Topology::Sentinel(s) => RoutesOf::Sentinel(Arc::clone(s.shared())),
        })
    }

    /// Connections for a background thread that must not wait for the pool: opened on
    /// demand, one per node, with connect and response timeouts capped at `cap`.
    pub(crate) fn dedicated(&self, config: &Config, cap: Duration) -> Dedicated {
        let connect = config.connection_timeout.min(cap);
        let response = config.response_timeout.min(cap);
        Dedicated(match &self.topology {
            Topology::Single(node) => {
                DedicatedOf::Single(Box::new(node.dedicated(connect, response)))
            }
            Topology::Cluster(c) => DedicatedOf::Cluster(c.dedicated(connect, response)),
            Topology::Sentinel(s) => DedicatedOf::Sentinel(s.dedicated(connect, response)),
        })
    }

    /// Stops the topology's own thread (the cluster's scanner), if any.
    pub(crate) fn shutdown(&self) {
        match &self.topology {
            Topology::Single(_) => {}
            Topology::Cluster(c) => c.shutdown(),
            Topology::Sentinel(s) => s.shutdown(),
        }
    }
}

/// Where subscriptions for a channel go, for the listener: the node that owns the
/// channel (a cluster's slot master), and what to do when that changes.
#[derive(Debug, Clone)]
pub(crate) struct Routes(RoutesOf);

#[derive(Debug, Clone)]
enum RoutesOf {
    Single(Arc<single::Node>),
    Cluster(Arc<cluster::Shared>),
    Sentinel(Arc<sentinel::Shared>),
}

/// A node subscriptions can be made on.
#[derive(Debug, Clone)]
pub(crate) struct Home {
    /// `host:port`: the node's identity for the listener.
    pub(crate) addr: String,
    /// RESP3 connections to it.
    pub(crate) connector: Connector,
}

impl Home {
    /// Subscriptions on `node`, a node of a multi-node topology.
    fn of(node: &nodes::Node) -> Self {
        Self {
            addr: node.addr().to_owned(),
            connector: node.pubsub_connector().clone(),
        }
    }
}

impl Routes {
    /// The node whose subscriptions hear `channel`.
    pub(crate) fn home(&self, channel: &str) -> Result<Home> {
        match &self.0 {
            RoutesOf::Single(node) => Ok(Home {
                addr: node.addr().to_owned(),
                connector: node.pubsub_connector().clone(),
            }),
            RoutesOf::Cluster(c) => c.home(channel).map(|n| Home::of(&n)),
            RoutesOf::Sentinel(s) => Ok(Home::of(&s.master())),
        }
    }

    /// The node at `addr` (learned from a redirect).
    pub(crate) fn home_at(&self, addr: &str) -> Result<Home> {
        match &self.0 {
            RoutesOf::Single(node) => Ok(Home {
                addr: node.addr().to_owned(),
                connector: node.pubsub_connector().clone(),
            }),
            RoutesOf::Cluster(c) => c.node_at(addr).map(|n| Home::of(&n)),
            RoutesOf::Sentinel(s) => s.node_at(addr).map(|n| Home::of(&n)),
        }
    }

    /// The one node of a topology that has only one (a single server), whose session
    /// the listener starts at once.
    pub(crate) fn fixed_home(&self) -> Option<String> {
        match &self.0 {
            RoutesOf::Single(node) => Some(node.addr().to_owned()),
            RoutesOf::Cluster(_) | RoutesOf::Sentinel(_) => None,
        }
    }

    /// A node dropped a subscription by itself (a slot migrated, a failover): read the
    /// topology again soon.
    pub(crate) fn refresh_soon(&self) {
        match &self.0 {
            RoutesOf::Single(_) => {}
            RoutesOf::Cluster(c) => c.kick(),
            RoutesOf::Sentinel(s) => s.kick(),
        }
    }

    /// How unlock messages are published, and so which subscriptions each channel
    /// needs.
    pub(crate) fn publishing(&self) -> Publish {
        match &self.0 {
            RoutesOf::Single(_) | RoutesOf::Sentinel(_) => Publish::PLAIN,
            RoutesOf::Cluster(c) => c.publish(),
        }
    }

    /// Changes whenever the owners of channels may have changed.
    pub(crate) fn generation(&self) -> u64 {
        match &self.0 {
            RoutesOf::Single(_) => 0,
            RoutesOf::Cluster(c) => c.generation(),
            RoutesOf::Sentinel(s) => s.generation(),
        }
    }

    /// Whether `addr` still owns channels (a cluster node that lost its slots does not).
    pub(crate) fn is_current(&self, addr: &str) -> bool {
        match &self.0 {
            RoutesOf::Single(_) => true,
            RoutesOf::Cluster(c) => c.is_master(addr),
            RoutesOf::Sentinel(s) => s.is_master(addr),
        }
    }

    /// Applies a `MOVED` answer to a subscription: the address of the channel's owner.
    pub(crate) fn moved(&self, err: &redis::RedisError) -> Option<String> {
        match &self.0 {
            RoutesOf::Single(_) | RoutesOf::Sentinel(_) => None,
            RoutesOf::Cluster(c) => c.moved(err),
        }
    }

    /// The subscriber connection to `addr` failed or the node dropped a subscription
    /// (a migration or failover): read the topology again soon.
    pub(crate) fn unsettled(&self, addr: &str) {
        match &self.0 {
            RoutesOf::Single(_) => {}
            RoutesOf::Cluster(c) => c.node_failed(addr),
            RoutesOf::Sentinel(s) => s.node_failed(addr),
        }
    }

    /// A best-effort `PUBLISH` on the node at `addr` (the listener's control channel).
    pub(crate) fn publish(&self, addr: &str, channel: &str, message: &str) -> Result<()> {
        match &self.0 {
            RoutesOf::Single(node) => node.publish(channel, message),
            RoutesOf::Cluster(c) => c.node_at(addr)?.publish(channel, message),
            RoutesOf::Sentinel(s) => s.node_at(addr)?.publish(channel, message),
        }
    }
}

/// How a batched renewal names its keys, so that one script call is valid on the node
/// it is sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Batching {
    /// As declared `KEYS`: a single server accepts any mix.
    Declared,
    /// Undeclared, per node: a cluster refuses declared keys of several slots in one
    /// call (`CROSSSLOT`), so a batch holds all keys of one master and names them as
    /// arguments to a script flagged `allow-cross-slot-keys`. A key the node no longer
    /// holds (migrated) then answers "not here", and is confirmed by a routed
    /// single-key call. `script_flags`: the cluster knows script flags (Redis 7.0+);
    /// before 7.0 the same scripts go without their flags line, which those servers
    /// cannot compile and do not need (they never check the keys a script touches).
    PerNode { script_flags: bool },
}

/// Keys whose commands may share one multi-key script call; see [`Dedicated::group`].
pub(crate) type Group = u64;

/// A background thread's own connections, one per node, opened on demand; a failed
/// command drops its connection so that the next one starts clean.
#[derive(Debug)]
pub(crate) struct Dedicated(DedicatedOf);

#[derive(Debug)]
enum DedicatedOf {
    // Boxed: a connection is large, the cluster's variant holds a map of them.
    Single(Box<single::Dedicated>),
    Cluster(cluster::Dedicated),
    Sentinel(sentinel::Dedicated),
}

impl Dedicated {
    /// How batched renewals must name their keys.
    pub(crate) fn batching(&self) -> Batching {
        match &self.0 {
            DedicatedOf::Single(_) | DedicatedOf::Sentinel(_) => Batching::Declared,
            DedicatedOf::Cluster(c) => Batching::PerNode {
                script_flags: c.shared().script_flags,
            },
        }
    }

    /// Which keys may be batched into one script call with `key`: keys of one group live
    /// on one node. A single server has one group; a cluster one per master.
    pub(crate) fn group(&self, key: &str) -> Group {
        match &self.0 {
            DedicatedOf::Single(_) | DedicatedOf::Sentinel(_) => 0,
            DedicatedOf::Cluster(c) => c.group(key),
        }
    }

    /// Runs `f` on the connection to the node that owns `key`, following a cluster's
    /// redirects without waiting. On an I/O error the connection is dropped: its reply
    /// stream may be out of step.
    pub(crate) fn run<T>(
        &mut self,
        key: &str,
        f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> redis::RedisResult<T> {
        match &mut self.0 {
            DedicatedOf::Single(d) => d.run(f),
            DedicatedOf::Cluster(c) => c.run(key, f),
            DedicatedOf::Sentinel(s) => s.run(key, f),
        }
    }

    /// Runs `f` once on the node the current map names for `key`, without redirects:
    /// for a [`Batching::PerNode`] batch, whose script names no keys.
    pub(crate) fn run_on_owner<T>(
        &mut self,
        key: &str,
        f: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> redis::RedisResult<T> {
        match &mut self.0 {
            DedicatedOf::Single(d) => d.run(f),
            DedicatedOf::Cluster(c) => c.run_on_owner(key, f),
            DedicatedOf::Sentinel(s) => s.run_on_owner(key, f),
        }
    }

    /// Drops the connections (their replies made no sense); the next call opens others.
    pub(crate) fn reset(&mut self) {
        match &mut self.0 {
            DedicatedOf::Single(d) => d.reset(),
            DedicatedOf::Cluster(c) => c.reset(),
            DedicatedOf::Sentinel(s) => s.reset(),
        }
    }
}
