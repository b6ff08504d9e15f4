//! The rwlock suite (`tests/suites/rwlock.rs`) against a single redis-server.

#[path = "suites/rwlock.rs"]
mod suite;
use redmutex_harness as support;

use support::TestServer;

redmutex_harness::suite_tests!(suite on &TestServer::start() =>
    read_holds_have_timeout_keys_and_write_holds_a_write_field,
    unlock_messages_follow_redisson,
    hold_counts_and_queries,
    a_writer_may_take_the_read_lock,
    downgrade_keeps_read_mode_and_forbids_upgrade,
    a_write_unlock_wakes_every_waiting_reader,
    a_writer_waits_for_every_reader,
    force_unlock_clears_only_its_own_mode,
    write_reentry_adds_to_the_ttl,
    readers_share_the_lock,
    an_expired_write_lease_passes_the_lock_on,
    a_writer_waits_for_the_longest_read_lease,
    a_leaving_reader_shrinks_the_ttl_to_the_remaining_readers,
    a_dead_clients_reader_stops_blocking_after_its_timeout,
    the_watchdog_renews_read_and_write_holds,
    a_vanished_read_hold_is_reported_lost,
    an_abandoned_write_lock_expires,
    braced_names_keep_their_tag,
    readers_and_writers_of_several_clients_exclude_correctly,
);
