//! The rwlock suite (`tests/suites/rwlock.rs`) against a single redis-server.

use crate::support::TestServer;

crate::rwlock_suite::rwlock_cases!(own on &TestServer::start());
