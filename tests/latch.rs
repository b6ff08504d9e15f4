//! The latch suite (`tests/suites/latch.rs`) against a single redis-server.

#[path = "suites/latch.rs"]
mod suite;
mod support;

use support::TestServer;

crate::suite_tests!(suite on &TestServer::start() =>
    the_count_lives_in_a_string_and_zero_is_published_once,
    the_channel_always_braces_the_name,
    waiting_with_a_timeout,
    only_the_last_count_down_opens_and_it_opens_everyone,
    delete_does_not_open_waiters,
    counting_down_nothing_leaves_nothing,
);
