//! Bad input and hostile server settings: odd and huge names, ACL refusals, memory
//! limits. Each works or fails with a clear error; nothing panics or hangs.

use std::time::{Duration, Instant};

use crate::support::raw::{await_numsub, exists, lock_channel, numsub};
use crate::support::{TestServer, assert_no_leftovers, unique};
use redmutex::{Error, Loss};
use serial_test::serial;

/// Every odd name round-trips lock, reentry, queries and release, and its unlock message
/// goes out on the channel the brace rule names.
#[test]
#[serial]
fn odd_names_work_and_follow_the_brace_rule() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let names = [
        String::new(),
        " ".into(),
        "crlf\r\nname".into(),
        "nul\0name".into(),
        "emoji 🔒🦀".into(),
        "{".into(),
        "}".into(),
        "{}".into(),
        "}{".into(),
        "{tag}rest".into(),
        "rest{tag}".into(),
        "a{b}c{d}".into(),
        "redisson_lock__channel:{other}".into(),
        "redisson_unlock_latch:{other}:0123".into(),
        "x".repeat(1 << 20),
    ];
    {
        let client = server.client();
        for name in &names {
            let channel = if name.contains('{') {
                format!("redisson_lock__channel:{name}")
            } else {
                format!("redisson_lock__channel:{{{name}}}")
            };
            let mut listener = server.conn();
            let mut ps = listener.as_pubsub();
            ps.subscribe(&channel).unwrap();
            ps.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let lock = client.get_lock(name.clone());
            let a = lock.lock().unwrap();
            let b = lock.try_lock().unwrap().expect("reentrant");
            assert_eq!(lock.hold_count().unwrap(), 2);
            assert!(lock.is_locked().unwrap());
            b.unlock().unwrap();
            a.unlock().unwrap();
            let msg = ps.get_message().unwrap();
            assert_eq!(msg.get_channel_name(), channel);
            assert_eq!(msg.get_payload::<String>().unwrap(), "0");
            assert!(!exists(&mut raw, name), "{:?}", &name[..name.len().min(40)]);
        }
        // A waiter on a 1 MiB name still wakes by message.
        let big = client.get_lock("y".repeat(1 << 20));
        let held = big.lock().unwrap();
        std::thread::scope(|s| {
            let other = server.client();
            let w = s.spawn(move || {
                let lock = other.get_lock("y".repeat(1 << 20));
                lock.try_lock_for(Duration::from_secs(20))
                    .unwrap()
                    .map(|g| g.unlock().unwrap())
                    .is_some()
            });
            let channel = format!("redisson_lock__channel:{{{}}}", "y".repeat(1 << 20));
            crate::support::eventually(Duration::from_secs(10), "waiter subscribed", || {
                numsub(&mut raw, &channel) == 1
            });
            held.unlock().unwrap();
            assert!(w.join().unwrap());
        });
    }
    assert_no_leftovers(&mut raw);
}

fn acl(raw: &mut redis::Connection, user: &str, rules: &[&str]) {
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg(user)
        .arg("reset")
        .arg("on")
        .arg(">pw")
        .arg(rules)
        .query(raw)
        .unwrap();
}

fn client_as(server: &TestServer, user: &str, watchdog: Duration) -> redmutex::Client {
    redmutex::Client::new(
        redmutex::Config::builder()
            .address(format!("redis://{user}:pw@127.0.0.1:{}/", server.port()))
            .lock_watchdog_timeout(watchdog)
            .retry_attempts(0)
            .build(),
    )
    .unwrap()
}

/// A `try_lock` by `user` with ACL `rules`: refused with a permission error, which is
/// returned for the test's own checks of what it says.
fn refused_try_lock(
    server: &TestServer,
    raw: &mut redis::Connection,
    user: &str,
    rules: &[&str],
) -> Error {
    acl(raw, user, rules);
    let client = client_as(server, user, Duration::from_secs(30));
    let err = client
        .get_lock(unique("acl"))
        .try_lock()
        .map(|g| g.is_some())
        .unwrap_err();
    assert!(matches!(err, Error::Permission(_)), "{err}");
    err
}

/// A user who may not run scripts: a permission error that names the command.
#[test]
#[serial]
fn a_user_without_eval_gets_a_permission_error() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let rules = ["~*", "&*", "+@all", "-@scripting"];
    let err = refused_try_lock(&server, &mut raw, "noeval", &rules);
    assert!(err.to_string().to_lowercase().contains("evalsha"), "{err}");
    assert_no_leftovers(&mut raw);
}

