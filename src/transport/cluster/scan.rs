//! The scanner: the thread that keeps the slot map current, reading `CLUSTER SLOTS`
//! every scan interval and soon after a kick (a `MOVED`, a failed node).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};

use super::super::nodes::{Own, Source};
use super::super::slots::SlotMap;
use super::Shared;

/// Shortest gap between two reads of the slot map.
const MIN_SCAN_GAP: Duration = Duration::from_millis(20);

/// The scanner's loop: reads the map every `interval`, and soon after a kick.
pub(super) fn scan(shared: &Shared, kicked: &Receiver<()>, interval: Duration) {
    let mut own = Own::per_node(
        shared.nodes.connect_timeout(),
        shared.nodes.response_timeout(),
    );
    let mut last = Instant::now();
    // A disconnected kick channel means the client is gone.
    while let Ok(()) | Err(RecvTimeoutError::Timeout) = kicked.recv_timeout(interval) {
        if shared.nodes.stopped() {
            break;
        }
        // Many failing commands kick at once; one read serves them all.
        let since = last.elapsed();
        if since < MIN_SCAN_GAP {
            std::thread::sleep(MIN_SCAN_GAP - since);
        }
        last = Instant::now();
        if let Err(e) = shared.refresh(&mut own) {
            log::warn!("redmutex: could not read the cluster slot map: {e}");
        }
    }
}

impl Shared {
    /// Reads `CLUSTER SLOTS` from the first node that answers: the current masters,
    /// then the seeds. The answer replaces the map. The scanner reads on connections of
    /// its own (`own`): a pooled one would make it queue behind the application's
    /// threads, and wait a connection timeout for a turn on a master that stopped
    /// answering, which is when the map is needed most.
    fn refresh(&self, own: &mut Own) -> std::result::Result<(), String> {
        let mut candidates: Vec<String> = self.map().masters().map(str::to_owned).collect();
        for seed in &self.seeds {
            if !candidates.contains(seed) {
                candidates.push(seed.clone());
            }
        }
        let mut errors = Vec::new();
        for addr in candidates {
            match self.read_map(&addr, own) {
                Ok(map) => {
                    // One connection is enough: the one that answered.
                    own.keep_only(&addr);
                    self.install(map);
                    return Ok(());
                }
                Err(e) => errors.push(format!("{addr}: {e}")),
            }
        }
        Err(errors.join("; "))
    }

    fn read_map(&self, addr: &str, own: &mut Own) -> std::result::Result<SlotMap, String> {
        let node = self.node(addr).map_err(|e| e.to_string())?;
        let mut conn = own.take(&node).map_err(|e| e.to_string())?;
        let reply = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query::<redis::Value>(&mut conn)
            .map_err(|e| e.to_string())?;
        own.give(&node, conn);
        SlotMap::parse(&reply, addr, |a| self.dial(&a))
    }

    /// Installs `fresh` (uncovered slots keep their old owner) and condemns the nodes
    /// it no longer names as masters.
    fn install(&self, fresh: SlotMap) {
        let changed = {
            let mut map = self.map.write();
            let Ok(next) = map.patched_with(fresh) else {
                return;
            };
            if **map == next {
                false
            } else {
                log::info!("redmutex: cluster slot map changed: {next:?}");
                *map = Arc::new(next);
                self.generation.fetch_add(1, Ordering::AcqRel);
                true
            }
        };
        if changed {
            let map = self.map();
            self.nodes.each(|addr, node| {
                if map.is_master(addr) {
                    node.pool.reprieve();
                } else {
                    node.pool.condemn();
                }
            });
        }
    }
}
