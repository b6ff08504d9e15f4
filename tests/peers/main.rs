//! The string-token lock against its real peers on the same keys: go-redsync v4 over
//! go-redis v9 (`tests/interop/go`) and redis-py's `Lock` (`tests/interop/python`), built
//! on first use; `string_peers` drives the peers alone, `string_lock_interop` mixes them
//! with redmutex. Needs the `interop` feature (see `tests/interop`).

use redmutex_harness as support;

#[cfg(feature = "cli")] // its holders are `redmutex hold` processes
mod string_lock_interop;
mod string_peers;