/// A user whose key pattern does not cover the lock: a permission error about keys.
#[test]
#[serial]
fn a_user_without_the_key_pattern_gets_a_permission_error() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let err = refused_try_lock(&server, &mut raw, "nokeys", &["~other:*", "&*", "+@all"]);
    assert!(err.to_string().contains("key"), "{err}");
    assert_no_leftovers(&mut raw);
}

/// A user without channel rights: the release's PUBLISH is refused after the DEL ran. The
/// error says so; redmutex re-reads the state (the lock is free, nothing is renewed), and
/// a waiter of another client still gets the lock, by the holder's TTL.
#[test]
#[serial]
fn a_refused_publish_is_reported_and_waiters_progress_by_ttl() {
    let server = TestServer::start();
    let mut raw = server.conn();
    acl(&mut raw, "nochan", &["~*", "resetchannels", "+@all"]);
    {
        let holder = client_as(&server, "nochan", Duration::from_millis(1500));
        let waiter = server.client();
        let name = unique("acl");
        let lock = holder.get_lock(name.clone());
        let guard = lock.lock().unwrap();
        std::thread::scope(|s| {
            let w = s.spawn(|| {
                let lock = waiter.get_lock(name.clone());
                let started = Instant::now();
                let got = lock
                    .try_lock_for(Duration::from_secs(20))
                    .unwrap()
                    .map(|g| g.unlock().unwrap());
                (got.is_some(), started.elapsed())
            });
            await_numsub(&mut raw, &lock_channel(&name), 1);
            let err = guard.unlock().unwrap_err();
            assert!(matches!(err, Error::Permission(_)), "{err}");
            assert!(err.to_string().contains("channel"), "{err}");
            assert!(
                !lock.is_locked().unwrap(),
                "the DEL ran before the refused PUBLISH"
            );
            assert_eq!(holder.renewing_count(), 0);
            let (got, waited) = w.join().unwrap();
            assert!(got);
            println!("waiter acquired by TTL after {waited:?} (holder lease 1500 ms)");
        });
    }
    assert_no_leftovers(&mut raw);
}

/// A waiter whose user may not subscribe still acquires, by the holder's TTL.
#[test]
#[serial]
fn a_waiter_that_cannot_subscribe_waits_by_ttl() {
    let server = TestServer::start();
    let mut raw = server.conn();
    acl(&mut raw, "nosub", &["~*", "resetchannels", "+@all"]);
    {
        let holder = server.client_with_watchdog(Duration::from_secs(30));
        let waiter = client_as(&server, "nosub", Duration::from_secs(30));
        let name = unique("acl");
        let lock = holder.get_lock(name.clone());
        let guard = lock.lock_with_lease(Duration::from_millis(800)).unwrap();
        let other = waiter.get_lock(name.clone());
        let got = other.try_lock_for(Duration::from_secs(20)).unwrap();
        assert!(got.is_some());
        drop(got);
        assert!(matches!(guard.unlock(), Err(Error::LockLost { .. })));
    }
    assert_no_leftovers(&mut raw);
}

/// maxmemory with noeviction: acquire and release fail with the OOM error before
/// changing anything; the held lock stays held and frees at its lease.
#[test]
#[serial]
fn out_of_memory_is_an_error_and_changes_nothing() {
    let server = TestServer::start();
    let mut raw = server.conn();
    {
        let client = server.client();
        let lock = client.get_lock(unique("oom"));
        let other = client.get_lock(unique("oom"));
        let guard = lock.lock_with_lease(Duration::from_secs(2)).unwrap();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory-policy")
            .arg("noeviction")
            .query(&mut raw)
            .unwrap();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory")
            .arg(1)
            .query(&mut raw)
            .unwrap();
        let err = other.try_lock().map(|g| g.is_some()).unwrap_err();
        assert!(
            matches!(err, Error::Redis(_)) && err.to_string().contains("OOM"),
            "{err}"
        );
        let err = guard.unlock().unwrap_err();
        assert!(err.to_string().contains("OOM"), "{err}");
        assert!(
            lock.is_locked().unwrap(),
            "a failed release must not free the lock"
        );
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory")
            .arg(0)
            .query(&mut raw)
            .unwrap();
        crate::support::eventually(Duration::from_secs(5), "lease ran out", || {
            !lock.is_locked().unwrap()
        });
    }
    assert_no_leftovers(&mut raw);
}

