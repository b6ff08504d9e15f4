//! Redisson's own YAML files: the file the Java peers load (the harness writes it for
//! this set) configures a working redmutex client; placeholders resolve from the
//! environment; bad files are `Error::Config` naming the key.

use redmutex::{Client, Config, Error};
use serial_test::parallel;

use crate::support::raw::hgetall;
use crate::support::sentinel::{MASTER_NAME, shared};
use crate::support::unique;

#[test]
#[parallel(sentinel)]
fn the_file_the_java_peers_load_configures_a_working_client() {
    let set = shared();
    let path = set.redisson_yaml();
    let config = Config::from_redisson_yaml_file(&path).unwrap();
    assert_eq!(config.master_name(), Some(MASTER_NAME));
    assert_eq!(config.sentinel_addresses(), set.sentinel_urls().as_slice());
    let client = Client::new(config).unwrap();
    let name = unique("s-yaml");
    let guard = client.get_lock(&name).lock().unwrap();
    assert_eq!(hgetall(&mut set.master().conn(), &name).len(), 1);
    guard.unlock().unwrap();
}

#[test]
#[parallel(sentinel)]
fn placeholders_take_the_environment_or_their_default() {
    let set = shared();
    let var = format!("REDMUTEX_TEST_MASTER_{}", std::process::id());
    // SAFETY: no other thread of this binary reads or writes this variable.
    unsafe { std::env::set_var(&var, MASTER_NAME) };
    let mut text = format!(
        "sentinelServersConfig:\n  masterName: \"${{{var}}}\"\n  database: ${{REDMUTEX_UNSET_DB:-4}}\n  sentinelAddresses:\n"
    );
    for url in set.sentinel_urls() {
        text.push_str(&format!("  - \"{url}\"\n"));
    }
    let config = Config::from_redisson_yaml_str(&text).unwrap();
    assert_eq!(config.master_name(), Some(MASTER_NAME));
    assert_eq!(config.database(), 4);
    let client = Client::new(config).unwrap();
    let name = unique("s-env");
    client.get_lock(&name).lock().unwrap().unlock().unwrap();
}

#[test]
#[parallel(sentinel)]
fn a_file_without_sentinels_or_with_a_wrong_type_names_the_key() {
    let dir = std::env::temp_dir().join(unique("redmutex-yaml"));
    std::fs::create_dir_all(&dir).unwrap();
    for (text, key) in [
        (
            "sentinelServersConfig:\n  masterName: mymaster\n",
            "sentinelServersConfig.sentinelAddresses",
        ),
        (
            "sentinelServersConfig:\n  masterName: mymaster\n  sentinelAddresses: [redis://127.0.0.1:1]\n  database: zero\n",
            "sentinelServersConfig.database",
        ),
        (
            "sentinelServersConfig:\n  masterName: [a]\n  sentinelAddresses: [redis://127.0.0.1:1]\n",
            "sentinelServersConfig.masterName",
        ),
    ] {
        let path = dir.join("redisson.yaml");
        std::fs::write(&path, text).unwrap();
        match Config::from_redisson_yaml_file(&path) {
            Err(Error::Config(msg)) => assert!(msg.contains(key), "{key}: {msg}"),
            other => panic!("{text}: {other:?}"),
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
