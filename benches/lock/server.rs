//! The run's `redis-server`, started by the spawner the tool and the tests use, with the
//! connections and clients the scenarios open on it.

use redmutex::{Client, Config};

use redmutex_harness::server::RedisServer;

/// The one server every scenario of a run uses, and its address.
pub(crate) struct Server {
    redis: RedisServer,
    pub(crate) url: String,
}

impl Server {
    pub(crate) fn start() -> Self {
        let redis = RedisServer::start(&[]).unwrap_or_else(|e| panic!("{e}"));
        eprintln!(
            "redis-server pid {} at {} ({})",
            redis.pid(),
            redis.url(),
            redmutex_harness::server_name()
        );
        Self {
            url: redis.url(),
            redis,
        }
    }

    pub(crate) fn port(&self) -> u16 {
        self.redis.port()
    }

    pub(crate) fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url.as_str())
            .unwrap()
            .get_connection()
            .unwrap()
    }

    pub(crate) fn client(&self) -> Client {
        Self::client_for(&self.url)
    }

    /// A client with the default settings on the server at `url`.
    pub(crate) fn client_for(url: &str) -> Client {
        Client::new(Config::builder().address(url).build()).unwrap()
    }
}