/// A volatile eviction policy evicts the lock key (it has a TTL): the holder learns it
/// as a lost lock at the next renewal.
#[test]
#[serial]
fn an_evicted_lock_is_reported_lost() {
    let server = TestServer::start();
    let mut raw = server.conn();
    {
        let client = server.client_with_watchdog(Duration::from_secs(1));
        let lock = client.get_lock(unique("evict"));
        let guard = lock.lock().unwrap();
        let signal = guard.loss_signal();
        let info: String = redis::cmd("INFO").arg("memory").query(&mut raw).unwrap();
        let used: u64 = info
            .lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory-policy")
            .arg("volatile-lru")
            .query(&mut raw)
            .unwrap();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory")
            .arg(used.saturating_sub(1))
            .query(&mut raw)
            .unwrap();
        // Any write makes Redis evict volatile keys first; ours is the only one.
        let _ = redis::cmd("SET")
            .arg("filler")
            .arg("x".repeat(4096))
            .query::<()>(&mut raw);
        assert!(
            !exists(&mut raw, lock.name()),
            "the lock key was not evicted"
        );
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory")
            .arg(0)
            .query(&mut raw)
            .unwrap();
        assert_eq!(
            signal.recv_timeout(Duration::from_secs(5)).unwrap(),
            Loss::Lost
        );
        assert!(matches!(guard.unlock(), Err(Error::LockLost { .. })));
    }
    assert_no_leftovers(&mut raw);
}

// ---------------------------------------------------------------------------------------
// The table: every public constructor and every public method that touches Redis, against
// each kind of bad input. One row per method; each run below states what a method must do
// with one kind of input and checks every row.
// ---------------------------------------------------------------------------------------

use std::mem::discriminant;

use redmutex::{Client, Config, PermitId, RExpirable, RReadWriteLock};

/// One public method, called on the object named `name`, its answer reduced to `Ok(())`.
type Call = fn(&Client, &str) -> redmutex::Result<()>;

/// How a method treats a key that holds a value of another type than its object's.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Foreign {
    /// `Error::WrongType`, and the value is left as it was.
    Refused,
    /// It does not read the value (`EXISTS`, `PEXPIRE`, `PTTL`): an answer, and the
    /// value is left as it was.
    Untouched,
    /// It deletes the key whatever it holds, as Redisson's `delete` and `forceUnlock` do.
    Deleted,
}

/// What a key of the object holds natively: a hash (the Redisson locks), a count
/// string (semaphores, latch) or a token string.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Family {
    Hash,
    Count,
    Token,
}

struct Row {
    name: &'static str,
    family: Family,
    foreign: Foreign,
    call: Call,
}

fn row(name: &'static str, family: Family, foreign: Foreign, call: Call) -> Row {
    Row {
        name,
        family,
        foreign,
        call,
    }
}

const WAIT: Duration = Duration::from_millis(50);
const LEASE: Duration = Duration::from_secs(10);

