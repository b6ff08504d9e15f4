//! What `Client::new` does at connect time, seen from outside: every connection carries
//! the client's id in its name, and each way of failing says which address it concerns
//! (never its password) and what to check.

use std::time::Duration;

use crate::support::{TestServer, unique};
use redmutex::{Client, Config, Error};

/// The names of the server's connections (`CLIENT LIST`), one per connection.
fn connection_names(raw: &mut redis::Connection) -> Vec<String> {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(raw).unwrap();
    list.lines()
        .filter_map(|line| {
            let name = line.split(' ').find_map(|kv| kv.strip_prefix("name="))?;
            Some(name.to_owned())
        })
        .collect()
}

#[test]
fn every_connection_of_a_client_is_named_after_its_id() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client();
    let name = unique("named");
    // A waiter opens the pub/sub connection; the holder's watchdog opens its own.
    let guard = client.get_lock(name.clone()).lock().unwrap();
    let other = server.client();
    let waiter = std::thread::spawn(move || {
        other
            .get_lock(name)
            .try_lock_for(Duration::from_millis(300))
            .unwrap()
            .is_none()
    });
    assert!(waiter.join().unwrap());
    let mine = format!("redmutex:{}", client.id());
    let names = connection_names(&mut raw);
    let ours = names.iter().filter(|n| **n == mine).count();
    assert!(ours >= 1, "{names:?}");
    // Only the test's own raw connection is unnamed.
    assert_eq!(
        names.iter().filter(|n| n.is_empty()).count(),
        1,
        "{names:?}"
    );
    guard.unlock().unwrap();
}

#[test]
fn a_user_without_client_setname_still_connects() {
    let server = TestServer::start();
    server.add_user("plain", "pw", &["+@all", "-client"]);
    let client = Client::open(&format!("redis://plain:pw@127.0.0.1:{}/", server.port())).unwrap();
    client
        .get_lock(unique("plain"))
        .lock()
        .unwrap()
        .unlock()
        .unwrap();
}

#[test]
fn a_refused_connection_names_the_address_and_what_to_check() {
    let err = Client::open("redis://127.0.0.1:1/").unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Connect { .. }), "{text}");
    assert!(text.contains("redis://127.0.0.1:1/"), "{text}");
    assert!(text.contains("check the host and port"), "{text}");
    assert!(text.contains("redis-server is running"), "{text}");
    assert!(!text.contains('\n'), "{text}");
}

/// A server whose `default` user needs `right-one`, and an ACL user `app` whose
/// password is `app-pw`.
fn protected_server() -> TestServer {
    let server = TestServer::start();
    drop(server.protect("app", "app-pw", "right-one"));
    server
}

/// A wrong or missing password, for `requirepass` and for an ACL user, in the address
/// or in the builder: refused by `Client::new` with `Error::Auth`, which names the
/// address and the user and never shows the password.
#[test]
fn wrong_or_missing_credentials_fail_at_connect_without_the_password() {
    let server = protected_server();
    let port = server.port();
    let at = |url: &str| Config::builder().address(url.to_owned());
    let cases = [
        (
            at(&format!("redis://:hunter2@127.0.0.1:{port}/")),
            "default",
            "check the user name and the password",
        ),
        (
            at(&format!("redis://127.0.0.1:{port}/")),
            "default",
            "no password was given",
        ),
        (
            at(&format!("redis://app:hunter2@127.0.0.1:{port}/")),
            "app",
            "check the user name and the password",
        ),
        (
            at(&format!("redis://127.0.0.1:{port}/")).username("app"),
            "app",
            "no password was given",
        ),
        (
            at(&format!("redis://127.0.0.1:{port}/"))
                .username("app")
                .password("hunter2"),
            "app",
            "check the user name and the password",
        ),
        (
            at(&format!("redis://127.0.0.1:{port}/")).password("hunter2"),
            "default",
            "check the user name and the password",
        ),
    ];
    for (builder, user, hint) in cases {
        let config = builder.build();
        let shown = format!("{config:?}");
        let err = Client::new(config).unwrap_err();
        let text = err.to_string();
        let debug = format!("{err:?}");
        assert!(
            matches!(&err, Error::Auth { user: u, .. } if u == user),
            "{shown}: {text}"
        );
        assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
        assert!(
            text.contains(&format!("refused the login of user `{user}`")),
            "{text}"
        );
        assert!(text.contains(hint), "{text}");
        assert!(
            !text.contains("hunter2") && !debug.contains("hunter2"),
            "{debug}"
        );
        assert!(!text.contains('\n'), "{text}");
    }
    // The right passwords work, for both users.
    for url in [
        format!("redis://:right-one@127.0.0.1:{port}/"),
        format!("redis://app:app-pw@127.0.0.1:{port}/"),
    ] {
        let client = Client::open(&url).unwrap();
        client
            .get_lock(unique("auth"))
            .lock()
            .unwrap()
            .unlock()
            .unwrap();
    }
}

