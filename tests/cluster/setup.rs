//! Cluster settings and bad cluster addresses: clear errors from `Client::new`, never a
//! hang or a panic; seeds, coverage and the ACL login on every node.

use std::time::{Duration, Instant};

use redmutex::{Client, Config, Error};
use serial_test::parallel;

use crate::support::cluster::{self, BROKEN_UNCOVERED, key_for_slot};
use crate::support::deploy::Deployment;
use crate::support::supervised::free_port;
use crate::support::{TestServer, unique};

fn connect(
    urls: Vec<String>,
    f: impl FnOnce(redmutex::ConfigBuilder) -> redmutex::ConfigBuilder,
) -> redmutex::Result<Client> {
    Client::new(f(Config::builder().cluster_nodes(urls)).build())
}

/// A single server named as a cluster node: a configuration error that says so.
#[test]
#[parallel(cluster)]
fn a_single_server_is_not_a_cluster() {
    let server = TestServer::start();
    let err = connect(vec![server.url()], |b| b).unwrap_err();
    assert!(matches!(err, Error::Config(_)), "{err}");
    assert!(err.to_string().contains("single Redis server"), "{err}");
}

/// A cluster with slots nobody serves: a configuration error naming them, whether the
/// cluster still serves the rest (`cluster-require-full-coverage no`) or is down.
/// Without the check, the covered slots work and a key in the hole gets a clear error
/// after the retry budget.
#[test]
#[parallel(cluster)]
fn a_cluster_with_uncovered_slots_is_refused() {
    let hole = format!("{}-{}", BROKEN_UNCOVERED.start(), BROKEN_UNCOVERED.end());
    for c in [cluster::broken(), cluster::broken_strict()] {
        let err = connect(c.urls(), |b| b).unwrap_err();
        assert!(matches!(err, Error::Config(_)), "{err}");
        assert!(err.to_string().contains(&hole), "{err}");
    }
    let c = cluster::broken();
    let client = connect(c.urls(), |b| {
        b.check_slots_coverage(false)
            .retry_attempts(2)
            .retry_delay(Duration::from_millis(50))
            .retry_max_delay(Duration::from_millis(100))
    })
    .unwrap();
    client
        .get_lock(key_for_slot(5000, "covered"))
        .lock()
        .unwrap()
        .unlock()
        .unwrap();
    let started = Instant::now();
    let err = client
        .get_lock(key_for_slot(*BROKEN_UNCOVERED.start() + 1, "hole"))
        .try_lock()
        .map(|g| g.is_some())
        .unwrap_err();
    assert!(err.to_string().to_lowercase().contains("cluster"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

/// Every seed down (nothing listens): a connect error naming each seed, at once.
#[test]
#[parallel(cluster)]
fn every_seed_down_is_a_clear_error() {
    let ports = [free_port(), free_port()];
    let urls: Vec<String> = ports
        .iter()
        .map(|p| format!("redis://127.0.0.1:{p}"))
        .collect();
    let started = Instant::now();
    let err = connect(urls, |b| b).unwrap_err();
    assert!(matches!(err, Error::Connect { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("nothing accepts connections"), "{text}");
    for p in ports {
        assert!(text.contains(&p.to_string()), "{text}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

/// A dead seed before a live one is skipped; one live node is enough to learn them all.
#[test]
#[parallel(cluster)]
fn one_live_seed_is_enough() {
    let c = cluster::shared();
    let replica = c.replicas().remove(0);
    let urls = vec![format!("redis://127.0.0.1:{}", free_port()), replica.url()];
    let client = connect(urls, |b| b).unwrap();
    for master in c.masters() {
        let name = crate::name_on(&master, "seed");
        client.get_lock(name).lock().unwrap().unlock().unwrap();
    }
}

/// ACL user and password (set on every node; ACLs are per node in a cluster) work for
/// commands, renewals and subscriptions; a wrong password fails `Client::new`.
#[test]
#[parallel(cluster)]
fn acl_users_log_in_on_every_node() {
    let c = cluster::shared();
    let user = unique("acl").replace(':', "-");
    for port in c.ports() {
        let _: () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg(&user)
            .arg("reset")
            .arg("on")
            .arg(">s3cret")
            .arg("~*")
            .arg("&*")
            .arg("+@all")
            .query(&mut c.conn(port))
            .unwrap();
    }
    let as_user = |password: &str| {
        connect(c.urls(), |b| {
            b.username(user.clone())
                .password(password)
                .lock_watchdog_timeout(Duration::from_secs(1))
        })
    };
    let err = as_user("wrong-pw").unwrap_err();
    assert!(
        matches!(&err, Error::Auth { user: u, .. } if *u == user),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains(&format!("refused the login of user `{user}`")),
        "{text}"
    );
    assert!(!text.contains("wrong-pw") && !format!("{err:?}").contains("wrong-pw"));
    let client = as_user("s3cret").unwrap();
    let other = c.client();
    let name = unique("acl");
    let guard = client.get_lock(name.clone()).lock().unwrap();
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            other
                .get_lock(name.clone())
                .try_lock_for(Duration::from_secs(30))
                .unwrap()
                .map(|g| g.unlock().unwrap())
                .is_some()
        });
        // Renewals (a rising TTL) run as the user too.
        crate::await_subscribed(c, &crate::support::raw::lock_channel(&name), 1, 1);
        let mut raw = c.raw(&name);
        for _ in 0..2 {
            crate::support::await_renewal("as the ACL user", || {
                crate::support::raw::pttl(&mut raw, &name)
            });
        }
        crate::support::watched::assert_kept_or_cautious(guard.loss(), "the ACL user's hold");
        guard.unlock().unwrap();
        assert!(w.join().unwrap());
    });
    // And the user's own waiters subscribe as the user.
    let guard = other.get_lock(name.clone()).lock().unwrap();
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            client
                .get_lock(name.clone())
                .try_lock_for(Duration::from_secs(30))
                .unwrap()
                .map(|g| g.unlock().unwrap())
                .is_some()
        });
        crate::await_subscribed(c, &crate::support::raw::lock_channel(&name), 1, 1);
        guard.unlock().unwrap();
        assert!(w.join().unwrap());
    });
    for port in c.ports() {
        let _: i64 = redis::cmd("ACL")
            .arg("DELUSER")
            .arg(&user)
            .query(&mut c.conn(port))
            .unwrap();
    }
}