/// The rows of one Redisson lock kind: `$get` makes the lock's owner from the client
/// and the name, `$view` turns a reference to it into the lock.
macro_rules! lock_rows {
    ($kind:literal, $get:expr, $view:expr) => {
        vec![
            row(
                concat!($kind, ".lock"),
                Family::Hash,
                Foreign::Refused,
                |c, n| {
                    let owner = $get(c, n);
                    $view(&owner).lock()?.unlock()
                },
            ),
            row(
                concat!($kind, ".try_lock"),
                Family::Hash,
                Foreign::Refused,
                |c, n| {
                    let owner = $get(c, n);
                    $view(&owner).try_lock()?.map_or(Ok(()), |g| g.unlock())
                },
            ),
            row(
                concat!($kind, ".try_lock_for"),
                Family::Hash,
                Foreign::Refused,
                |c, n| {
                    let owner = $get(c, n);
                    $view(&owner)
                        .try_lock_for(WAIT)?
                        .map_or(Ok(()), |g| g.unlock())
                },
            ),
            row(
                concat!($kind, ".lock_with_lease"),
                Family::Hash,
                Foreign::Refused,
                |c, n| {
                    let owner = $get(c, n);
                    $view(&owner).lock_with_lease(LEASE)?.unlock()
                },
            ),
            row(
                concat!($kind, ".try_lock_with_lease"),
                Family::Hash,
                Foreign::Refused,
                |c, n| {
                    let owner = $get(c, n);
                    $view(&owner)
                        .try_lock_with_lease(WAIT, LEASE)?
                        .map_or(Ok(()), |g| g.unlock())
                },
            ),
            row(
                concat!($kind, ".with_lock"),
                Family::Hash,
                Foreign::Refused,
                |c, n| {
                    let owner = $get(c, n);
                    $view(&owner).with_lock(|_| Ok::<(), Error>(()))
                },
            ),
            row(
                concat!($kind, ".try_with_lock_for"),
                Family::Hash,
                Foreign::Refused,
                |c, n| {
                    let owner = $get(c, n);
                    $view(&owner)
                        .try_with_lock_for(WAIT, |_| Ok::<(), Error>(()))
                        .map(drop)
                },
            ),
            row(
                concat!($kind, ".lock_until"),
                Family::Hash,
                Foreign::Refused,
                |c, n| {
                    let owner = $get(c, n);
                    $view(&owner).lock_until(&redmutex::Cancel::new())?.unlock()
                },
            ),
            row(
                concat!($kind, ".lock_as+unlock_as"),
                Family::Hash,
                Foreign::Refused,
                |c, n| {
                    let owner = $get(c, n);
                    let who = redmutex::Owner::unique();
                    $view(&owner).lock_as(who)?;
                    $view(&owner).unlock_as(who)
                },
            ),
            row(
                concat!($kind, ".is_locked"),
                Family::Hash,
                Foreign::Untouched,
                |c, n| {
                    let owner = $get(c, n);
                    $view(&owner).is_locked().map(drop)
                },
            ),
            row(
                concat!($kind, ".hold_count"),
                Family::Hash,
                Foreign::Refused,
                |c, n| {
                    let owner = $get(c, n);
                    $view(&owner).hold_count().map(drop)
                },
            ),
            row(
                concat!($kind, ".is_held_by_current_thread"),
                Family::Hash,
                Foreign::Refused,
                |c, n| {
                    let owner = $get(c, n);
                    $view(&owner).is_held_by_current_thread().map(drop)
                },
            ),
            row(
                concat!($kind, ".remain_time_to_live"),
                Family::Hash,
                Foreign::Untouched,
                |c, n| {
                    let owner = $get(c, n);
                    $view(&owner).remain_time_to_live().map(drop)
                },
            ),
            row(
                concat!($kind, ".expire"),
                Family::Hash,
                Foreign::Untouched,
                |c, n| {
                    let owner = $get(c, n);
                    RExpirable::expire($view(&owner), LEASE).map(drop)
                },
            ),
            row(
                concat!($kind, ".force_unlock"),
                Family::Hash,
                Foreign::Deleted,
                |c, n| {
                    let owner = $get(c, n);
                    $view(&owner).force_unlock().map(drop)
                },
            ),
        ]
    };
}

fn same<T>(x: &T) -> &T {
    x
}