/// `database(n)` is where the locks live on a single server (it was ignored outside
/// sentinel mode), the address's `/db` and the builder must agree, and a database the
/// server does not have is refused at connect, by name.
#[test]
fn the_database_setting_is_honoured_and_checked() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let port = server.port();
    let name = unique("db");
    let client = server.client_with(|b| b.database(3));
    assert_eq!(client.config().database(), 3);
    let guard = client.get_lock(name.clone()).lock().unwrap();
    let in_db = |raw: &mut redis::Connection, db: i64| -> bool {
        let _: () = redis::cmd("SELECT").arg(db).query(raw).unwrap();
        redis::cmd("EXISTS").arg(&name).query(raw).unwrap()
    };
    assert!(in_db(&mut raw, 3), "the lock is not in database 3");
    assert!(!in_db(&mut raw, 0), "the lock is in database 0");
    guard.unlock().unwrap();

    // The address's database and the builder's agree: fine; they differ: refused.
    let agreeing = Config::builder()
        .address(format!("redis://127.0.0.1:{port}/3"))
        .database(3)
        .build();
    assert_eq!(Client::new(agreeing).unwrap().config().database(), 3);
    let conflict = Config::builder()
        .address(format!("redis://127.0.0.1:{port}/2"))
        .database(3)
        .build();
    let err = Client::new(conflict).unwrap_err();
    assert!(matches!(err, Error::Config(_)), "{err}");
    assert!(
        err.to_string().contains("names database 2 but database(3)"),
        "{err}"
    );

    for (config, expected) in [
        (
            Config::builder()
                .address(format!("redis://127.0.0.1:{port}/"))
                .database(99)
                .build(),
            "has no database 99",
        ),
        (
            Config::builder()
                .address(format!("redis://127.0.0.1:{port}/99"))
                .build(),
            "has no database 99",
        ),
        (
            Config::builder()
                .address(format!("redis://127.0.0.1:{port}/"))
                .database(-1)
                .build(),
            "database must not be negative",
        ),
        (
            Config::builder()
                .cluster_nodes([format!("redis://127.0.0.1:{port}")])
                .database(1)
                .build(),
            "a Redis Cluster has only database 0",
        ),
        (
            Config::builder()
                .cluster_nodes([format!("redis://127.0.0.1:{port}/2")])
                .build(),
            "a Redis Cluster has only database 0",
        ),
    ] {
        let err = Client::new(config).unwrap_err();
        assert!(matches!(err, Error::Config(_)), "{err}");
        assert!(err.to_string().contains(expected), "{expected}: {err}");
    }
}

#[test]
fn a_silent_port_times_out_with_a_hint() {
    // A listener that accepts and never answers, like a TLS port spoken to in plain text.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let started = std::time::Instant::now();
    let err = Client::new(
        Config::builder()
            .address(format!("redis://127.0.0.1:{port}/"))
            .connection_timeout(Duration::from_millis(1000))
            .response_timeout(Duration::from_millis(1000))
            .build(),
    )
    .unwrap_err();
    // A figure for the record, not a claim this test makes.
    println!(
        "a silent server failed Client::new after {:?} (connection timeout 1 s)",
        started.elapsed()
    );
    drop(listener);
    let text = err.to_string();
    assert!(matches!(err, Error::Connect { .. }), "{text}");
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert!(text.contains("rediss://"), "{text}");
    assert!(
        text.contains("no answer within the connection timeout (1s)"),
        "{text}"
    );
}

/// A refused connection says "Connection refused" once: in the message, and nowhere
/// else down the chain of causes.
#[test]
fn a_refused_connection_says_so_once() {
    let err = Client::open("redis://127.0.0.1:1/").unwrap_err();
    let mut report = err.to_string();
    let mut cause = std::error::Error::source(&err);
    while let Some(c) = cause {
        report.push_str(&format!("\ncaused by: {c}"));
        cause = c.source();
    }
    assert_eq!(report.matches("onnection refused").count(), 1, "{report}");
}

#[test]
fn a_malformed_url_says_what_is_wrong() {
    let cases = [
        (
            "redis://127.0.0.1:63a9/",
            "the port `63a9`, which is not a number",
        ),
        ("127.0.0.1:6379", "has no scheme"),
        ("https://127.0.0.1/", "not Redis's"),
        ("redis://127.0.0.1/db1", "only a database number"),
        ("redis://user:s3cr#t@127.0.0.1/", "percent-encode it"),
    ];
    for (url, expected) in cases {
        let err = Client::open(url).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::Config(_)), "{url}: {text}");
        assert!(text.contains(expected), "{url}: {text}");
        assert!(!text.contains("s3cr"), "{url}: {text}");
        assert!(!text.contains("InvalidClientConfig"), "{url}: {text}");
    }
}