/// `name=` of every connection `CLIENT LIST` shows on one node.
fn connection_names(raw: &mut redis::Connection) -> Vec<String> {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(raw).unwrap();
    list.lines()
        .filter_map(|line| {
            let name = line.split(' ').find_map(|kv| kv.strip_prefix("name="))?;
            Some(name.to_owned())
        })
        .collect()
}

/// Every connection the client opens on every master carries `redmutex:<client-id>`:
/// the command connections, the watchdog's own and the per-node subscriber.
#[test]
#[parallel(cluster)]
fn every_connection_to_every_master_carries_the_client_name() {
    let c = cluster::shared();
    let client = crate::client(|b| b.lock_watchdog_timeout(Duration::from_secs(1)));
    let blocker = c.client();
    let mine = format!("redmutex:{}", client.id());
    let masters = c.masters();
    std::thread::scope(|s| {
        let mut guards = Vec::new();
        let mut waiters = Vec::new();
        for m in &masters {
            // A hold (command pool, then the watchdog's renewals) and a wait (the
            // subscriber session) on each master.
            guards.push(client.get_lock(crate::name_on(m, "named")).lock().unwrap());
            let busy = crate::name_on(m, "named-busy");
            let held = blocker.get_lock(busy.clone()).lock().unwrap();
            let lock = client.get_lock(busy);
            waiters.push((
                held,
                s.spawn(move || {
                    lock.try_lock_for(Duration::from_secs(30))
                        .unwrap()
                        .is_some()
                }),
            ));
        }
        for m in &masters {
            let mut raw = m.conn();
            crate::support::eventually(
                Duration::from_secs(10),
                &format!("3 connections named {mine} on {}", m.port),
                || {
                    connection_names(&mut raw)
                        .iter()
                        .filter(|n| **n == mine)
                        .count()
                        >= 3
                },
            );
        }
        for (held, waiter) in waiters {
            held.unlock().unwrap();
            assert!(waiter.join().unwrap());
        }
        for g in guards {
            g.unlock().unwrap();
        }
    });
}