/// Every row: the Redisson lock kinds, the semaphores, the latch and the token lock.
fn rows() -> Vec<Row> {
    let mut rows = Vec::new();
    rows.extend(lock_rows!(
        "rlock",
        |c: &Client, n: &str| c.get_lock(n),
        same
    ));
    rows.extend(lock_rows!(
        "fair",
        |c: &Client, n: &str| c.get_fair_lock(n),
        same
    ));
    rows.extend(lock_rows!(
        "fenced",
        |c: &Client, n: &str| c.get_fenced_lock(n),
        same
    ));
    rows.extend(lock_rows!(
        "spin",
        |c: &Client, n: &str| c.get_spin_lock(n),
        same
    ));
    rows.extend(lock_rows!(
        "non_reentrant",
        |c: &Client, n: &str| c.get_non_reentrant_lock(n),
        same
    ));
    rows.extend(lock_rows!(
        "non_reentrant_fair",
        |c: &Client, n: &str| c.get_non_reentrant_fair_lock(n),
        same
    ));
    rows.extend(lock_rows!(
        "read",
        |c: &Client, n: &str| c.get_read_write_lock(n),
        RReadWriteLock::read_lock
    ));
    rows.extend(lock_rows!(
        "write",
        |c: &Client, n: &str| c.get_read_write_lock(n),
        RReadWriteLock::write_lock
    ));
    // A read-write lock reads the hash's `mode` even to answer is_locked, and
    // force_unlock deletes only a hash in a lock mode (as Redisson's do).
    for row in &mut rows {
        let rw = row.name.starts_with("read.") || row.name.starts_with("write.");
        if rw && (row.name.ends_with(".is_locked") || row.name.ends_with(".force_unlock")) {
            row.foreign = Foreign::Refused;
        }
    }
    use Family::{Count, Token};
    use Foreign::{Deleted, Refused, Untouched};
    rows.extend([
        row("semaphore.try_set_permits", Count, Untouched, |c, n| {
            c.get_semaphore(n).try_set_permits(1).map(drop)
        }),
        row("semaphore.add_permits+acquire", Count, Refused, |c, n| {
            let s = c.get_semaphore(n);
            s.add_permits(1)?;
            s.acquire()?.release()
        }),
        row("semaphore.try_acquire", Count, Refused, |c, n| {
            c.get_semaphore(n).try_acquire().map(drop)
        }),
        row("semaphore.try_acquire_for", Count, Refused, |c, n| {
            c.get_semaphore(n).try_acquire_for(WAIT).map(drop)
        }),
        row("semaphore.release", Count, Refused, |c, n| {
            c.get_semaphore(n).release()
        }),
        row("semaphore.release_if_exists", Count, Refused, |c, n| {
            c.get_semaphore(n).release_if_exists(1).map(drop)
        }),
        row("semaphore.available_permits", Count, Refused, |c, n| {
            c.get_semaphore(n).available_permits().map(drop)
        }),
        row("semaphore.drain_permits", Count, Refused, |c, n| {
            c.get_semaphore(n).drain_permits().map(drop)
        }),
        row("semaphore.reduce_permits", Count, Refused, |c, n| {
            c.get_semaphore(n).reduce_permits(1)
        }),
        row("semaphore.expire", Count, Untouched, |c, n| {
            c.get_semaphore(n).expire(LEASE).map(drop)
        }),
        row("semaphore.delete", Count, Deleted, |c, n| {
            c.get_semaphore(n).delete().map(drop)
        }),
        row("permits.try_set_permits", Count, Untouched, |c, n| {
            c.get_permit_expirable_semaphore(n)
                .try_set_permits(1)
                .map(drop)
        }),
        row("permits.set_permits+acquire", Count, Refused, |c, n| {
            let s = c.get_permit_expirable_semaphore(n);
            s.set_permits(1)?;
            let id = s.acquire()?;
            s.release(id)
        }),
        row("permits.try_acquire", Count, Refused, |c, n| {
            c.get_permit_expirable_semaphore(n).try_acquire().map(drop)
        }),
        row("permits.try_acquire_with_lease", Count, Refused, |c, n| {
            c.get_permit_expirable_semaphore(n)
                .try_acquire_with_lease(WAIT, LEASE)
                .map(drop)
        }),
        row("permits.add_permits", Count, Refused, |c, n| {
            c.get_permit_expirable_semaphore(n).add_permits(1)
        }),
        row("permits.available_permits", Count, Refused, |c, n| {
            c.get_permit_expirable_semaphore(n)
                .available_permits()
                .map(drop)
        }),
        // The two below read only the permits' zset, not the count's key.
        row("permits.try_release", Count, Untouched, |c, n| {
            c.get_permit_expirable_semaphore(n)
                .try_release(PermitId::from_bytes([7; 16]))
                .map(drop)
        }),
        row("permits.lease_time", Count, Untouched, |c, n| {
            c.get_permit_expirable_semaphore(n)
                .lease_time(PermitId::from_bytes([7; 16]))
                .map(drop)
        }),
        row("latch.try_set_count", Count, Untouched, |c, n| {
            c.get_count_down_latch(n).try_set_count(1).map(drop)
        }),
        row("latch.count_down", Count, Refused, |c, n| {
            c.get_count_down_latch(n).count_down()
        }),
        row("latch.get_count", Count, Refused, |c, n| {
            c.get_count_down_latch(n).get_count().map(drop)
        }),
        row("latch.wait_for", Count, Refused, |c, n| {
            c.get_count_down_latch(n).wait_for(WAIT).map(drop)
        }),
        row("latch.delete", Count, Deleted, |c, n| {
            c.get_count_down_latch(n).delete().map(drop)
        }),
        row("token.lock", Token, Refused, |c, n| {
            c.get_token_lock(n).lock()?.unlock()
        }),
        row("token.try_lock_for", Token, Refused, |c, n| {
            c.get_token_lock(n)
                .try_lock_for(WAIT)?
                .map_or(Ok(()), |g| g.unlock())
        }),
        row("token.lock_with_lease+extend", Token, Refused, |c, n| {
            let g = c.get_token_lock(n).lock_with_lease(LEASE)?;
            g.extend(LEASE)?;
            g.unlock()
        }),
        row("token.is_locked", Token, Untouched, |c, n| {
            c.get_token_lock(n).is_locked().map(drop)
        }),
        row("token.holder_token", Token, Refused, |c, n| {
            c.get_token_lock(n).holder_token().map(drop)
        }),
        row("token.force_unlock", Token, Deleted, |c, n| {
            c.get_token_lock(n).force_unlock().map(drop)
        }),
    ]);
    rows
}

