//! One test body, run against several deployments: a [`TestServer`] and the shared
//! local [`Cluster`] and the local [`SentinelSet`]. The suites in `tests/suites/` are
//! written against [`Deployment`]; each lists its cases once, and each deployment binary
//! stamps them with [`cases!`](crate::cases).

use std::time::Duration;

use redmutex::{Client, Config, ConfigBuilder};

use super::TestServer;
use super::cluster::{Cluster, key_slot};
use super::sentinel::{MASTER_NAME, SentinelSet};

/// What a suite needs from the Redis it runs against.
pub trait Deployment: Sync {
    /// A config builder that points at this deployment.
    fn builder(&self) -> ConfigBuilder;

    /// A raw connection (no routing) to the node that serves `key` (and every key and
    /// channel of the object named `key`, by the brace rule).
    fn raw(&self, key: &str) -> redis::Connection;

    /// True when unlock messages are `SPUBLISH`ed (a cluster with sharded pub/sub).
    fn sharded(&self) -> bool;

    /// A redmutex client with the defaults.
    fn client(&self) -> Client {
        self.client_with(|b| b)
    }

    /// A redmutex client whose watchdog keeps leases of `timeout`.
    fn client_with_watchdog(&self, timeout: Duration) -> Client {
        self.client_with(|b| b.lock_watchdog_timeout(timeout))
    }

    /// A redmutex client with settings changed by `f`.
    fn client_with(&self, f: impl FnOnce(ConfigBuilder) -> ConfigBuilder) -> Client {
        Client::new(f(self.builder()).build()).unwrap()
    }
}

impl Deployment for TestServer {
    fn builder(&self) -> ConfigBuilder {
        Config::builder().address(self.url())
    }

    fn raw(&self, _key: &str) -> redis::Connection {
        self.conn()
    }

    fn sharded(&self) -> bool {
        false
    }
}

impl Deployment for Cluster {
    fn builder(&self) -> ConfigBuilder {
        Config::builder().cluster_nodes(self.urls())
    }

    fn raw(&self, key: &str) -> redis::Connection {
        let conn = self.master_for_slot(key_slot(key)).conn();
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        conn
    }

    fn sharded(&self) -> bool {
        // Redis 6.2 has no sharded pub/sub: the clients fall back to plain (AUTO).
        crate::server().has_sharded_pubsub()
    }
}

impl Deployment for SentinelSet {
    fn builder(&self) -> ConfigBuilder {
        let b = Config::builder()
            .master_name(MASTER_NAME)
            .sentinel_addresses(self.sentinel_urls());
        match &self.spec().auth {
            None => b,
            Some(a) => b
                .username(&a.user)
                .password(&a.password)
                .sentinel_password(&a.sentinel_password),
        }
    }

    fn raw(&self, _key: &str) -> redis::Connection {
        let conn = self.master().conn();
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        conn
    }

    fn sharded(&self) -> bool {
        false
    }
}

/// Messages published on `channel` while `f` runs, plus those that arrive until it has
/// been quiet for half a second; subscribed the way the deployment's clients publish.
pub fn tap<D: Deployment, R>(d: &D, channel: &str, f: impl FnOnce() -> R) -> (R, Vec<String>) {
    let mut conn = d.raw(channel);
    let command = if d.sharded() {
        "SSUBSCRIBE"
    } else {
        "SUBSCRIBE"
    };
    conn.send_packed_command(&redis::cmd(command).arg(channel).get_packed_command())
        .unwrap();
    let confirmation = conn.recv_response().unwrap();
    assert!(
        matches!(confirmation, redis::Value::Array(_)),
        "{confirmation:?}"
    );
    let result = f();
    conn.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut got = Vec::new();
    loop {
        match conn.recv_response() {
            Ok(redis::Value::Array(parts)) => {
                let text: Vec<String> = parts
                    .iter()
                    .map(|p| match p {
                        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                        other => format!("{other:?}"),
                    })
                    .collect();
                if matches!(
                    text.first().map(String::as_str),
                    Some("message" | "smessage")
                ) {
                    got.push(text[2].clone());
                }
            }
            Ok(other) => panic!("unexpected {other:?}"),
            Err(e) if e.is_timeout() => break,
            Err(e) => panic!("{e}"),
        }
    }
    (result, got)
}

/// Stamps one `#[test]` per case of a suite, each calling `crate::<suite>::<case>` with
/// the deployment (an expression giving `&impl Deployment`, evaluated in each test). A
/// suite file lists its cases once, in its own `<suite>_cases!` macro that calls this one,
/// so every deployment binary runs every case by construction (tokio's `rt_test!` shape).
///
/// `own on <expr>`: each test has a deployment of its own (a fresh server), so the tests
/// run freely in parallel. `shared(<key>) on <expr>`: one deployment per binary, shared
/// by its tests: the listed cases run `#[parallel(<key>)]`, the `alone` ones, which count
/// a node's commands (other tests' commands would land on the same node),
/// `#[serial(<key>)]`, as do the binary's tests that disrupt the topology.
#[macro_export]
#[allow(
    clippy::crate_in_macro_def,
    reason = "`crate` is meant: the suites live in the calling test crate"
)]
macro_rules! cases {
    (own on $deployment:expr; $suite:ident; [$($name:ident),* $(,)?] alone [$($alone:ident),* $(,)?]) => {
        $(
            #[test]
            fn $name() {
                crate::$suite::$name($deployment)
            }
        )*
        $(
            #[test]
            fn $alone() {
                crate::$suite::$alone($deployment)
            }
        )*
    };
    (shared($key:ident) on $deployment:expr; $suite:ident; [$($name:ident),* $(,)?] alone [$($alone:ident),* $(,)?]) => {
        $(
            #[test]
            #[::serial_test::parallel($key)]
            fn $name() {
                crate::$suite::$name($deployment)
            }
        )*
        $(
            #[test]
            #[::serial_test::serial($key)]
            fn $alone() {
                crate::$suite::$alone($deployment)
            }
        )*
    };
}
