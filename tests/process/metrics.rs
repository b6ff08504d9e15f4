//! The metrics: each one moves when its event happens, against a real redis-server, as a
//! `metrics` recorder sees them (metrics-util's `DebuggingRecorder`, installed globally so
//! that the watchdog and pub/sub threads report into it too).
//!
//! The recorder is shared by every test of this binary, so they run one at a time and
//! look at what changed since they started: the debugging recorder hands out counters and
//! gauges as the change since the previous snapshot, which [`Seen`] adds up.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::Duration;

use crate::support::proxy::FaultProxy;
use crate::support::raw::lock_channel;
use crate::support::{TestServer, eventually, unique};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use redmutex::metrics as m;
use redmutex::{Error, Loss};
use serial_test::serial;

fn snapshotter() -> &'static Snapshotter {
    static SNAPSHOTTER: OnceLock<Snapshotter> = OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("no other recorder in this binary");
        m::describe();
        snapshotter
    })
}

/// What the recorder saw since [`Seen::start`]: counter and gauge totals, histogram
/// values, by `name{label=value,…}` with labels in order.
#[derive(Default)]
struct Seen {
    totals: BTreeMap<String, f64>,
    values: BTreeMap<String, Vec<f64>>,
}

impl Seen {
    /// Forgets everything recorded so far and starts counting.
    fn start() -> Self {
        snapshotter().snapshot();
        Self::default()
    }

    /// Adds what happened since the last look.
    fn update(&mut self) -> &mut Self {
        for (key, _, _, value) in snapshotter().snapshot().into_vec() {
            let key = key.key();
            let mut labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            labels.sort();
            let id = if labels.is_empty() {
                key.name().to_owned()
            } else {
                format!("{}{{{}}}", key.name(), labels.join(","))
            };
            match value {
                DebugValue::Counter(n) => *self.totals.entry(id).or_default() += n as f64,
                DebugValue::Gauge(g) => *self.totals.entry(id).or_default() += g.into_inner(),
                DebugValue::Histogram(xs) => self
                    .values
                    .entry(id)
                    .or_default()
                    .extend(xs.into_iter().map(|x| x.into_inner())),
            }
        }
        self
    }

    fn total(&self, id: &str) -> f64 {
        self.totals.get(id).copied().unwrap_or(0.0)
    }

    fn values(&self, id: &str) -> &[f64] {
        self.values.get(id).map_or(&[], Vec::as_slice)
    }

    /// Waits until the total of `id` reaches `at_least`, updating as it goes.
    fn await_total(&mut self, id: &str, at_least: f64) {
        eventually(Duration::from_secs(10), id, || {
            self.update().total(id) >= at_least
        });
    }

    fn ids(&self) -> Vec<&String> {
        self.totals.keys().chain(self.values.keys()).collect()
    }
}

/// An uncontended acquisition records its duration and attempts as `acquired`, the held
/// gauge goes up; the release records the hold's duration and the gauge comes back. No
/// series carries the lock's name.
#[test]
#[serial]
fn a_cycle_records_acquisition_hold_and_the_held_gauge() {
    let server = TestServer::start();
    let client = server.client();
    let name = unique("metrics");
    let mut seen = Seen::start();
    let guard = client.get_lock(name.clone()).lock().unwrap();
    seen.update();
    let acquired = "redmutex.lock.acquire.duration{kind=RLock,outcome=acquired}";
    assert_eq!(seen.values(acquired).len(), 1, "{:?}", seen.ids());
    assert!(seen.values(acquired)[0] > 0.0);
    assert_eq!(
        seen.values("redmutex.lock.acquire.attempts{kind=RLock,outcome=acquired}"),
        [1.0]
    );
    assert_eq!(seen.total("redmutex.locks.held{kind=RLock}"), 1.0);
    assert!(
        seen.values("redmutex.lock.held.duration{kind=RLock}")
            .is_empty()
    );

    guard.unlock().unwrap();
    seen.update();
    assert_eq!(seen.total("redmutex.locks.held{kind=RLock}"), 0.0);
    assert_eq!(
        seen.values("redmutex.lock.held.duration{kind=RLock}").len(),
        1
    );
    assert!(
        seen.ids().iter().all(|id| !id.contains(&name)),
        "a lock name became a label: {:?}",
        seen.ids()
    );
    // The described unit reaches the recorder.
    let described = snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .any(|(k, unit, _, _)| {
            k.key().name() == m::ACQUIRE_DURATION && unit == Some(metrics::Unit::Seconds)
        });
    assert!(described);
}