/// The key a row's object keeps its state in for `name` (the permit semaphore also
/// has `{name}:timeout`, the fair locks their queue keys, which stay untouched).
fn key_of(name: &str) -> String {
    name.to_owned()
}

/// A foreign value at `key`, and a check that it is still there.
enum Value {
    List,
    Word,
}

impl Value {
    fn put(&self, raw: &mut redis::Connection, key: &str) {
        let _: () = redis::cmd("DEL").arg(key).query(raw).unwrap();
        let _: () = match self {
            Self::List => redis::cmd("RPUSH").arg(key).arg("app").query(raw).unwrap(),
            Self::Word => redis::cmd("SET").arg(key).arg("hello").query(raw).unwrap(),
        };
    }

    fn intact(&self, raw: &mut redis::Connection, key: &str) -> bool {
        match self {
            Self::List => {
                let items: Vec<String> = redis::cmd("LRANGE")
                    .arg(key)
                    .arg(0)
                    .arg(-1)
                    .query(raw)
                    .unwrap();
                items == ["app"]
            }
            Self::Word => {
                let value: Option<String> = redis::cmd("GET").arg(key).query(raw).unwrap();
                value.as_deref() == Some("hello")
            }
        }
    }

    fn gone(&self, raw: &mut redis::Connection, key: &str) -> bool {
        !exists(raw, key)
    }
}

