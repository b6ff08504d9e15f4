//! Redis Cluster hash slots: which slot a key hashes to, and which master serves each
//! slot (the slot map, read from `CLUSTER SLOTS`).

use std::ops::RangeInclusive;

/// Number of hash slots in a Redis Cluster.
pub(crate) const SLOTS: usize = 16384;

/// No master serves the slot.
const NOBODY: u16 = u16::MAX;

/// CRC16/XMODEM (polynomial 0x1021, initial value 0), the checksum of key slots.
fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The slot of `key`: CRC16 of its hash tag (the bytes between the first `{` and the
/// next `}`, when there are any) or of the whole key, modulo 16384. Redis's rule, which
/// Redisson's names rely on to keep an object's keys and channel in one slot.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    // SLOTS is a power of two, so the remainder fits in u16.
    crc16(tagged.unwrap_or(key)) % SLOTS as u16
}

/// Which master serves each slot, by dial address (`host:port`, after the NAT map).
#[derive(Clone, PartialEq, Eq)]
pub struct SlotMap {
    /// Index into `masters` per slot, or [`NOBODY`].
    owner: Box<[u16]>,
    masters: Vec<String>,
}

impl std::fmt::Debug for SlotMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotMap")
            .field("masters", &self.masters)
            .field("uncovered", &self.uncovered())
            .finish()
    }
}

impl SlotMap {
    /// Reads a `CLUSTER SLOTS` reply. `queried` is the node that answered (its address
    /// stands in for an empty endpoint); `dial` maps an announced address to the one to
    /// connect to.
    pub fn parse(
        reply: &redis::Value,
        queried: &str,
        dial: impl Fn(String) -> String,
    ) -> Result<Self, String> {
        let redis::Value::Array(ranges) = reply else {
            return Err(format!("CLUSTER SLOTS answered {reply:?}"));
        };
        let mut map = Self {
            owner: vec![NOBODY; SLOTS].into_boxed_slice(),
            masters: Vec::new(),
        };
        for range in ranges {
            let redis::Value::Array(fields) = range else {
                return Err(format!("bad CLUSTER SLOTS entry {range:?}"));
            };
            let (Some(start), Some(end), Some(master)) = (
                fields.first().and_then(int),
                fields.get(1).and_then(int),
                fields.get(2),
            ) else {
                return Err(format!("bad CLUSTER SLOTS entry {range:?}"));
            };
            let addr = endpoint(master, queried).map(&dial)?;
            if start > end || end >= SLOTS as i64 || start < 0 {
                return Err(format!("bad slot range {start}-{end}"));
            }
            let index = map.index_of(addr)?;
            for slot in start..=end {
                map.owner[slot as usize] = index;
            }
        }
        Ok(map)
    }

    fn index_of(&mut self, addr: String) -> Result<u16, String> {
        if let Some(i) = self.masters.iter().position(|m| *m == addr) {
            return Ok(i as u16);
        }
        if self.masters.len() >= usize::from(NOBODY) {
            return Err("too many masters".into());
        }
        self.masters.push(addr);
        Ok((self.masters.len() - 1) as u16)
    }

    /// The master serving `slot`.
    pub fn master(&self, slot: u16) -> Option<&str> {
        let index = *self.owner.get(usize::from(slot))?;
        self.masters.get(usize::from(index)).map(String::as_str)
    }

    /// The master's index for `slot` (a stable number while the map stays the same).
    pub(crate) fn master_index(&self, slot: u16) -> Option<u16> {
        self.owner
            .get(usize::from(slot))
            .copied()
            .filter(|&i| i != NOBODY)
    }

    /// Every master that serves some slot.
    pub fn masters(&self) -> impl Iterator<Item = &str> {
        self.masters
            .iter()
            .enumerate()
            .filter(|(i, _)| self.owner.contains(&(*i as u16)))
            .map(|(_, m)| m.as_str())
    }

    /// True when `addr` serves some slot.
    pub(crate) fn is_master(&self, addr: &str) -> bool {
        self.masters().any(|m| m == addr)
    }

    /// Slot ranges no master serves.
    pub(crate) fn uncovered(&self) -> Vec<RangeInclusive<u16>> {
        let mut out: Vec<RangeInclusive<u16>> = Vec::new();
        for (slot, &owner) in self.owner.iter().enumerate() {
            if owner != NOBODY {
                continue;
            }
            let slot = slot as u16;
            match out.last_mut() {
                Some(r) if *r.end() + 1 == slot => *r = *r.start()..=slot,
                _ => out.push(slot..=slot),
            }
        }
        out
    }