/// Each kind labels its own series, and the hold gauge follows guards of any kind.
#[test]
#[serial]
fn kinds_label_their_series() {
    let server = TestServer::start();
    let client = server.client();
    let mut seen = Seen::start();
    let fair = client.get_fair_lock(unique("metrics")).lock().unwrap();
    let rw = client.get_read_write_lock(unique("metrics"));
    let read = rw.read_lock().lock().unwrap();
    seen.update();
    assert_eq!(seen.total("redmutex.locks.held{kind=RFairLock}"), 1.0);
    assert_eq!(seen.total("redmutex.locks.held{kind=RReadLock}"), 1.0);
    drop(fair);
    read.detach();
    seen.update();
    assert_eq!(seen.total("redmutex.locks.held{kind=RFairLock}"), 0.0);
    assert_eq!(seen.total("redmutex.locks.held{kind=RReadLock}"), 0.0);
    assert_eq!(
        seen.values("redmutex.lock.held.duration{kind=RFairLock}")
            .len(),
        1
    );
    // A detached guard's hold goes on: no duration for it.
    assert!(
        seen.values("redmutex.lock.held.duration{kind=RReadLock}")
            .is_empty()
    );
    rw.read_lock().unlock().unwrap();
}

/// A `try_lock_for` that runs out counts one wait and records `timeout`; a busy
/// `try_lock` records `timeout` without a wait.
#[test]
#[serial]
fn a_wait_that_runs_out_is_a_timeout() {
    let server = TestServer::start();
    let holder = server.client();
    let other = server.client();
    let name = unique("metrics");
    let held = holder.get_lock(name.clone()).lock().unwrap();
    let mut seen = Seen::start();
    let lock = other.get_lock(name);
    assert!(lock.try_lock().unwrap().is_none());
    seen.update();
    assert_eq!(seen.total(m::WAITS), 0.0);
    assert!(
        lock.try_lock_for(Duration::from_millis(100))
            .unwrap()
            .is_none()
    );
    seen.update();
    let timeouts = "redmutex.lock.acquire.duration{kind=RLock,outcome=timeout}";
    assert_eq!(seen.values(timeouts).len(), 2, "{:?}", seen.ids());
    assert!(seen.values(timeouts)[1] >= 0.1);
    assert_eq!(seen.total(m::WAITS), 1.0);
    assert_eq!(seen.total(m::WAITERS), 0.0);
    assert!(seen.total("redmutex.locks.held{kind=RLock}") == 0.0);
    held.unlock().unwrap();
}

/// A thread waiting raises the waiters gauge; the unlock message wakes it (a wake-up),
/// its acquisition took more than one attempt, and the gauge comes back down.
#[test]
#[serial]
fn a_waiter_is_counted_and_woken() {
    let server = TestServer::start();
    let holder = server.client();
    let waiter = server.client();
    let name = unique("metrics");
    let mut raw = server.conn();
    let held = holder.get_lock(name.clone()).lock().unwrap();
    let mut seen = Seen::start();
    let lock = waiter.get_lock(name.clone());
    let thread = std::thread::spawn(move || lock.lock().unwrap().unlock().unwrap());
    seen.await_total(m::WAITERS, 1.0);
    eventually(Duration::from_secs(10), "the waiter's subscription", || {
        subscribers(&mut raw, &lock_channel(&name)) == 1
    });
    held.unlock().unwrap();
    thread.join().unwrap();
    seen.update();
    assert!(seen.total(m::WAKEUPS) >= 1.0);
    assert_eq!(seen.total(m::WAITS), 1.0);
    assert_eq!(seen.total(m::WAITERS), 0.0);
    let attempts = seen.values("redmutex.lock.acquire.attempts{kind=RLock,outcome=acquired}");
    assert_eq!(attempts.len(), 1);
    assert!(attempts[0] >= 2.0, "{attempts:?}");
}

