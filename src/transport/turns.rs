//! Whose turn it is to take one of a node's pooled connections: a queue in front of the
//! pool with a fast lane for woken waiters. Every pool takes its connections in turns: a
//! single server's r2d2 pool, and each cluster or sentinel-mode node's own pool
//! (`pool.rs`), whose turns are also what caps its connections.
//!
//! r2d2 wakes its waiters in the order they came and lets a thread that arrives while a
//! connection is free take it at once. When 10,000 threads start waiting on a lock at
//! once, each first attempt takes a connection, and a waiter that an unlock message just
//! woke, whose retry is what the lock's hand-off waits for, queues behind all of them:
//! its wake-up took up to a second. So the command pool hands out *turns* first, as many
//! as it has connections:
//!
//! - A turn given back goes straight to the longest-waiting thread of the urgent lane,
//!   else of the normal lane: no thread arriving later can take it first.
//! - A thread is urgent while it runs inside [`urgent`]: the waiting loop's retries after
//!   a wake-up, and the listener's control publish (which unblocks every new waiter).
//! - A thread that must wait keeps waiting as long as the queue moves: it gives up only
//!   when no thread got a connection for a whole connection timeout (every connection
//!   stuck, or the server unreachable), never merely because thousands of others were
//!   served first. `lock()` has no deadline, and a busy pool must not turn into an error
//!   for it.
//!
//! With a turn in hand the thread takes its connection from r2d2, which then never has
//! more takers than connections, and waits only while a connection is being opened.

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::Thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

thread_local! {
    /// Whether the current thread's pool checkouts take the urgent lane.
    static URGENT: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with the current thread's pool checkouts in the urgent lane (see the module
/// docs): for I/O that someone is already waiting on, such as a woken waiter's retry.
pub(crate) fn urgent<T>(f: impl FnOnce() -> T) -> T {
    /// Restores the lane on the way out, unwinding included.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            URGENT.with(|u| u.set(self.0));
        }
    }
    let _restore = Restore(URGENT.with(|u| u.replace(true)));
    f()
}

fn is_urgent() -> bool {
    URGENT.with(Cell::get)
}

/// How long a thread waits for its turn.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Patience {
    /// Until this instant.
    Until(Instant),
    /// As long as some turn comes back at least this often.
    WhileMoving(Duration),
}

/// The turns of one pool.
#[derive(Debug)]
pub(crate) struct Turns {
    state: Mutex<State>,
    size: u32,
}

#[derive(Debug)]
struct State {
    /// Turns nobody holds. Only ever non-zero while both lanes are empty: a turn given
    /// back with a thread queued goes to that thread, not here.
    free: u32,
    urgent: VecDeque<Arc<Ticket>>,
    normal: VecDeque<Arc<Ticket>>,
    /// When a turn was last given back by a thread that got its connection.
    moved: Instant,
}

/// A queued thread's place.
#[derive(Debug)]
struct Ticket {
    /// Set (under the state lock) when a turn is handed to this ticket.
    granted: AtomicBool,
    thread: Thread,
}

/// One turn, given back when dropped.
#[derive(Debug)]
pub(crate) struct Turn {
    turns: Arc<Turns>,
    /// Its holder got a connection. Only such turns count as the queue moving: when the
    /// server is down, every turn comes back after a failed connect, and the threads
    /// queued behind must not keep waiting a connection timeout each, in turn.
    served: bool,
}