/// Every method on a key that holds a list, and (for the objects that do not keep a
/// token string) the string `hello`: `WrongType` for those that read it, and the value
/// is never changed, except by the methods that delete any key (as Redisson's do).
#[test]
#[serial]
fn every_method_refuses_a_key_of_another_type_and_leaves_it() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client_with(|b| b.retry_attempts(0));
    let mut failures = Vec::new();
    for row in rows() {
        let values: &[Value] = match row.family {
            Family::Token => &[Value::List],
            Family::Hash | Family::Count => &[Value::List, Value::Word],
        };
        for value in values {
            let name = unique("foreign");
            let key = key_of(&name);
            value.put(&mut raw, &key);
            let got = (row.call)(&client, &name);
            let ok = match row.foreign {
                Foreign::Refused => {
                    matches!(&got, Err(Error::WrongType { name: n, .. }) if *n == name)
                        && value.intact(&mut raw, &key)
                }
                Foreign::Untouched => got.is_ok() && value.intact(&mut raw, &key),
                Foreign::Deleted => got.is_ok() && value.gone(&mut raw, &key),
            };
            if !ok {
                let kind = match value {
                    Value::List => "a list",
                    Value::Word => "\"hello\"",
                };
                failures.push(format!(
                    "{} on {kind}: expected {:?}, got {got:?}",
                    row.name, row.foreign
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every method on the empty name and on a 1 MiB name does what it does on an ordinary
/// name: the same outcome, nothing panics.
#[test]
#[serial]
fn every_method_takes_empty_and_huge_names() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client_with(|b| b.retry_attempts(0));
    let huge = "n".repeat(1 << 20);
    let mut failures = Vec::new();
    for row in rows() {
        let mut outcome = |name: &str| {
            let _: () = redis::cmd("FLUSHALL").query(&mut raw).unwrap();
            (row.call)(&client, name).map_err(|e| {
                let shown = e.to_string();
                assert!(
                    shown.len() < 2000,
                    "{}: a {} byte message",
                    row.name,
                    shown.len()
                );
                discriminant(&e)
            })
        };
        let ordinary = outcome(&unique("plain"));
        for (label, name) in [("empty", ""), ("1 MiB", huge.as_str())] {
            let got = outcome(name);
            if got != ordinary {
                failures.push(format!(
                    "{} on the {label} name: {got:?}, on an ordinary one {ordinary:?}",
                    row.name
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// One public method that takes a duration, called with `d`.
type Timed = fn(&Client, &str, Duration) -> redmutex::Result<()>;

/// Every method that takes a lease, a TTL or a wait, with a zero and with the largest
/// duration: a lease or TTL must be refused as an invalid argument that names it; a
/// wait of zero is one attempt, and an endless one returns as soon as the object is
/// free (each object here is).
#[test]
#[serial]
fn zero_and_endless_durations_are_named_or_honoured() {
    let server = TestServer::start();
    let client = server.client_with(|b| b.retry_attempts(0));
    // (method, the argument it names, or None for a wait)
    let timed: Vec<(&str, Option<&str>, Timed)> = vec![
        ("rlock.lock_with_lease", Some("lease"), |c, n, d| {
            c.get_lock(n).lock_with_lease(d)?.unlock()
        }),
        ("rlock.try_lock_with_lease", Some("lease"), |c, n, d| {
            c.get_lock(n)
                .try_lock_with_lease(WAIT, d)?
                .map_or(Ok(()), |g| g.unlock())
        }),
        ("fair.lock_with_lease", Some("lease"), |c, n, d| {
            c.get_fair_lock(n).lock_with_lease(d)?.unlock()
        }),
        ("write.lock_with_lease", Some("lease"), |c, n, d| {
            c.get_read_write_lock(n)
                .write_lock()
                .lock_with_lease(d)?
                .unlock()
        }),
        ("rlock.expire", Some("ttl"), |c, n, d| {
            c.get_lock(n).expire(d).map(drop)
        }),
        ("rlock.expire_if_greater", Some("ttl"), |c, n, d| {
            c.get_lock(n).expire_if_greater(d).map(drop)
        }),
        (
            "semaphore.try_set_permits_with_ttl",
            Some("ttl"),
            |c, n, d| c.get_semaphore(n).try_set_permits_with_ttl(1, d).map(drop),
        ),
        ("permits.acquire_with_lease", Some("lease"), |c, n, d| {
            let s = c.get_permit_expirable_semaphore(n);
            s.set_permits(1)?;
            let id = s.acquire_with_lease(d)?;
            s.release(id)
        }),
        ("permits.update_lease_time", Some("lease"), |c, n, d| {
            let s = c.get_permit_expirable_semaphore(n);
            s.set_permits(1)?;
            let id = s.acquire()?;
            s.update_lease_time(id, d)?;
            s.release(id)
        }),
        ("token.lock_with_lease", Some("lease"), |c, n, d| {
            c.get_token_lock(n).lock_with_lease(d)?.unlock()
        }),
        ("token.extend", Some("ttl"), |c, n, d| {
            let g = c.get_token_lock(n).lock()?;
            let extended = g.extend(d);
            g.unlock()?;
            extended
        }),
        ("rlock.try_lock_for", None, |c, n, d| {
            c.get_lock(n)
                .try_lock_for(d)?
                .map_or(Ok(()), |g| g.unlock())
        }),
        ("fair.try_lock_for", None, |c, n, d| {
            c.get_fair_lock(n)
                .try_lock_for(d)?
                .map_or(Ok(()), |g| g.unlock())
        }),
        ("spin.try_lock_for", None, |c, n, d| {
            c.get_spin_lock(n)
                .try_lock_for(d)?
                .map_or(Ok(()), |g| g.unlock())
        }),
        ("semaphore.try_acquire_for", None, |c, n, d| {
            let s = c.get_semaphore(n);
            s.add_permits(1)?;
            s.try_acquire_for(d)?.map_or(Ok(()), |p| p.release())
        }),
        ("permits.try_acquire_for", None, |c, n, d| {
            let s = c.get_permit_expirable_semaphore(n);
            s.set_permits(1)?;
            s.try_acquire_for(d)?.map_or(Ok(()), |id| s.release(id))
        }),
        ("latch.wait_for", None, |c, n, d| {
            c.get_count_down_latch(n).wait_for(d).map(drop)
        }),
        ("token.try_lock_for", None, |c, n, d| {
            c.get_token_lock(n)
                .try_lock_for(d)?
                .map_or(Ok(()), |g| g.unlock())
        }),
    ];
    let mut failures = Vec::new();
    for (method, argument, call) in timed {
        for d in [Duration::ZERO, Duration::MAX] {
            let got = call(&client, &unique("timed"), d);
            let ok = match (argument, &got) {
                (Some(arg), Err(e @ Error::InvalidArgument { argument, .. })) => {
                    *argument == arg && e.to_string().contains(&format!("`{arg}`"))
                }
                (Some(_), _) => false,
                (None, got) => got.is_ok(),
            };
            if !ok {
                failures.push(format!("{method}({d:?}): {got:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every constructor against a wrong scheme, an unreachable address, a wrong password
/// and a database the server does not have: each refused at once with the error a
/// caller can act on, and a message that never shows the password.
#[test]
#[serial]
fn every_constructor_refuses_bad_addresses_and_logins() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "requirepass", "right-pw"])
        .query(&mut raw)
        .unwrap();
    let port = server.port();
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let urls = [
        (
            "wrong scheme",
            format!("http://:right-pw@127.0.0.1:{port}/"),
        ),
        (
            "unreachable",
            format!("redis://:right-pw@127.0.0.1:{closed}/"),
        ),
        (
            "wrong password",
            format!("redis://:wrong-pw@127.0.0.1:{port}/"),
        ),
        ("no password", format!("redis://127.0.0.1:{port}/")),
        (
            "wrong database",
            format!("redis://:right-pw@127.0.0.1:{port}/77"),
        ),
    ];
    type Constructor = fn(&str) -> redmutex::Result<Client>;
    let constructors: [(&str, Constructor); 3] = [
        ("Client::open", |url| Client::open(url)),
        ("Client::new", |url| {
            Client::new(
                Config::builder()
                    .address(url)
                    .connection_timeout(Duration::from_secs(2))
                    .build(),
            )
        }),
        ("Config::from_redisson_yaml_str", |url| {
            Client::new(Config::from_redisson_yaml_str(&format!(
                "singleServerConfig:\n  address: \"{url}\"\n  connectTimeout: 2000\n"
            ))?)
        }),
    ];
    let mut failures = Vec::new();
    for (constructor, make) in constructors {
        for (fault, url) in &urls {
            let got = make(url);
            let ok = match (&got, *fault) {
                (Err(Error::Config(m)), "wrong scheme") => m.contains("not Redis's"),
                (Err(Error::Connect { .. }), "unreachable") => true,
                (Err(Error::Auth { user, .. }), "wrong password" | "no password") => {
                    user == "default"
                }
                (Err(Error::Config(m)), "wrong database") => m.contains("has no database 77"),
                _ => false,
            };
            let shown = match &got {
                Ok(_) => String::new(),
                Err(e) => format!("{e} {e:?}"),
            };
            if !ok || shown.contains("right-pw") || shown.contains("wrong-pw") {
                failures.push(format!("{constructor} with {fault}: {shown}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every method of a client whose server went away fails with an error, within a hang
/// guard, and never panics.
#[test]
#[serial]
fn every_method_fails_cleanly_when_the_server_is_gone() {
    let mut server = TestServer::start();
    let client = server.client_with(|b| {
        b.retry_attempts(0)
            .connection_timeout(Duration::from_millis(50))
            .response_timeout(Duration::from_millis(300))
            .pool_min_idle(Some(0))
    });
    server.kill();
    let mut failures = Vec::new();
    for row in rows() {
        let started = Instant::now();
        let got = (row.call)(&client, &unique("gone"));
        let took = started.elapsed();
        match got {
            Err(Error::Redis(_) | Error::PoolTimeout { .. } | Error::ResponseTimeout(_)) => {}
            other => failures.push(format!("{}: {other:?}", row.name)),
        }
        if took > Duration::from_secs(20) {
            failures.push(format!("{}: took {took:?}", row.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