/// An acquisition that fails (the key is a string) records `error`.
#[test]
#[serial]
fn a_failed_acquisition_is_an_error() {
    let server = TestServer::start();
    let client = server.client();
    let name = unique("metrics");
    let mut raw = server.conn();
    let _: () = redis::cmd("SET")
        .arg(&name)
        .arg("x")
        .query(&mut raw)
        .unwrap();
    let mut seen = Seen::start();
    let err = client.get_lock(name).lock().unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "{err:?}");
    seen.update();
    assert_eq!(
        seen.values("redmutex.lock.acquire.duration{kind=RLock,outcome=error}")
            .len(),
        1
    );
    assert_eq!(seen.total("redmutex.locks.held{kind=RLock}"), 0.0);
}

/// The watchdog counts the leases it renews.
#[test]
#[serial]
fn renewals_are_counted() {
    let server = TestServer::start();
    let client = server.client_with_watchdog(Duration::from_millis(300));
    let mut seen = Seen::start();
    let guard = client.get_lock(unique("metrics")).lock().unwrap();
    seen.await_total(m::RENEWALS, 2.0);
    guard.unlock().unwrap();
    assert_eq!(seen.total(m::RENEWAL_FAILURES), 0.0);
}

/// Silence on the wire: the renewal fails and, before the lease could end, the hold is
/// presumed lost.
#[test]
#[serial]
fn failed_renewals_and_a_presumed_loss_are_counted() {
    let server = TestServer::start();
    let proxy = FaultProxy::start(server.port());
    let client = redmutex::Client::new(
        redmutex::Config::builder()
            .address(proxy.url())
            .lock_watchdog_timeout(Duration::from_millis(600))
            .response_timeout(Duration::from_millis(200))
            .retry_attempts(0)
            .build(),
    )
    .unwrap();
    let guard = client.get_lock(unique("metrics")).lock().unwrap();
    let mut seen = Seen::start();
    proxy.blackhole();
    let loss = guard.loss_signal();
    assert_eq!(
        loss.recv_timeout(Duration::from_secs(10)),
        Ok(Loss::PossiblyLost)
    );
    seen.update();
    assert!(seen.total(m::RENEWAL_FAILURES) >= 1.0, "{:?}", seen.ids());
    assert_eq!(seen.total("redmutex.lock.losses{loss=possibly_lost}"), 1.0);
    proxy.pass();
    // The lease has run out meanwhile or not; either way the hold is given up.
    let _ = guard.unlock();
}

/// A hold whose key vanished is counted lost once, however many places find out.
#[test]
#[serial]
fn a_lost_hold_is_counted_once() {
    let server = TestServer::start();
    let client = server.client();
    let name = unique("metrics");
    let mut raw = server.conn();
    let guard = client.get_lock(name.clone()).lock().unwrap();
    let mut seen = Seen::start();
    let _: i64 = redis::cmd("DEL").arg(&name).query(&mut raw).unwrap();
    assert!(matches!(guard.unlock(), Err(Error::LockLost { .. })));
    seen.update();
    assert_eq!(seen.total("redmutex.lock.losses{loss=lost}"), 1.0);
    assert_eq!(seen.total("redmutex.lock.losses{loss=possibly_lost}"), 0.0);
}