impl Turns {
    /// `size` turns, one per connection the pool may open.
    pub(crate) fn new(size: u32) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                free: size,
                urgent: VecDeque::new(),
                normal: VecDeque::new(),
                moved: Instant::now(),
            }),
            size,
        })
    }

    /// How many turns are held now.
    pub(crate) fn in_use(&self) -> u32 {
        self.size - self.state.lock().free
    }

    /// A free turn, without waiting; `None` when all are taken.
    pub(crate) fn try_take(self: &Arc<Self>) -> Option<Turn> {
        let mut state = self.state.lock();
        // `free > 0` implies that nobody queues (see `State::free`), so this does not
        // jump the queue.
        if state.free == 0 {
            return None;
        }
        state.free -= 1;
        Some(self.turn())
    }

    /// A turn, in the calling thread's lane; `None` when `patience` ran out first.
    pub(crate) fn take(self: &Arc<Self>, patience: Patience) -> Option<Turn> {
        let ticket = {
            let mut state = self.state.lock();
            if state.free > 0 {
                state.free -= 1;
                return Some(self.turn());
            }
            let ticket = Arc::new(Ticket {
                granted: AtomicBool::new(false),
                thread: std::thread::current(),
            });
            if is_urgent() {
                state.urgent.push_back(Arc::clone(&ticket));
            } else {
                state.normal.push_back(Arc::clone(&ticket));
            }
            ticket
        };
        let queued = Instant::now();
        loop {
            // Acquire: pairs with the release in `give_back`, so the turn's hand-over
            // happens before we use it. A wake-up that comes before we park leaves
            // `unpark`'s token, so the park below returns at once: none is lost.
            if ticket.granted.load(Ordering::Acquire) {
                return Some(self.turn());
            }
            let deadline = match patience {
                Patience::Until(at) => at,
                Patience::WhileMoving(d) => self.state.lock().moved.max(queued) + d,
            };
            let now = Instant::now();
            if now < deadline {
                std::thread::park_timeout(deadline - now);
                continue;
            }
            // Out of patience, unless a turn came meanwhile: decided under the lock that
            // hands turns over, so a turn is never handed to a ticket that has left.
            let mut state = self.state.lock();
            if ticket.granted.load(Ordering::Acquire) {
                return Some(self.turn());
            }
            let moved = state.moved.max(queued);
            if let Patience::WhileMoving(d) = patience
                && moved + d > Instant::now()
            {
                continue;
            }
            state.urgent.retain(|t| !Arc::ptr_eq(t, &ticket));
            state.normal.retain(|t| !Arc::ptr_eq(t, &ticket));
            return None;
        }
    }

    fn turn(self: &Arc<Self>) -> Turn {
        Turn {
            turns: Arc::clone(self),
            served: false,
        }
    }

    /// Hands a turn to the first queued thread (urgent lane first), or frees it.
    fn give_back(&self, served: bool) {
        let next = {
            let mut state = self.state.lock();
            if served {
                state.moved = Instant::now();
            }
            let next = state
                .urgent
                .pop_front()
                .or_else(|| state.normal.pop_front());
            match &next {
                // Release: see the acquire in `take`.
                Some(ticket) => ticket.granted.store(true, Ordering::Release),
                None => state.free += 1,
            }
            next
        };
        if let Some(ticket) = next {
            ticket.thread.unpark();
        }
    }
}

impl Turn {
    /// Its holder got a connection: giving this turn back shows the queue moving.
    pub(crate) fn served(&mut self) {
        self.served = true;
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.turns.give_back(self.served);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_back_turn_goes_to_the_urgent_lane_first() {
        let turns = Turns::new(1);
        let held = turns.try_take().unwrap();
        assert!(turns.try_take().is_none());
        let (order, got) = crossbeam_channel::unbounded();
        let start = |urgent_lane: bool, tag: &'static str| {
            let turns = Arc::clone(&turns);
            let order = order.clone();
            std::thread::spawn(move || {
                let take = || turns.take(Patience::WhileMoving(Duration::from_secs(60)));
                let mut turn = if urgent_lane { urgent(take) } else { take() };
                if let Some(t) = turn.as_mut() {
                    t.served();
                }
                order.send(tag).unwrap();
                drop(turn);
            })
        };
        let queued = |n: usize| {
            let s = turns.state.lock();
            s.urgent.len() + s.normal.len() == n
        };
        let normal = start(false, "normal");
        while !queued(1) {
            std::thread::yield_now();
        }
        let urgent_thread = start(true, "urgent");
        while !queued(2) {
            std::thread::yield_now();
        }
        drop(held);
        normal.join().unwrap();
        urgent_thread.join().unwrap();
        assert_eq!(got.try_iter().collect::<Vec<_>>(), ["urgent", "normal"]);
        assert!(turns.try_take().is_some());
    }

    #[test]
    fn a_stuck_queue_gives_up_and_leaves_no_ticket_behind() {
        let turns = Turns::new(1);
        let _held = turns.try_take().unwrap();
        assert!(
            turns
                .take(Patience::WhileMoving(Duration::from_millis(20)))
                .is_none()
        );
        assert!(
            turns
                .take(Patience::Until(Instant::now() + Duration::from_millis(5)))
                .is_none()
        );
        let s = turns.state.lock();
        assert!(s.urgent.is_empty() && s.normal.is_empty());
    }
}
