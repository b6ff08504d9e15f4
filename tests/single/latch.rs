//! The latch suite (`tests/suites/latch.rs`) against a single redis-server.

use crate::support::deploy::tap;
use crate::support::raw::latch_channel;
use crate::support::{TestServer, unique};

crate::latch_suite::latch_cases!(own on &TestServer::start());

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
