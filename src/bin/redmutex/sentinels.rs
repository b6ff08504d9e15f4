//! Finding the master through the sentinels, also while they fail it over.
//!
//! Between a master's death and its replacement (`down-after-milliseconds`, then an
//! election: 30 s and more with Redis's defaults), the sentinels name an address that
//! refuses connections; right after a `SENTINEL FAILOVER` some may still name the old
//! master, now a replica. An operator runs the tool exactly then, so one refusal is not
//! the answer: the tool asks every sentinel again until a named node is up and says it is
//! a master, or until `--failover-wait-ms` has passed.

use std::time::{Duration, Instant};

use redmutex::Config;

use crate::fail::Failure;

/// The master's `host:port` and a command connection to it, and the sentinels asked
/// (for messages).
pub(crate) struct Found {
    pub(crate) addr: String,
    pub(crate) client: redis::Client,
    pub(crate) conn: redis::Connection,
    pub(crate) asked: String,
}

/// Asks the sentinels for `master` until one of the nodes they name answers as a master,
/// for at most `wait`. A master name no sentinel knows, or an address that is no
/// sentinel, fails at once (the options are wrong, waiting would not help).
pub(crate) fn find_master(
    config: &Config,
    master: &str,
    sentinels: &[(String, redis::Client)],
    timeout: Duration,
    wait: Duration,
) -> Result<Found, Failure> {
    let asked = sentinels
        .iter()
        .map(|(a, _)| a.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let deadline = Instant::now() + wait;
    let mut switches: Option<redis::Connection> = None;
    let mut told = false;
    loop {
        let named = ask(master, sentinels, timeout, &asked)?;
        let mut refused = Vec::new();
        for addr in &named {
            let client = config
                .node_client(addr)
                .map_err(|e| Failure::usage(e.to_string()))?;
            match open_master(&client, addr, timeout) {
                Ok(conn) => {
                    return Ok(Found {
                        addr: addr.clone(),
                        client,
                        conn,
                        asked,
                    });
                }
                Err(why) => refused.push(why),
            }
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(Failure::runtime(format!(
                "the sentinels ({asked}) named no reachable master \"{master}\" within {} ms \
                 ({}): a failover may still be under way; --failover-wait-ms waits longer",
                wait.as_millis(),
                refused.join("; ")
            )));
        }
        if !told {
            eprintln!(
                "redmutex: {}; waiting up to {} ms for the sentinels to name another master",
                refused.join("; "),
                wait.as_millis()
            );
            told = true;
        }
        if switches.is_none() {
            switches = subscribe_switches(sentinels, timeout);
        }
        // A switch message means "ask again now"; without one the round ends after at
        // most a second, so a missed or unsubscribable message costs no more than that.
        // A timed-out read may leave redis-rs out of step with the replies, which only
        // matters for the next read: that one too just means "ask again".
        let pause = (deadline - now).min(Duration::from_secs(1));
        match switches.as_mut() {
            Some(sub) => {
                let heard = sub
                    .set_read_timeout(Some(pause))
                    .and_then(|()| sub.recv_response());
                if let Err(e) = heard
                    && !e.is_timeout()
                {
                    switches = None;
                }
            }
            None => std::thread::sleep(pause),
        }
    }
}

/// The distinct addresses the reachable sentinels name for `master`, in the order they
/// were named. No sentinel reachable is a runtime failure; none that knows the name, or
/// an answer that is no sentinel's, a usage error.
fn ask(
    master: &str,
    sentinels: &[(String, redis::Client)],
    timeout: Duration,
    asked: &str,
) -> Result<Vec<String>, Failure> {
    let mut named: Vec<String> = Vec::new();
    let mut unreachable = Vec::new();
    let mut unknown = 0;
    for (addr, client) in sentinels {
        let mut conn = match crate::connect::connect(client, addr, timeout) {
            Ok(conn) => conn,
            Err(failure) => {
                unreachable.push(failure.message);
                continue;
            }
        };
        let answer: redis::RedisResult<Option<(String, u16)>> = redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(master)
            .query(&mut conn);
        match answer {
            Ok(Some((host, port))) => {
                let addr = crate::slots::join_host_port(&host, port);
                if !named.contains(&addr) {
                    named.push(addr);
                }
            }
            Ok(None) => unknown += 1,
            Err(e) if e.is_io_error() || e.is_timeout() => {
                unreachable.push(format!("sentinel {addr}: {e}"));
            }
            Err(e) => {
                return Err(Failure::usage(format!(
                    "{addr} is not a sentinel (SENTINEL answered: {e}): --sentinel takes \
                     the sentinels' addresses, --url a plain server"
                )));
            }
        }
    }
    if !named.is_empty() {
        return Ok(named);
    }
    if unknown > 0 {
        return Err(Failure::usage(format!(
            "no sentinel monitors a master named \"{master}\" (asked {asked}): check --master \
             (Redisson's masterName) against `SENTINEL masters`"
        )));
    }
    Err(Failure::runtime(format!(
        "cannot reach any sentinel ({}): check --sentinel",
        unreachable.join("; ")
    )))
}

/// A command connection to `addr` if it is up and a master. A node that says it is a
/// replica is a demoted master some sentinel has not caught up with; a user who may not
/// run `ROLE` gets the node as it is (nothing better can be known).
fn open_master(
    client: &redis::Client,
    addr: &str,
    timeout: Duration,
) -> Result<redis::Connection, String> {
    let mut conn = crate::connect::connect(client, addr, timeout).map_err(|f| f.message)?;
    match redis::cmd("ROLE").query::<redis::Value>(&mut conn) {
        Ok(redis::Value::Array(parts)) => match parts.first() {
            Some(redis::Value::BulkString(role)) if role.as_slice() != b"master" => Err(format!(
                "{addr} is a {} now, not the master",
                String::from_utf8_lossy(role)
            )),
            _ => Ok(conn),
        },
        Ok(_) => Ok(conn),
        Err(e) if e.is_io_error() || e.is_timeout() => Err(format!("{addr}: {e}")),
        Err(_) => Ok(conn),
    }
}

/// A connection subscribed to the first reachable sentinel's `+switch-master` events,
/// or `None` when no sentinel takes the subscription.
fn subscribe_switches(
    sentinels: &[(String, redis::Client)],
    timeout: Duration,
) -> Option<redis::Connection> {
    sentinels.iter().find_map(|(addr, client)| {
        let mut conn = crate::connect::connect(client, addr, timeout).ok()?;
        let packed = redis::cmd("SUBSCRIBE")
            .arg("+switch-master")
            .get_packed_command();
        conn.send_packed_command(&packed).ok()?;
        conn.recv_response().ok()?;
        Some(conn)
    })
}