    /// This map with `slot` served by `addr` (a `MOVED` redirect, learned before the
    /// next full read of the map).
    pub(crate) fn with_slot(&self, slot: u16, addr: &str) -> Result<Self, String> {
        let mut map = self.clone();
        let index = map.index_of(addr.to_owned())?;
        if let Some(owner) = map.owner.get_mut(usize::from(slot)) {
            *owner = index;
        }
        Ok(map)
    }

    /// `fresh`, with the slots it leaves uncovered still served as in `self` (a master
    /// that failed and was not replaced yet drops out of `CLUSTER SLOTS` on some nodes;
    /// sending there still gives the clearer error).
    pub(crate) fn patched_with(&self, mut fresh: Self) -> Result<Self, String> {
        for slot in 0..SLOTS {
            if fresh.owner[slot] == NOBODY
                && let Some(old) = self.master(slot as u16)
            {
                let index = fresh.index_of(old.to_owned())?;
                fresh.owner[slot] = index;
            }
        }
        Ok(fresh)
    }
}

fn int(v: &redis::Value) -> Option<i64> {
    match v {
        redis::Value::Int(n) => Some(*n),
        _ => None,
    }
}

/// `host:port` of a `CLUSTER SLOTS` node entry `[host, port, id, …]`. An empty host
/// means "the node you asked" (Redis's unknown endpoint).
fn endpoint(entry: &redis::Value, queried: &str) -> Result<String, String> {
    let redis::Value::Array(parts) = entry else {
        return Err(format!("bad CLUSTER SLOTS node {entry:?}"));
    };
    let host = match parts.first() {
        Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
        Some(redis::Value::SimpleString(s)) => s.clone(),
        _ => return Err(format!("bad CLUSTER SLOTS node {entry:?}")),
    };
    let port = parts
        .get(1)
        .and_then(int)
        .and_then(|p| u16::try_from(p).ok())
        .ok_or_else(|| format!("bad port in CLUSTER SLOTS node {entry:?}"))?;
    if host.is_empty() || host == "?" {
        let queried_host = queried.rsplit_once(':').map_or(queried, |(h, _)| h);
        return Ok(format!("{queried_host}:{port}"));
    }
    Ok(join_host_port(&host, port))
}

/// `host:port`, with an IPv6 host in brackets.
pub fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Splits `host:port` (IPv6 hosts in brackets).
pub(crate) fn split_host_port(addr: &str) -> Option<(String, u16)> {
    let (host, port) = addr.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host.to_owned(), port.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    #[test]
    fn slots_follow_redis_hash_tags() {
        // Values from CLUSTER KEYSLOT on Redis 7.0.
        assert_eq!(key_slot(b"a"), 15495);
        assert_eq!(key_slot(b"b"), 3300);
        assert_eq!(key_slot(b"a{b}c"), 3300);
        assert_eq!(key_slot(b"redisson_lock__channel:{b}"), 3300);
        assert_eq!(key_slot(b"{}x"), 10595);
        assert_eq!(key_slot(b"123456789"), 12739);
    }

    fn node(host: &str, port: i64) -> Value {
        Value::Array(vec![
            Value::BulkString(host.as_bytes().to_vec()),
            Value::Int(port),
            Value::BulkString(b"id".to_vec()),
        ])
    }

    fn range(a: i64, b: i64, master: Value) -> Value {
        Value::Array(vec![Value::Int(a), Value::Int(b), master])
    }

    #[test]
    fn a_slots_reply_maps_every_slot_and_reports_holes() {
        let reply = Value::Array(vec![
            range(0, 99, node("10.0.0.1", 7000)),
            range(200, 16383, node("", 7001)),
        ]);
        let map = SlotMap::parse(&reply, "seed:9", |a| a.replace("10.0.0.1", "nat")).unwrap();
        assert_eq!(map.master(0), Some("nat:7000"));
        assert_eq!(map.master(150), None);
        assert_eq!(map.master(16383), Some("seed:7001"));
        assert_eq!(map.uncovered(), vec![100..=199]);
        let moved = map.with_slot(150, "x:1").unwrap();
        assert_eq!(moved.master(150), Some("x:1"));
        assert_eq!(moved.uncovered(), vec![100..=149, 151..=199]);
        let patched = moved.patched_with(map.clone()).unwrap();
        assert_eq!(patched.master(150), Some("x:1"));
        assert!(SlotMap::parse(&Value::Int(1), "s:1", |a| a).is_err());
    }

    #[test]
    fn host_ports_split_and_join_with_ipv6() {
        assert_eq!(join_host_port("::1", 7), "[::1]:7");
        assert_eq!(split_host_port("[::1]:7"), Some(("::1".into(), 7)));
        assert_eq!(split_host_port("h:70"), Some(("h".into(), 70)));
        assert_eq!(split_host_port("h"), None);
    }
}
