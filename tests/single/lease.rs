//! Leases and the watchdog: the lease suite (`tests/suites/lease.rs`) against a single
//! redis-server.

use crate::support::TestServer;

crate::lease_suite::lease_cases!(own on &TestServer::start());
