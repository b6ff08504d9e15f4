//! Discovery and bad input: the master found through the sentinels, its database, and
//! a clear error (never a hang) for an unknown master name, sentinels that are all
//! down, and a sentinel address that is a plain server.

use std::time::{Duration, Instant};

use redmutex::{Client, Config, Error};
use serial_test::parallel;

use crate::support::deploy::Deployment;
use crate::support::raw::hgetall;
use crate::support::sentinel::{MASTER_NAME, shared};
use crate::support::{TestServer, supervised, unique};

/// Far above any answer a refused or wrong address needs: the errors below must come
/// from an answer, not from a timeout.
const PROMPT: Duration = Duration::from_secs(5);

fn start(config: Config) -> (Result<Client, Error>, Duration) {
    let started = Instant::now();
    let client = Client::new(config);
    (client, started.elapsed())
}

#[test]
#[parallel(sentinel)]
fn the_lock_is_written_on_the_master_the_sentinels_name() {
    let set = shared();
    let client = set.client();
    let name = unique("s-master");
    let guard = client.get_lock(&name).lock().unwrap();
    let mut raw = set.master().conn();
    let fields = hgetall(&mut raw, &name);
    assert_eq!(fields.len(), 1, "{fields:?}");
    assert!(
        fields.keys().all(|k| k.starts_with(client.id())),
        "{fields:?}"
    );
    guard.unlock().unwrap();
}

#[test]
#[parallel(sentinel)]
fn a_later_sentinel_answers_when_the_first_is_not_there() {
    let set = shared();
    let mut urls = vec![format!("redis://127.0.0.1:{}", supervised::free_port())];
    urls.extend(set.sentinel_urls());
    let client = Client::new(
        Config::builder()
            .master_name(MASTER_NAME)
            .sentinel_addresses(urls)
            .build(),
    )
    .unwrap();
    let name = unique("s-second");
    client.get_lock(&name).lock().unwrap().unlock().unwrap();
}

#[test]
#[parallel(sentinel)]
fn the_database_setting_selects_the_data_nodes_database() {
    let set = shared();
    let client = set.client_with(|b| b.database(3));
    let name = unique("s-db");
    let guard = client.get_lock(&name).lock().unwrap();
    let mut raw = set.master().conn();
    let _: () = redis::cmd("SELECT").arg(3).query(&mut raw).unwrap();
    assert_eq!(hgetall(&mut raw, &name).len(), 1);
    let _: () = redis::cmd("SELECT").arg(0).query(&mut raw).unwrap();
    assert!(hgetall(&mut raw, &name).is_empty());
    guard.unlock().unwrap();
}

#[test]
#[parallel(sentinel)]
fn an_unknown_master_name_is_a_config_error() {
    let set = shared();
    let (client, took) = start(
        Config::builder()
            .master_name("no-such-master")
            .sentinel_addresses(set.sentinel_urls())
            .build(),
    );
    let err = client.unwrap_err();
    assert!(matches!(err, Error::Config(_)), "{err:?}");
    assert!(err.to_string().contains("no-such-master"), "{err}");
    assert!(took < PROMPT, "{took:?}");
}

#[test]
#[parallel(sentinel)]
fn sentinels_that_are_all_down_are_a_connection_error() {
    let urls: Vec<String> = (0..3)
        .map(|_| format!("redis://127.0.0.1:{}", supervised::free_port()))
        .collect();
    let (client, took) = start(
        Config::builder()
            .master_name(MASTER_NAME)
            .sentinel_addresses(urls.clone())
            .build(),
    );
    let err = client.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");
    assert!(text.contains("nothing accepts connections"), "{text}");
    for url in &urls {
        assert!(text.contains(url.trim_start_matches("redis://")), "{text}");
    }
    assert!(took < PROMPT, "{took:?}");
}

#[test]
#[parallel(sentinel)]
fn a_plain_server_as_sentinel_is_a_config_error() {
    let server = TestServer::start();
    let (client, took) = start(
        Config::builder()
            .master_name(MASTER_NAME)
            .add_sentinel_address(server.url())
            .build(),
    );
    let err = client.unwrap_err();
    assert!(matches!(err, Error::Config(_)), "{err:?}");
    assert!(err.to_string().contains("not a sentinel"), "{err}");
    assert!(took < PROMPT, "{took:?}");
}

