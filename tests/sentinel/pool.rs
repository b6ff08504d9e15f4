//! The pool's cap on the master: thousands of waiting threads stay within it.

use serial_test::serial;

use crate::pool_suite;
use crate::support::sentinel;
use crate::support::unique;

/// [`pool_suite::waiting_threads_stay_within_the_pool_cap`] on the master. Besides the
/// pool and the subscriber, it may see the watchdog's connection. Alone: 2,000 threads
/// load the machine.
#[test]
#[serial(sentinel)]
fn two_thousand_waiting_threads_stay_within_the_cap_on_the_master() {
    let set = sentinel::shared();
    pool_suite::waiting_threads_stay_within_the_pool_cap(set, &[unique("capped")], 1);
}
