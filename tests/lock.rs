//! The RLock suite (`tests/suites/lock.rs`) against a single redis-server, and what is
//! particular to one server.

#[path = "suites/lock.rs"]
mod suite;
use redmutex_harness as support;

use std::time::Duration;

use redmutex::Error;
use support::{TestServer, unique};

redmutex_harness::suite_tests!(suite on &TestServer::start() =>
    lock_and_unlock_twice,
    is_locked_is_seen_by_every_thread,
    is_held_by_current_thread_only_for_the_owner,
    hold_count_follows_reentrancy,
    reentrant_holds_release_only_at_the_last_unlock,
    deep_reentrancy_is_exact,
    unlock_by_another_thread_is_not_held_and_changes_nothing,
    force_unlock_frees_the_lock,
    remain_time_to_live_reports_the_lease,
    partial_release_reapplies_the_lease,
    try_lock_for_waits_the_full_time_then_gives_up,
    an_expired_lease_lets_another_thread_in_and_reports_the_loss,
    a_detached_hold_is_released_by_rlock_unlock,
    a_string_key_is_a_wrong_type_error,
    a_foreign_hash_without_ttl_times_out_cleanly,
);

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
