//! Leases and the watchdog: the lease suite (`tests/suites/lease.rs`) against a single
//! redis-server.

#[path = "suites/lease.rs"]
mod suite;
use redmutex_harness as support;

use support::TestServer;

redmutex_harness::suite_tests!(suite on &TestServer::start() =>
    the_watchdog_keeps_a_lock_alive,
    renewal_follows_the_hold_count,
    an_explicit_lease_expires_and_another_client_acquires,
    a_deleted_key_is_reported_lost,
    a_taken_over_lock_is_lost_and_not_renewed_for_the_new_owner,
    a_shut_down_holder_lets_the_lock_expire,
);
