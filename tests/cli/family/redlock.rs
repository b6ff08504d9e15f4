//! Redisson's RedLock over five real redis-servers, one client per server: the quorum
//! with failed nodes, partial grants, the wake-up of a waiting RedLock, release
//! reporting, the caller's lease applied in one round, and the restarted-empty node with
//! and without the delayed-restart rule.

use std::time::{Duration, Instant};

use redmutex::{Client, Config, Error, RedLock, RedLockGuard};

use super::HANG;
use super::other_thread;
use crate::support::proxy::FaultProxy;
use crate::support::raw::{await_numsub, exists, hgetall, lock_channel, pttl};
use crate::support::{TestServer, eventually, unique};

const NODES: usize = 5;

/// Five servers, and one client per server for each of two contenders.
struct Five {
    servers: Vec<TestServer>,
    raws: Vec<redis::Connection>,
    down: [bool; NODES],
    a: Vec<Client>,
    b: Vec<Client>,
}

impl Five {
    fn start() -> Self {
        let servers: Vec<TestServer> = (0..NODES).map(|_| TestServer::start()).collect();
        let raws = servers.iter().map(TestServer::conn).collect();
        // A short watchdog lease, so that a round's reply budget (a twentieth of the
        // lease) keeps the rounds with dead nodes short.
        let client = |s: &TestServer| s.client_with_watchdog(Duration::from_secs(4));
        let a = servers.iter().map(client).collect();
        let b = servers.iter().map(client).collect();
        Self {
            servers,
            raws,
            down: [false; NODES],
            a,
            b,
        }
    }

    /// A RedLock on `name` over every server, through `clients`.
    fn red(clients: &[Client], name: &str) -> RedLock {
        clients[0].get_red_lock(clients.iter().map(|c| c.get_lock(name)))
    }

    /// Whether node `i` has `name`'s hash with a field of the client with id `who`.
    fn held_by(&mut self, i: usize, name: &str, who: &str) -> bool {
        let prefix = format!("{who}:");
        hgetall(&mut self.raws[i], name)
            .keys()
            .any(|f| f.starts_with(&prefix))
    }

    /// The live nodes on which `name` exists.
    fn holding(&mut self, name: &str) -> Vec<usize> {
        (0..NODES)
            .filter(|&i| !self.down[i] && exists(&mut self.raws[i], name))
            .collect()
    }

    /// The ids of the first contender's clients, then the second's.
    fn ids(&self) -> (Vec<String>, Vec<String>) {
        let ids = |cs: &[Client]| cs.iter().map(|c| c.id().to_owned()).collect();
        (ids(&self.a), ids(&self.b))
    }

    fn kill(&mut self, i: usize) {
        self.servers[i].kill();
        self.down[i] = true;
    }

    /// Starts a killed node again (or kills and restarts a live one), empty, and
    /// reconnects the raw connection.
    fn restart(&mut self, i: usize) {
        self.servers[i].restart();
        self.raws[i] = self.servers[i].conn();
        self.down[i] = false;
        // Both contenders' pools back in touch with it (a pool retries a refused
        // connection with a growing back-off): a round's short budget must find the
        // node as it is, not as its pool last saw it.
        for client in [&self.a[i], &self.b[i]] {
            client.get_lock("probe").is_locked().unwrap();
        }
    }
}

