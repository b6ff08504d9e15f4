//! What `Client::new` does at connect time, seen from outside: every connection carries
//! the client's id in its name, and each way of failing says which address it concerns
//! (never its password) and what to check.

mod support;

use std::time::Duration;

use redmutex::{Client, Config, Error};
use support::{TestServer, unique};

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
    let mut raw = server.conn();
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER", "plain", "on", ">pw", "~*", "&*", "+@all", "-client",
        ])
        .query(&mut raw)
        .unwrap();
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

#[test]
fn wrong_credentials_say_so_without_the_password() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "requirepass", "right-one"])
        .query(&mut raw)
        .unwrap();
    let url = format!("redis://:hunter2@127.0.0.1:{}/", server.port());
    let err = Client::open(&url).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Connect { .. }), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    assert!(
        text.contains(&format!(":***@127.0.0.1:{}", server.port())),
        "{text}"
    );
    assert!(text.contains("check the user name and password"), "{text}");
}

#[test]
fn a_silent_port_times_out_with_a_hint() {
    // A listener that accepts and never answers, like a TLS port spoken to in plain text.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let err = Client::new(
        Config::builder()
            .address(format!("redis://127.0.0.1:{port}/"))
            .connection_timeout(Duration::from_millis(300))
            .response_timeout(Duration::from_millis(300))
            .build(),
    )
    .unwrap_err();
    drop(listener);
    let text = err.to_string();
    assert!(matches!(err, Error::Connect { .. }), "{text}");
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert!(text.contains("rediss://"), "{text}");
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
