//! Whether a holder's client is still connected, from `CLIENT LIST`.
//!
//! redmutex clients name every connection `redmutex:<client-id>`, so a live redmutex
//! holder is always found. Redisson names its connections only when `clientName` is set,
//! and then with that fixed name, never with its id. So a holder whose id no connection
//! carries is reported as gone (`false`) only when every other connection is a named
//! redmutex one: then nobody could be that holder. Otherwise it is unknown (`None`), and
//! the other clients' names are shown so that a person can judge.

use std::collections::BTreeMap;

use crate::connect::Redis;

/// What `CLIENT LIST` showed, the tool's own connections left out.
#[derive(Debug, Default)]
pub(crate) struct Presence {
    /// Names of connections, with how many carry each.
    names: BTreeMap<String, usize>,
    /// Connections without a name.
    unnamed: usize,
    /// Why `CLIENT LIST` could not be read, if it could not.
    unavailable: Option<String>,
}

/// The answer for one client id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Connected {
    /// A connection carries the id; the name it has.
    Yes(String),
    /// No connection could belong to it.
    No,
    /// Connections exist that could be it (unnamed, or named by their application).
    Unknown,
}

impl Connected {
    /// The JSON value: `true`, `false` or `null`.
    pub(crate) fn as_json(&self) -> Option<bool> {
        match self {
            Self::Yes(_) => Some(true),
            Self::No => Some(false),
            Self::Unknown => None,
        }
    }
}

impl Presence {
    /// Reads `CLIENT LIST` on every node.
    pub(crate) fn read(redis: &mut Redis) -> Self {
        let own = redis.own_ids();
        let mut presence = Self::default();
        for conn in redis.nodes() {
            let list: String = match redis::cmd("CLIENT").arg("LIST").query(conn) {
                Ok(list) => list,
                Err(e) => {
                    presence.unavailable = Some(e.to_string());
                    continue;
                }
            };
            for line in list.lines() {
                let field = |key: &str| {
                    line.split(' ')
                        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
                };
                if field("id")
                    .and_then(|id| id.parse::<i64>().ok())
                    .is_some_and(|id| own.contains(&id))
                {
                    continue;
                }
                match field("name") {
                    Some(name) if !name.is_empty() => {
                        *presence.names.entry(name.to_owned()).or_default() += 1;
                    }
                    _ => presence.unnamed += 1,
                }
            }
        }
        presence
    }

    /// Whether the client `client_id` is connected.
    pub(crate) fn of(&self, client_id: &str) -> Connected {
        if let Some(name) = self.names.keys().find(|n| n.contains(client_id)) {
            return Connected::Yes(name.clone());
        }
        if self.unavailable.is_some() || self.unnamed > 0 || !self.others().is_empty() {
            return Connected::Unknown;
        }
        Connected::No
    }

    /// Connection names that are not redmutex clients', with their counts.
    pub(crate) fn others(&self) -> Vec<(&str, usize)> {
        self.names
            .iter()
            .filter(|(n, _)| {
                !n.starts_with("redmutex:") && n.as_str() != crate::connect::TOOL_CONNECTION_NAME
            })
            .map(|(n, c)| (n.as_str(), *c))
            .collect()
    }

    /// Connections without a name.
    pub(crate) fn unnamed(&self) -> usize {
        self.unnamed
    }

    /// Why `CLIENT LIST` could not be read.
    pub(crate) fn unavailable(&self) -> Option<&str> {
        self.unavailable.as_deref()
    }
}
