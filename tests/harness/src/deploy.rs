//! One test body, run against several deployments: a [`TestServer`] and the shared
//! local [`Cluster`] and the local [`SentinelSet`]. The suites in `tests/suites/` are written against
//! [`Deployment`]; each test binary instantiates them with [`suite_tests!`].

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
        true
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

/// Declares one `#[test]` per named body of a suite module, run against `deployment`
/// (an expression giving `&impl Deployment`; it is evaluated in each test). The form
/// with `in <module>` puts the tests in a module of that name, so one binary can run
/// several suites against the shared cluster, `#[parallel(cluster)]`; the form with
/// `alone in <module>` runs them `#[serial(cluster)]`, for bodies that count a node's
/// commands (other tests' commands would land on the same node). `under <key>` names
/// the serial_test key instead of `cluster` (the sentinel binary uses `sentinel`).
#[macro_export]
macro_rules! suite_tests {
    ($suite:ident in $module:ident under $key:ident on $deployment:expr => $($name:ident),* $(,)?) => {
        mod $module {
            $(
                #[test]
                #[::serial_test::parallel($key)]
                fn $name() {
                    super::$suite::$name($deployment)
                }
            )*
        }
    };
    ($suite:ident alone in $module:ident under $key:ident on $deployment:expr => $($name:ident),* $(,)?) => {
        mod $module {
            $(
                #[test]
                #[::serial_test::serial($key)]
                fn $name() {
                    super::$suite::$name($deployment)
                }
            )*
        }
    };
    ($suite:ident on $deployment:expr => $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $suite::$name($deployment)
            }
        )*
    };
    ($suite:ident in $module:ident on $deployment:expr => $($name:ident),* $(,)?) => {
        mod $module {
            $(
                #[test]
                #[::serial_test::parallel(cluster)]
                fn $name() {
                    super::$suite::$name($deployment)
                }
            )*
        }
    };
    ($suite:ident alone in $module:ident on $deployment:expr => $($name:ident),* $(,)?) => {
        mod $module {
            $(
                #[test]
                #[::serial_test::serial(cluster)]
                fn $name() {
                    super::$suite::$name($deployment)
                }
            )*
        }
    };
}
