//! The semaphore suite (`tests/suites/semaphore.rs`) against a single redis-server:
//! Redisson's `RSemaphore` and `RPermitExpirableSemaphore` behaviours, and the wake-up
//! rule (a release message wakes every waiter to retry once).

#[path = "suites/semaphore.rs"]
mod suite;
use redmutex_harness as support;

use support::TestServer;

redmutex_harness::suite_tests!(suite on &TestServer::start() =>
    permits_are_a_counter_and_changes_are_published,
    guards_return_their_permits,
    a_waiter_gets_its_permits_once_enough_were_released,
    a_release_wakes_every_waiter_to_retry_once,
    a_small_release_serves_a_waiter_that_needs_less,
    a_bounded_wait_runs_out,
    never_more_holders_than_permits,
    permit_ids_are_raw_bytes_on_the_wire_and_hex_for_people,
    releasing_by_id,
    releasing_many_is_all_or_nothing,
    expired_permits_are_reclaimed,
    a_waiter_wakes_when_a_leased_permit_expires,
    a_waiter_wakes_on_a_release,
    set_and_add_permits,
    lease_times_can_be_read_and_changed,
    never_more_permit_holders_than_permits,
    a_multi_permit_waiter_wakes_on_single_permit_additions,
    a_multi_permit_waiter_wakes_on_single_id_releases,
    a_message_wakes_every_waiter_of_a_semaphore,
    a_message_wakes_every_waiter_of_a_permit_semaphore,
    counts_beyond_java_int_are_refused,
);
