//! `redmutex watch --leader NAME`: who leads the election NAME, and every change, live,
//! through the library's leader observer (`LeaderLatch::changes`): a leader that steps
//! down is seen within one unlock message, one that dies when its TTL ends.

use redmutex::{ChangeCause, Client, Leader, LeaderClient};
use serde_json::{Value, json};

use crate::clock;
use crate::connect::ConnectOpts;
use crate::fail::Failure;
use crate::inspect::now_ms;

pub(crate) fn run(name: &str, connect: &ConnectOpts, json: bool) -> Result<(), Failure> {
    let config = connect.config_tuned(|b| b)?;
    let client = Client::new(config).map_err(|e| Failure::runtime(e.to_string()))?;
    let changes = client
        .leader(name)
        .changes()
        .map_err(|e| Failure::runtime(e.to_string()))?;
    loop {
        let change = changes
            .recv()
            .map_err(|e| Failure::runtime(format!("watching the leader of {name:?}: {e}")))?;
        let time = now_ms();
        let cause = match change.cause {
            ChangeCause::Initial => "initial",
            ChangeCause::Released => "released",
            ChangeCause::Expired => "expired",
            _ => "observed",
        };
        if json {
            println!(
                "{}",
                json!({"time": clock::timestamp(time), "time_ms": time, "name": name,
                       "event": "leader", "cause": cause,
                       "leader": change.current.as_ref().map(leader_json),
                       "previous": change.previous.as_ref().map(leader_json)})
            );
        } else {
            let now = describe(change.current.as_ref());
            let line = match (change.cause, change.previous.as_ref()) {
                (ChangeCause::Initial, _) => format!("leader: {now}"),
                (_, previous) => format!(
                    "leader: {now} (was {}; {})",
                    describe(previous),
                    match change.cause {
                        ChangeCause::Released => "it stepped down: unlock message",
                        ChangeCause::Expired => "its lease ran out",
                        _ => "seen on a read",
                    }
                ),
            };
            println!("{}  {name}  {line}", clock::timestamp(time));
        }
    }
}

fn kind(client: LeaderClient) -> &'static str {
    match client {
        LeaderClient::ThisClient => "this client",
        LeaderClient::Redmutex => "redmutex",
        LeaderClient::Redisson => "Redisson",
        _ => "unknown",
    }
}

fn describe(leader: Option<&Leader>) -> String {
    match leader {
        None => "none".to_owned(),
        Some(l) => {
            let lease = l.lease_left.map_or("no TTL".to_owned(), |d| {
                format!("lease {}", clock::span(d.as_millis() as i64))
            });
            format!(
                "{} : {} ({}, {lease})",
                l.client_id,
                l.thread,
                kind(l.client)
            )
        }
    }
}

fn leader_json(l: &Leader) -> Value {
    json!({"owner": l.owner, "client_id": l.client_id, "thread": l.thread,
           "client": kind(l.client), "holds": l.holds,
           "lease_left_ms": l.lease_left.map(|d| d.as_millis() as u64)})
}
