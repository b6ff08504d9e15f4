//! The semaphore suite (`tests/suites/semaphore.rs`) against a single redis-server:
//! Redisson's `RSemaphore` and `RPermitExpirableSemaphore` behaviours, and the wake-up
//! rule (a release message wakes every waiter to retry once).

use crate::support::TestServer;

crate::semaphore_suite::semaphore_cases!(own on &TestServer::start());