/// Every subset of at most two failed nodes lets a RedLock acquire, holding exactly the
/// live nodes; every subset of three fails at once with `NoQuorum` naming them, and the
/// two grants it got are released.
#[test]
fn a_red_lock_acquires_with_up_to_two_failed_nodes_and_never_with_three() {
    let mut five = Five::start();
    let name = unique("red-quorum");
    let red = Five::red(&five.a, &name);
    let (ids, _) = five.ids();
    assert_eq!(red.quorum(), 3);
    for mask in 0u32..(1 << NODES) {
        let failed: Vec<usize> = (0..NODES).filter(|i| mask & (1 << i) != 0).collect();
        if failed.len() > 3 {
            continue;
        }
        for &i in &failed {
            five.kill(i);
        }
        let live: Vec<usize> = (0..NODES).filter(|i| !failed.contains(i)).collect();
        match red.try_lock_for(Duration::from_secs(2)) {
            Ok(Some(guard)) => {
                assert!(failed.len() <= 2, "acquired with {failed:?} down");
                assert_eq!(guard.granted(), live.len(), "{failed:?}");
                for &i in &live {
                    assert!(five.held_by(i, &name, &ids[i]), "node {i}");
                }
                assert!(!guard.is_lost());
                guard.unlock().unwrap();
                assert_eq!(five.holding(&name), Vec::<usize>::new());
            }
            Ok(None) => panic!("nothing holds the lock, yet {failed:?} down refused it"),
            Err(Error::NoQuorum(detail)) => {
                assert_eq!(failed.len(), 3, "{failed:?}: {detail}");
                assert_eq!(detail.operation(), "acquire");
                assert_eq!(detail.agreed(), 2, "{detail}");
                let named: Vec<usize> = detail.failures().iter().map(|(i, _)| *i).collect();
                assert_eq!(named, failed);
                assert_eq!(
                    five.holding(&name),
                    Vec::<usize>::new(),
                    "partial grants released"
                );
            }
            Err(e) => panic!("{failed:?}: {e:?}"),
        }
        for &i in &failed {
            five.restart(i);
        }
    }
}

/// Three members held by others: the RedLock gets the other two, cannot reach a
/// majority within its wait, and releases both. With two held by others it holds the
/// other three.
#[test]
fn partial_grants_are_released() {
    let mut five = Five::start();
    let name = unique("red-partial");
    let blockers: Vec<_> = (0..3)
        .map(|i| {
            five.b[i]
                .get_lock(name.clone())
                .try_lock_with_lease(Duration::ZERO, Duration::from_secs(60))
                .unwrap()
                .unwrap()
        })
        .collect();
    let red = Five::red(&five.a, &name);
    let got = other_thread(|| {
        let once = red.try_lock().unwrap().is_some();
        let waited = red
            .try_lock_for(Duration::from_millis(300))
            .unwrap()
            .is_some();
        (once, waited)
    });
    assert_eq!(got, (false, false));
    for i in 3..NODES {
        assert!(!exists(&mut five.raws[i], &name), "node {i} released");
    }
    let mut blockers = blockers.into_iter();
    blockers.next().unwrap().unlock().unwrap();
    let guard = red.try_lock().unwrap().expect("three of five free");
    assert_eq!(guard.granted(), 3);
    let (ids, _) = five.ids();
    for i in [0, 3, 4] {
        assert!(five.held_by(i, &name, &ids[i]), "node {i}");
    }
    guard.unlock().unwrap();
    for i in [0, 3, 4] {
        assert!(!exists(&mut five.raws[i], &name));
    }
    drop(blockers);
}

/// A waiting RedLock keeps the members it got, sleeps on the busy members' channels (on
/// their own servers), and takes the lock when one of them is released.
#[test]
fn a_waiting_red_lock_is_woken_by_a_members_release() {
    let mut five = Five::start();
    let name = unique("red-wait");
    let blockers: Vec<_> = (0..3)
        .map(|i| five.b[i].get_lock(name.clone()).lock().unwrap())
        .collect();
    let red = Five::red(&five.a, &name);
    std::thread::scope(|s| {
        // A per-member wait of HANG / 5: far longer than the test needs.
        let waiter = s.spawn(|| {
            red.try_lock_for(HANG)
                .unwrap()
                .map(|g: RedLockGuard| (g.granted(), g.unlock().unwrap()))
        });
        let channel = lock_channel(&name);
        for i in 0..3 {
            await_numsub(&mut five.raws[i], &channel, 1);
        }
        for i in 3..NODES {
            assert!(
                exists(&mut five.raws[i], &name),
                "node {i} held while waiting"
            );
        }
        let mut blockers = blockers.into_iter();
        blockers.next().unwrap().unlock().unwrap();
        assert_eq!(waiter.join().unwrap(), Some((3, ())));
        drop(blockers);
    });
}

