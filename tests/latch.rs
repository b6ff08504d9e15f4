//! The latch suite (`tests/suites/latch.rs`) against a single redis-server.

#[path = "suites/latch.rs"]
mod suite;
use redmutex_harness as support;

use support::deploy::tap;
use support::raw::latch_channel;
use support::{TestServer, unique};

redmutex_harness::suite_tests!(suite on &TestServer::start() =>
    the_count_lives_in_a_string_and_zero_is_published_once,
    waiting_with_a_timeout,
    only_the_last_count_down_opens_and_it_opens_everyone,
    delete_does_not_open_waiters,
    counting_down_nothing_leaves_nothing,
);

/// A braced name is braced again in the channel (Redisson's rule; on a cluster that puts
/// the channel in another slot, see tests/cluster/shards.rs).
#[test]
fn the_channel_always_braces_the_name() {
    let d = &TestServer::start();
    let client = d.client();
    let name = format!("{{{}}}b", unique("latch"));
    let latch = client.get_count_down_latch(name.clone());
    latch.try_set_count(1).unwrap();
    let ((), got) = tap(d, &latch_channel(&name), || {
        latch.count_down().unwrap();
    });
    assert_eq!(got, ["0"]);
}
