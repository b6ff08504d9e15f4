//! The server the tests start is the one `REDMUTEX_SERVER` names (`scripts/matrix.sh`
//! runs every suite once per server; this says the run is on the server it claims).

use redmutex::admin::servers::Flavor;

use crate::support::{self, TestServer, supervised};

#[test]
fn the_spawned_server_is_the_one_redmutex_server_names() {
    let server = TestServer::start();
    let mut conn = server.conn();
    let field = |conn: &mut redis::Connection, f: &str| {
        supervised::info_field(conn, "server", f).unwrap_or_default()
    };
    let redis_version = field(&mut conn, "redis_version");
    let valkey_version = field(&mut conn, "valkey_version");
    println!(
        "{}: redis_version {redis_version}, valkey_version {valkey_version:?}",
        support::server_name()
    );
    match support::server().flavor {
        Flavor::Redis62 => assert!(redis_version.starts_with("6.2."), "{redis_version}"),
        Flavor::Redis82 => assert!(redis_version.starts_with("8.2."), "{redis_version}"),
        // Valkey keeps answering the Redis version it forked from.
        Flavor::Valkey81 => {
            assert!(valkey_version.starts_with("8.1."), "{valkey_version}");
            assert_eq!(redis_version, "7.2.4");
        }
        // Whatever redis-server is on PATH (Debian 12's 7.0 on the project's machines).
        Flavor::Redis70 => assert!(valkey_version.is_empty(), "{valkey_version}"),
    }
}
