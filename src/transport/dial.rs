//! Plain `redis` clients for the nodes of a [`Config`], for tools that read and change
//! keys themselves instead of through a [`Client`](crate::Client) (the `redmutex`
//! binary): the same addresses, TLS settings and logins the client would use, without
//! a second parser of addresses and credentials.

use redis::ProtocolVersion;

use super::connector::Endpoint;
use crate::config::Config;
use crate::error::{Error, Result};

impl Config {
    /// Plain `redis` clients for the addresses a client starts from, each with the
    /// node's `host:port`: the single server, the cluster's seed nodes, or the
    /// sentinels (with the sentinels' own login), in the order configured.
    ///
    /// Each client speaks RESP2 and carries the TLS mode, root certificate and login the
    /// client would use for that address; its `Debug` output hides the password.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for an address that does not parse, naming it and what is
    /// wrong with it.
    pub fn seed_clients(&self) -> Result<Vec<(String, redis::Client)>> {
        let endpoints: Vec<Endpoint> = if self.is_sentinel() {
            self.sentinel
                .sentinel_addresses
                .iter()
                .map(|url| {
                    Endpoint::parse(url, self).map(|e| {
                        e.with_credentials(
                            self.sentinel.sentinel_username.as_deref(),
                            self.sentinel.sentinel_password.as_deref(),
                        )
                    })
                })
                .collect::<Result<_>>()?
        } else if self.is_cluster() {
            self.cluster
                .node_addresses
                .iter()
                .map(|url| Endpoint::from_url(url, self))
                .collect::<Result<_>>()?
        } else {
            vec![Endpoint::from_url(&self.address, self)?]
        };
        endpoints
            .into_iter()
            .map(|e| Ok((e.addr(), e.client(ProtocolVersion::RESP2)?)))
            .collect()
    }

    /// A plain `redis` client for the data node at `host_port`, as `CLUSTER SLOTS` or a
    /// sentinel names it: the login, TLS mode, root certificate and database of this
    /// deployment's data nodes (in sentinel mode, [`username`](Self::username), the
    /// password and [`database`](Self::database), never the sentinels' login).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for a `host_port` without a numeric port, or a configured
    /// address that does not parse.
    pub fn node_client(&self, host_port: &str) -> Result<redis::Client> {
        let template = if self.is_sentinel() {
            let first = self
                .sentinel
                .sentinel_addresses
                .first()
                .ok_or_else(|| Error::Config("no sentinel addresses".into()))?;
            Endpoint::parse(first, self)?.with_login(
                self.username.as_deref(),
                self.password.as_deref(),
                self.database(),
            )
        } else if let Some(first) = self.cluster.node_addresses.first() {
            Endpoint::from_url(first, self)?
        } else {
            Endpoint::from_url(&self.address, self)?
        };
        template.at(host_port)?.client(ProtocolVersion::RESP2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_are_the_mode_s_starting_addresses() {
        let single = Config::builder()
            .address("redis://u:secret@127.0.0.1:6390/2")
            .build();
        let seeds = single.seed_clients().unwrap();
        assert_eq!(seeds.len(), 1);
        assert_eq!(seeds[0].0, "127.0.0.1:6390");
        assert_eq!(seeds[0].1.get_connection_info().redis_settings().db(), 2);
        assert!(!format!("{:?}", seeds[0].1).contains("secret"));

        let sentinel = Config::builder()
            .master_name("m")
            .sentinel_addresses(["redis://127.0.0.1:26379", "redis://127.0.0.1:26380"])
            .sentinel_password("sp")
            .password("dp")
            .database(3)
            .build();
        let seeds = sentinel.seed_clients().unwrap();
        let addrs: Vec<&str> = seeds.iter().map(|(a, _)| a.as_str()).collect();
        assert_eq!(addrs, ["127.0.0.1:26379", "127.0.0.1:26380"]);
        assert_eq!(
            seeds[0].1.get_connection_info().redis_settings().password(),
            Some("sp")
        );
        let master = sentinel.node_client("127.0.0.1:6400").unwrap();
        let info = master.get_connection_info();
        assert_eq!(info.redis_settings().password(), Some("dp"));
        assert_eq!(info.redis_settings().db(), 3);
        assert_eq!(info.addr().to_string(), "127.0.0.1:6400");

        let cluster = Config::builder()
            .cluster_nodes(["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"])
            .build();
        assert_eq!(cluster.seed_clients().unwrap().len(), 2);
        assert!(cluster.node_client("no-port").is_err());
    }
}