/// A killed pub/sub connection is re-opened and counted; the waiter still gets the lock.
#[test]
#[serial]
fn a_pubsub_reconnect_is_counted() {
    let server = TestServer::start();
    let holder = server.client();
    let waiter = server.client();
    let name = unique("metrics");
    let mut raw = server.conn();
    let held = holder.get_lock(name.clone()).lock().unwrap();
    let lock = waiter.get_lock(name.clone());
    let thread = std::thread::spawn(move || lock.lock().unwrap().unlock().unwrap());
    let channel = lock_channel(&name);
    eventually(Duration::from_secs(10), "the waiter's subscription", || {
        subscribers(&mut raw, &channel) == 1
    });
    let mut seen = Seen::start();
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut raw)
        .unwrap();
    seen.await_total(m::PUBSUB_RECONNECTS, 1.0);
    eventually(Duration::from_secs(10), "the subscription again", || {
        subscribers(&mut raw, &channel) == 1
    });
    held.unlock().unwrap();
    thread.join().unwrap();
}

/// With names opted in, the per-lock series carry the lock's name.
#[test]
#[serial]
fn names_are_labels_only_when_asked_for() {
    let server = TestServer::start();
    let client = server.client_with(|b| b.metrics_lock_names(true));
    let name = unique("metrics");
    let mut raw = server.conn();
    let mut seen = Seen::start();
    let guard = client.get_lock(name.clone()).lock().unwrap();
    let _: i64 = redis::cmd("DEL").arg(&name).query(&mut raw).unwrap();
    assert!(guard.unlock().is_err());
    seen.update();
    let acquired =
        format!("redmutex.lock.acquire.duration{{kind=RLock,name={name},outcome=acquired}}");
    assert_eq!(seen.values(&acquired).len(), 1, "{:?}", seen.ids());
    let held = format!("redmutex.lock.held.duration{{kind=RLock,name={name}}}");
    assert_eq!(seen.values(&held).len(), 1);
    let lost = format!("redmutex.lock.losses{{loss=lost,name={name}}}");
    assert_eq!(seen.total(&lost), 1.0);
}

