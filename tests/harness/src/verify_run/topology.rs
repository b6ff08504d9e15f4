//! Where a cell runs: a fresh single server behind the fault proxy, or the Sentinel set
//! or Cluster its topology shares across cells.

use std::cell::RefCell;

use crate::cluster::Cluster;
use crate::proxy::FaultProxy;
use crate::sentinel::{MASTER_NAME, SentinelSet};
use crate::server::RedisServer;

/// A Sentinel set or Cluster kept across the cells of its topology.
pub(super) enum Shared {
    Sentinel(SentinelSet),
    Cluster(Cluster),
}

impl Shared {
    pub(super) fn heal(&self) {
        match self {
            Self::Sentinel(s) => s.heal(),
            Self::Cluster(c) => c.heal(),
        }
    }
}

/// Where one cell runs.
pub(super) enum Topo<'a> {
    /// A fresh server per cell, the workers' lock traffic through the fault proxy.
    Single {
        /// In a cell so that the restart nemesis can restart it in place.
        server: RefCell<RedisServer>,
        proxy: FaultProxy,
    },
    Shared(&'a Shared),
}

impl Topo<'_> {
    /// The workers' topology options.
    pub(super) fn worker_args(&self) -> Vec<String> {
        match self {
            Self::Single { server, proxy } => {
                let direct = server.borrow().url();
                vec!["--url".into(), proxy.url(), "--direct".into(), direct]
            }
            Self::Shared(Shared::Sentinel(s)) => vec![
                "--sentinels".into(),
                s.sentinel_urls().join(","),
                "--master-name".into(),
                MASTER_NAME.into(),
            ],
            Self::Shared(Shared::Cluster(c)) => vec!["--cluster".into(), c.urls().join(",")],
        }
    }

    /// The Java history worker's (lock target, direct target): the proxy and the server
    /// on a single server; the same Sentinel or Cluster spec twice elsewhere, as both of
    /// its clients follow the master there (see `History.java`).
    pub(super) fn java_targets(&self) -> (String, String) {
        match self {
            Self::Single { server, proxy } => (proxy.url(), server.borrow().url()),
            Self::Shared(Shared::Sentinel(s)) => {
                let t = format!("sentinel:{MASTER_NAME}@{}", s.sentinel_urls().join(","));
                (t.clone(), t)
            }
            Self::Shared(Shared::Cluster(c)) => {
                let t = format!("cluster:{}", c.urls().join(","));
                (t.clone(), t)
            }
        }
    }

    /// A connection to the node that holds the lock `name` now.
    pub(super) fn lock_node(&self, name: &str) -> Result<redis::Connection, String> {
        let port = match self {
            Self::Single { server, .. } => server.borrow().port(),
            Self::Shared(Shared::Sentinel(s)) => s.master().port,
            Self::Shared(Shared::Cluster(c)) => c.master_for_key(name).port,
        };
        crate::supervised::connect(port).map_err(|e| format!("{port}: {e}"))
    }

    /// Ports of every data node (not the sentinels).
    pub(super) fn data_ports(&self) -> Vec<u16> {
        match self {
            Self::Single { server, .. } => vec![server.borrow().port()],
            Self::Shared(Shared::Sentinel(s)) => s.data_ports(),
            Self::Shared(Shared::Cluster(c)) => c.ports(),
        }
    }
}
