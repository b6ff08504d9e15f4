//! The RLock suite (`tests/suites/lock.rs`) against a single redis-server, and what is
//! particular to one server.

use std::time::Duration;

use crate::support::{TestServer, unique};
use redmutex::Error;

crate::lock_suite::lock_cases!(own on &TestServer::start());

#[test]
fn bad_leases_are_config_errors() {
    let server = TestServer::start();
    let lock = server.client().get_lock(unique("l"));
    assert!(matches!(
        lock.lock_with_lease(Duration::ZERO),
        Err(Error::InvalidArgument {
            argument: "lease",
            ..
        })
    ));
    assert!(matches!(
        lock.try_lock_with_lease(Duration::ZERO, Duration::MAX),
        Err(Error::InvalidArgument {
            argument: "lease",
            ..
        })
    ));
    assert!(!lock.is_locked().unwrap());
}