/// The caller's lease replaces the members' temporary one in one parallel round. The
/// middle member of three answers slowly (through the fault proxy); had the relets gone
/// one after another, the last member's lease would end a whole slow round trip after
/// the first's. In one round they end together: far less than half that round trip
/// (measured in this test) apart.
#[test]
fn the_callers_lease_goes_to_every_member_in_one_round() {
    let servers: Vec<TestServer> = (0..3).map(|_| TestServer::start()).collect();
    let proxy = FaultProxy::start(servers[1].port());
    let slow = Client::new(Config::builder().address(proxy.url()).build()).unwrap();
    let clients = [servers[0].client(), slow, servers[2].client()];
    let name = unique("red-relet");
    let red = Five::red(&clients, &name);
    // One cycle at full speed: every member's pool has an idle connection and its
    // server the scripts, so the slow member costs its round trips only.
    red.try_lock().unwrap().unwrap().unlock().unwrap();
    let delay = Duration::from_millis(100);
    proxy.delay(delay, delay);
    let probe = clients[1].get_lock(name.clone());
    let started = Instant::now();
    assert!(!probe.is_locked().unwrap());
    let slow_round_trip = started.elapsed();
    assert!(slow_round_trip >= delay * 2, "the proxy delays both ways");

    // The temporary lease (twice the wait) is far from the caller's.
    let (wait, lease) = (Duration::from_secs(10), Duration::from_secs(120));
    let guard = red.try_lock_with_lease(wait, lease).unwrap().unwrap();
    assert_eq!(
        guard.granted(),
        3,
        "the slow member granted within the round"
    );
    let ends = [0, 2].map(|i| {
        let mut raw = servers[i].conn();
        let ttl = pttl(&mut raw, &name);
        assert!(
            ttl > 2 * wait.as_millis() as i64,
            "member {i} has the caller's lease, not the temporary one: {ttl} ms"
        );
        Instant::now() + Duration::from_millis(ttl.unsigned_abs())
    });
    let apart = ends[0].max(ends[1]) - ends[0].min(ends[1]);
    assert!(
        apart < slow_round_trip / 2,
        "the leases end {apart:?} apart; one slow round trip is {slow_round_trip:?}"
    );
    proxy.pass();
    guard.unlock().unwrap();
}