fn subscribers(raw: &mut redis::Connection, channel: &str) -> i64 {
    let reply: (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query(raw)
        .unwrap();
    reply.1
}

/// The token locks record their acquisitions and holds under their own kinds: the
/// single-server one with its attempts, the quorum one (here over three servers)
/// without, and a quorum hold found gone at release counts as lost.
#[test]
#[serial]
fn token_locks_record_under_their_kinds() {
    let server = TestServer::start();
    let client = server.client();
    let mut seen = Seen::start();
    let guard = client.get_token_lock(unique("metrics")).lock().unwrap();
    seen.update();
    assert_eq!(
        seen.values("redmutex.lock.acquire.attempts{kind=TokenLock,outcome=acquired}"),
        [1.0]
    );
    assert_eq!(seen.total("redmutex.locks.held{kind=TokenLock}"), 1.0);
    guard.unlock().unwrap();
    seen.update();
    assert_eq!(seen.total("redmutex.locks.held{kind=TokenLock}"), 0.0);
    assert_eq!(
        seen.values("redmutex.lock.held.duration{kind=TokenLock}")
            .len(),
        1
    );

    let servers = [
        TestServer::start(),
        TestServer::start(),
        TestServer::start(),
    ];
    let clients: Vec<_> = servers.iter().map(TestServer::client).collect();
    let name = unique("metrics");
    let lock = redmutex::Client::get_quorum_token_lock(&clients, name.clone()).unwrap();
    let guard = lock.lock_with_lease(Duration::from_secs(10)).unwrap();
    seen.update();
    let acquired = "redmutex.lock.acquire.duration{kind=QuorumTokenLock,outcome=acquired}";
    assert_eq!(seen.values(acquired).len(), 1, "{:?}", seen.ids());
    assert!(
        seen.values("redmutex.lock.acquire.attempts{kind=QuorumTokenLock,outcome=acquired}")
            .is_empty()
    );
    assert_eq!(seen.total("redmutex.locks.held{kind=QuorumTokenLock}"), 1.0);
    for server in &servers {
        let _: i64 = redis::cmd("DEL")
            .arg(guard.lock().key())
            .query(&mut server.conn())
            .unwrap();
    }
    assert!(matches!(guard.unlock(), Err(Error::LockLost { .. })));
    seen.update();
    assert_eq!(seen.total("redmutex.locks.held{kind=QuorumTokenLock}"), 0.0);
    assert_eq!(seen.total("redmutex.lock.losses{loss=lost}"), 1.0);
}

/// Ends a composite guard: detached (`true`) or unlocked.
type Release = Box<dyn FnOnce(bool)>;

/// A MultiLock and a RedLock each record one acquisition under their own kind (their
/// members record theirs as RLock), raise the held gauge while their guard lives and
/// record one hold when it is released; a busy `try_lock` is a timeout, and a detached
/// guard leaves the gauge without a hold duration.
#[test]
#[serial]
fn multi_and_red_locks_record_one_acquisition_each() {
    let server = TestServer::start();
    let client = server.client();
    let other = server.client();
    for kind in ["MultiLock", "RedLock"] {
        let names: Vec<String> = (0..3).map(|_| unique("metrics")).collect();
        let take = |c: &redmutex::Client| -> Box<dyn Fn(bool) -> Option<Release>> {
            let c = c.clone();
            let names = names.clone();
            Box::new(move |wait: bool| {
                let locks = names.iter().map(|n| c.get_lock(n.clone()));
                if kind == "MultiLock" {
                    let multi = c.get_multi_lock(locks.map(Into::into));
                    let guard = if wait {
                        Some(multi.lock().unwrap())
                    } else {
                        multi.try_lock().unwrap()
                    };
                    guard.map(|g| -> Release {
                        Box::new(move |detach| {
                            if detach {
                                g.detach();
                            } else {
                                g.unlock().unwrap();
                            }
                        })
                    })
                } else {
                    let red = c.get_red_lock(locks);
                    let guard = if wait {
                        Some(red.lock().unwrap())
                    } else {
                        red.try_lock().unwrap()
                    };
                    guard.map(|g| -> Release {
                        Box::new(move |detach| {
                            if detach {
                                g.detach();
                            } else {
                                g.unlock().unwrap();
                            }
                        })
                    })
                }
            })
        };
        let acquired = format!("redmutex.lock.acquire.duration{{kind={kind},outcome=acquired}}");
        let timeout = format!("redmutex.lock.acquire.duration{{kind={kind},outcome=timeout}}");
        let held = format!("redmutex.locks.held{{kind={kind}}}");
        let held_for = format!("redmutex.lock.held.duration{{kind={kind}}}");

        let mut seen = Seen::start();
        let release = take(&client)(true).unwrap();
        seen.update();
        assert_eq!(seen.values(&acquired).len(), 1, "{kind}: {:?}", seen.ids());
        assert_eq!(seen.total(&held), 1.0, "{kind}");
        // A MultiLock's members are taken through their own `lock()` and count as RLock
        // acquisitions too; a RedLock asks its members in parallel with its own scripts.
        assert_eq!(
            seen.values("redmutex.lock.acquire.duration{kind=RLock,outcome=acquired}")
                .len(),
            if kind == "MultiLock" { 3 } else { 0 },
            "{kind}"
        );

        assert!(take(&other)(false).is_none(), "{kind}: taken twice");
        seen.update();
        assert_eq!(seen.values(&timeout).len(), 1, "{kind}: {:?}", seen.ids());

        release(false);
        seen.update();
        assert_eq!(seen.total(&held), 0.0, "{kind}");
        assert_eq!(seen.values(&held_for).len(), 1, "{kind}");

        // A detached guard leaves the gauge but records no hold duration.
        let detach = take(&client)(true).unwrap();
        detach(true);
        seen.update();
        assert_eq!(seen.total(&held), 0.0, "{kind}");
        assert_eq!(seen.values(&held_for).len(), 1, "{kind}");
        for name in &names {
            client.get_lock(name.clone()).force_unlock().unwrap();
        }
    }
}