#[test]
#[parallel(sentinel)]
fn settings_that_contradict_each_other_are_refused() {
    let set = shared();
    let bad = [
        Config::builder().master_name(MASTER_NAME).build(),
        Config::builder()
            .master_name("")
            .sentinel_addresses(set.sentinel_urls())
            .build(),
        Config::builder()
            .master_name(MASTER_NAME)
            .sentinel_addresses(set.sentinel_urls())
            .cluster_nodes(["redis://127.0.0.1:1"])
            .build(),
        Config::builder()
            .master_name(MASTER_NAME)
            .sentinel_addresses(set.sentinel_urls())
            .database(-1)
            .build(),
    ];
    for config in bad {
        let err = Client::new(config.clone()).unwrap_err();
        assert!(matches!(err, Error::Config(_)), "{config:?}: {err:?}");
    }
}

#[test]
#[parallel(sentinel)]
fn a_wrong_data_node_password_is_reported_as_such() {
    let set = shared();
    let err = Client::new(set.builder().password("not-the-password").build()).unwrap_err();
    // The shared set has no passwords: the master refuses a password it does not have.
    assert!(
        matches!(&err, Error::Auth { user, .. } if user == "default"),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("refused the login of user `default`"),
        "{text}"
    );
    assert!(
        text.contains(&format!("master \"{MASTER_NAME}\"")),
        "{text}"
    );
    assert!(
        text.contains("check the user name and the password"),
        "{text}"
    );
    assert!(!text.contains("not-the-password") && !format!("{err:?}").contains("not-the-password"));
}

/// The connections on sentinel `i` logged in as `user`.
fn sentinel_logins(i: usize, user: &str) -> usize {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut shared().sentinel_conn(i))
        .unwrap();
    list.lines()
        .filter(|l| l.split(' ').any(|kv| kv == format!("user={user}")))
        .count()
}

#[test]
#[parallel(sentinel)]
fn a_sentinel_acl_user_logs_in_to_the_sentinels_by_builder_and_by_yaml() {
    let set = shared();
    // An ACL user on every sentinel besides their passwordless `default`, which the
    // harness and the sentinels themselves keep using.
    let user = unique("sentry").replace(':', "-");
    for i in 0..set.sentinel_ports().len() {
        let _: () = redis::cmd("ACL")
            .arg(&[
                "SETUSER",
                &user,
                "on",
                ">sentry-pw-1",
                "allchannels",
                "+@all",
            ])
            .query(&mut set.sentinel_conn(i))
            .unwrap();
    }
    let with = |password: &str| {
        set.builder()
            .sentinel_username(&user)
            .sentinel_password(password)
            .build()
    };
    let client = Client::new(with("sentry-pw-1")).unwrap();
    let name = unique("s-acl");
    let guard = client.get_lock(&name).lock().unwrap();
    assert_eq!(hgetall(&mut set.master().conn(), &name).len(), 1);
    // The client's sentinel connections (the one it asked and the one it listens on
    // for +switch-master) are the ACL user's.
    let logins: usize = (0..set.sentinel_ports().len())
        .map(|i| sentinel_logins(i, &user))
        .sum();
    assert!(logins >= 1, "no sentinel connection of user {user}");
    guard.unlock().unwrap();
    client.shutdown();

    // A wrong password for that user is refused at connect, naming the user.
    let err = Client::new(with("not-it-9")).unwrap_err();
    assert!(
        matches!(&err, Error::Auth { user: u, address, .. } if *u == user && address.starts_with("sentinels ")),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains(&user) && text.contains("sentinel_password") && !text.contains("not-it-9"),
        "{text}"
    );

    // The same login from Redisson's YAML keys.
    let mut yaml = format!(
        "sentinelServersConfig:\n  masterName: \"{MASTER_NAME}\"\n  sentinelUsername: \"{user}\"\n  sentinelPassword: \"sentry-pw-1\"\n  sentinelAddresses:\n"
    );
    for url in set.sentinel_urls() {
        yaml.push_str(&format!("  - \"{url}\"\n"));
    }
    let config = Config::from_redisson_yaml_str(&yaml).unwrap();
    assert_eq!(config.sentinel_username(), Some(user.as_str()));
    let client = Client::new(config).unwrap();
    let before: usize = (0..set.sentinel_ports().len())
        .map(|i| sentinel_logins(i, &user))
        .sum();
    assert!(before >= 1, "the YAML client did not log in as {user}");
    client.get_lock(&name).lock().unwrap().unlock().unwrap();
}