/// Unlock releases every member and reports each one that failed: `Members` while a
/// majority was released, `NoQuorum` when not.
#[test]
fn a_red_lock_unlock_reports_each_failure() {
    let mut five = Five::start();
    let name = unique("red-unlock");
    let red = Five::red(&five.a, &name);

    let guard = red.lock().unwrap();
    assert_eq!(guard.granted(), NODES);
    assert!(five.a[1].get_lock(name.clone()).force_unlock().unwrap());
    match guard.unlock() {
        Err(Error::Members(failures)) => {
            assert_eq!(failures.len(), 1, "{failures:?}");
            assert_eq!(failures[0].0, name);
            assert!(
                matches!(failures[0].1, Error::LockLost { .. }),
                "{failures:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(five.holding(&name), Vec::<usize>::new());

    let guard = red.lock().unwrap();
    for i in 0..3 {
        redis::cmd("DEL")
            .arg(&name)
            .query::<()>(&mut five.raws[i])
            .unwrap();
    }
    match guard.unlock() {
        Err(Error::NoQuorum(detail)) => {
            assert_eq!((detail.operation(), detail.agreed()), ("release", 2));
            assert_eq!(detail.failures().len(), 3, "{detail}");
        }
        other => panic!("{other:?}"),
    }

    // A detached hold is released by the lock's own unlock, on the same thread.
    red.lock().unwrap().detach();
    assert_eq!(five.holding(&name).len(), NODES);
    red.unlock().unwrap();
    assert_eq!(five.holding(&name), Vec::<usize>::new());
    assert!(matches!(
        five.a[0].get_red_lock([]).try_lock(),
        Err(Error::Config(_))
    ));
}

/// The RedLock is reentrant member by member, and a second client's RedLock is shut
/// out until the last hold is released.
#[test]
fn a_red_lock_is_reentrant_and_excludes_another_client() {
    let five = Five::start();
    let name = unique("red-reentry");
    let (red_a, red_b) = (Five::red(&five.a, &name), Five::red(&five.b, &name));
    let outer = red_a.lock().unwrap();
    let inner = red_a.try_lock().unwrap().expect("re-entry");
    assert_eq!(five.a[0].get_lock(name.clone()).hold_count().unwrap(), 2);
    assert!(other_thread(|| red_b.try_lock().unwrap().is_none()));
    inner.unlock().unwrap();
    assert!(other_thread(|| red_b.try_lock().unwrap().is_none()));
    outer.unlock().unwrap();
    assert!(other_thread(|| red_b.try_lock().unwrap().map(|g| g.unlock().unwrap())).is_some());
}

/// A grant on exactly three nodes (two are down), after which the node that granted
/// last crashes and comes back empty at once, while the two down nodes return: a second
/// RedLock gets those three and both hold the lock. This is the failure the
/// delayed-restart rule exists for.
#[test]
fn a_node_restarted_empty_at_once_allows_a_double_grant() {
    let mut five = Five::start();
    let name = unique("red-restart-now");
    let (red_a, red_b) = (Five::red(&five.a, &name), Five::red(&five.b, &name));
    five.kill(3);
    five.kill(4);
    let a = red_a
        .try_lock_with_lease(Duration::ZERO, Duration::from_secs(60))
        .unwrap()
        .expect("three of five up");
    assert_eq!(five.holding(&name), [0, 1, 2]);
    five.restart(3);
    five.restart(4);
    five.restart(2); // crashed right after granting, restarted empty at once
    let b = other_thread(|| {
        red_b
            .try_lock_with_lease(Duration::ZERO, Duration::from_secs(60))
            .unwrap()
            .map(|g| {
                g.detach();
            })
    });
    assert!(b.is_some(), "the second RedLock got 2, 3 and 4");
    assert!(
        !a.is_lost(),
        "and the first still believes it holds the lock"
    );
    let (ids_a, ids_b) = five.ids();
    assert!(five.held_by(0, &name, &ids_a[0]) && five.held_by(1, &name, &ids_a[1]));
    for (i, id) in ids_b.iter().enumerate().skip(2) {
        assert!(five.held_by(i, &name, id), "node {i}");
    }
    a.detach();
}

/// The same crash, with the rule followed: the crashed node stays down until every
/// lease it could have granted has run out elsewhere (here the first holder's keys on
/// the other nodes are gone, which is what the lease's end means), and only then
/// restarts empty. The second RedLock then gets the lock, and at no moment do both hold
/// it: the first holder's guard already knows its lease is over, and no node has its key.
#[test]
fn a_node_restarted_after_the_longest_lease_cannot_cause_a_double_grant() {
    let mut five = Five::start();
    let name = unique("red-restart-late");
    let (red_a, red_b) = (Five::red(&five.a, &name), Five::red(&five.b, &name));
    five.kill(3);
    five.kill(4);
    let lease = Duration::from_millis(1500);
    let a = red_a
        .try_lock_with_lease(Duration::ZERO, lease)
        .unwrap()
        .expect("three of five up");
    assert_eq!(five.holding(&name), [0, 1, 2]);
    five.restart(3);
    five.restart(4);
    five.kill(2); // crashed right after granting; kept down
    // While it is down, nobody can get a majority: A's keys on 0 and 1 block it.
    assert!(other_thread(|| red_b.try_lock().unwrap().is_none()));
    eventually(HANG, "A's lease to end on nodes 0 and 1", || {
        !exists(&mut five.raws[0], &name) && !exists(&mut five.raws[1], &name)
    });
    five.restart(2);
    assert!(a.is_lost(), "A's guard knows its lease is over");
    let b = other_thread(|| {
        red_b
            .try_lock_with_lease(Duration::ZERO, Duration::from_secs(60))
            .unwrap()
            .map(|g| {
                g.detach();
            })
    });
    assert!(b.is_some());
    let (ids_a, _) = five.ids();
    for (i, id) in ids_a.iter().enumerate() {
        assert!(!five.held_by(i, &name, id), "node {i} has no key of A");
    }
    a.detach();
}
