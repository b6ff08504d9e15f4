//! redmutex in sentinel mode: the single-server suites run against the shared local
//! sentinel set (1 master, 2 replicas, 3 sentinels, started once for this binary by
//! `support::sentinel`), then what only sentinel mode has, one module each: `setup`
//! (discovery, bad input, credentials), `failover` (`SENTINEL FAILOVER` and SIGKILL of
//! the master with holders and waiters), `yaml` (Redisson's config files),
//! `replica_sync` (`WAIT` after acquires), `demotion` (no grant on a master that a
//! `SENTINEL FAILOVER` is demoting, on a private set with the server's resync delay),
//! `pool` (the pool's cap on the master).
//!
//! Tests that change the topology are `#[serial(sentinel)]` and hold a `disrupt()`
//! guard; all others are `#[parallel(sentinel)]`. Timing assertions are hang guards far
//! below the leases; measured windows are printed.

use redmutex_harness as support;

mod demotion;
mod failover;
mod pool;
mod quorum;
mod replica_sync;
mod setup;
mod yaml;

#[path = "../suites/fair_lock.rs"]
mod fair_suite;
#[path = "../suites/latch.rs"]
mod latch_suite;
#[path = "../suites/lease.rs"]
mod lease_suite;
#[path = "../suites/lock.rs"]
mod lock_suite;
#[path = "../suites/pool.rs"]
mod pool_suite;
#[path = "../suites/rwlock.rs"]
mod rwlock_suite;
#[path = "../suites/semaphore.rs"]
mod semaphore_suite;
#[path = "../suites/token_lock.rs"]
mod token_suite;
#[path = "../suites/wait.rs"]
mod wait_suite;

redmutex_harness::suite_tests!(lock_suite in lock under sentinel on crate::support::sentinel::shared() =>
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

redmutex_harness::suite_tests!(wait_suite in wait under sentinel on crate::support::sentinel::shared() =>
    threads_of_several_clients_never_overlap,
    a_waiter_wakes_on_release,
    each_release_hands_the_lock_to_one_waiter,
    channels_are_unsubscribed_when_the_last_waiter_leaves,
    many_waiters_on_distinct_names_all_subscribe_and_wake,
);

redmutex_harness::suite_tests!(token_suite in token_lock under sentinel on crate::support::sentinel::shared() =>
    threads_of_two_clients_exclude_each_other_and_keep_an_exact_counter,
    a_release_or_extend_with_a_wrong_token_changes_nothing,
    loss_is_signalled_when_the_key_is_deleted_or_retaken,
    a_redmutex_release_wakes_a_waiter_at_once_with_a_message_of_its_own,
);

redmutex_harness::suite_tests!(lease_suite in lease under sentinel on crate::support::sentinel::shared() =>
    the_watchdog_keeps_a_lock_alive,
    renewal_follows_the_hold_count,
    an_explicit_lease_expires_and_another_client_acquires,
    a_deleted_key_is_reported_lost,
    a_taken_over_lock_is_lost_and_not_renewed_for_the_new_owner,
    a_shut_down_holder_lets_the_lock_expire,
);

redmutex_harness::suite_tests!(fair_suite in fair_lock under sentinel on crate::support::sentinel::shared() =>
    reentrant_holds_are_counted_in_the_lock_hash,
    force_unlock_and_delete,
    a_short_try_leaves_nothing_behind,
    a_bounded_wait_lasts_its_time_then_leaves_the_queue,
    waiters_acquire_in_arrival_order,
    expiring_leases_pass_the_lock_in_queue_order,
    a_waiter_that_gives_up_moves_the_queue_up,
    an_expired_lease_passes_the_lock_on,
    the_watchdog_renews_a_fair_hold,
    threads_of_several_clients_never_overlap,
    a_waiter_stopped_by_shutdown_leaves_the_queue,
    giving_up_on_a_free_lock_wakes_the_next_waiter,
);

redmutex_harness::suite_tests!(latch_suite in latch under sentinel on crate::support::sentinel::shared() =>
    the_count_lives_in_a_string_and_zero_is_published_once,
    waiting_with_a_timeout,
    counting_down_nothing_leaves_nothing,
);

redmutex_harness::suite_tests!(rwlock_suite in rwlock under sentinel on crate::support::sentinel::shared() =>
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

redmutex_harness::suite_tests!(semaphore_suite in semaphore under sentinel on crate::support::sentinel::shared() =>
    permits_are_a_counter_and_changes_are_published,
    a_waiter_gets_its_permits_once_enough_were_released,
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
    counts_beyond_java_int_are_refused,
);

// These count a node's commands, so nothing else may run on the cluster meanwhile.
redmutex_harness::suite_tests!(latch_suite alone in latch_alone under sentinel on crate::support::sentinel::shared() =>
    only_the_last_count_down_opens_and_it_opens_everyone,
    delete_does_not_open_waiters,
);

redmutex_harness::suite_tests!(semaphore_suite alone in semaphore_alone under sentinel on crate::support::sentinel::shared() =>
    guards_return_their_permits,
    a_release_wakes_every_waiter_to_retry_once,
    a_small_release_serves_a_waiter_that_needs_less,
    a_multi_permit_waiter_wakes_on_single_permit_additions,
    a_multi_permit_waiter_wakes_on_single_id_releases,
    a_message_wakes_every_waiter_of_a_semaphore,
    a_message_wakes_every_waiter_of_a_permit_semaphore,
);
