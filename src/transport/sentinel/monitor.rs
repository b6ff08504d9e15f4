//! The monitor: the thread that follows failovers, listening for `+switch-master` on one
//! sentinel and asking the sentinels again every scan interval and soon after a kick
//! (see the [module docs](super)).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, TryRecvError};
use redis::RedisResult;

use super::Shared;
use crate::error::Result;

/// The sentinel event that announces a new master.
const SWITCH_MASTER: &str = "+switch-master";
/// How long the monitor reads its event subscription before it looks at kicks and the
/// clock again.
const TICK: Duration = Duration::from_millis(100);

impl Shared {
    /// Makes `addr` the master: bumps the generation and condemns the old master's
    /// pool.
    fn install(&self, addr: &str) -> Result<()> {
        let node = self.nodes.node(addr)?;
        let old = {
            let mut master = self.master.write();
            if master.addr() == addr {
                return Ok(());
            }
            let old = std::mem::replace(&mut *master, Arc::clone(&node));
            // Bumped under the write lock: whoever reads the master under the read lock
            // reads the generation that goes with it. The replica check relies on that
            // (`standing`): with the bump after the lock, it could see the new master
            // named while the generation still said "nothing moved", take the sentinels'
            // agreement on the new master for an acquire that ran on the old one, and
            // let a grant stand there that the new master never got (seen once in 20
            // runs of the demotion test).
            self.generation.fetch_add(1, Ordering::AcqRel);
            old
        };
        // The new master is named before the old one is condemned, so a command that
        // finds the old pool condemned always finds the new master named: it cannot
        // take a fresh connection to the old master after this point.
        node.pool.reprieve();
        old.pool.condemn();
        log::info!(
            "redmutex: sentinel master {:?} moved from {} to {addr}",
            self.master_name,
            old.addr()
        );
        Ok(())
    }

    /// Reads the master from the sentinels and installs it if it moved.
    fn refresh(&self) {
        let current = self.master().addr().to_owned();
        match self.find_master(Some(&current)) {
            Ok(addr) if addr != current => {
                if let Err(e) = self.install(&addr) {
                    log::warn!("redmutex: cannot use the new sentinel master {addr}: {e}");
                }
            }
            Ok(_) => {}
            Err(e) => log::warn!(
                "redmutex: the sentinels named no usable master: {}",
                e.details.join("; ")
            ),
        }
    }
}

/// The monitor thread: listens for `+switch-master` on one sentinel, and asks the
/// sentinels every `interval` and soon after a kick.
pub(super) fn monitor(shared: &Shared, kicked: &Receiver<()>, interval: Duration) {
    let mut events: Option<redis::Connection> = None;
    let mut last = Instant::now();
    loop {
        if shared.nodes.stopped() {
            return;
        }
        if events.is_none() {
            events = subscribe_events(shared);
        }
        let mut check = false;
        match events.as_mut() {
            Some(conn) => match next_event(conn) {
                Ok(Some(payload)) => {
                    // "<name> <old ip> <old port> <new ip> <new port>"
                    if payload.split(' ').next() == Some(shared.master_name.as_str()) {
                        log::debug!("redmutex: sentinel event {SWITCH_MASTER} {payload}");
                        check = true;
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    // The sentinel may be the one that went away; another is tried,
                    // and the master asked for at once in case an event was missed.
                    log::debug!("redmutex: sentinel event connection lost: {e}");
                    events = None;
                    check = true;
                }
            },
            None => match kicked.recv_timeout(TICK) {
                Ok(()) => check = true,
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
            },
        }
        match kicked.try_recv() {
            Ok(()) => check = true,
            Err(TryRecvError::Empty) => {}
            Err(TryRecvError::Disconnected) => return,
        }
        if shared.nodes.stopped() {
            return;
        }
        if check || last.elapsed() >= interval {
            last = Instant::now();
            shared.refresh();
        }
    }
}

/// A connection to the first sentinel that accepts a `+switch-master` subscription.
fn subscribe_events(shared: &Shared) -> Option<redis::Connection> {
    for sentinel in &shared.sentinels {
        let connected = shared
            .sentinel_connector(sentinel)
            .map_err(|e| e.to_string())
            .and_then(|c| c.connect().map_err(|e| e.to_string()));
        let mut conn = match connected {
            Ok(conn) => conn,
            Err(e) => {
                log::debug!("redmutex: sentinel {}: {e}", sentinel.addr());
                continue;
            }
        };
        let mut pubsub = conn.as_pubsub();
        let subscribed = pubsub.subscribe(SWITCH_MASTER);
        // Dropping a `PubSub` unsubscribes (redis-rs's `exit_pubsub`); the connection
        // keeps the subscription instead.
        std::mem::forget(pubsub);
        match subscribed.and_then(|()| conn.set_read_timeout(Some(TICK))) {
            Ok(()) => return Some(conn),
            Err(e) => log::debug!("redmutex: sentinel {}: {e}", sentinel.addr()),
        }
    }
    None
}

/// The payload of the next `+switch-master` event, or `None` after [`TICK`] without one.
fn next_event(conn: &mut redis::Connection) -> RedisResult<Option<String>> {
    let mut pubsub = conn.as_pubsub();
    let got = pubsub.get_message();
    std::mem::forget(pubsub);
    match got {
        Ok(msg) => Ok(msg.get_payload::<String>().ok()),
        Err(e) if e.is_timeout() => Ok(None),
        Err(e) => Err(e),
    }
}
