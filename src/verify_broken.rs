//! Seeded bugs for the verification harness's self-test (`verify-broken-*` features).
//!
//! A checker that has never failed proves nothing, so the harness runs a build with a
//! known bug and shows that its checkers flag the history. The bug is compiled in only
//! with its test-only feature, and even then does nothing unless the process runs with
//! `REDMUTEX_VERIFY_BROKEN` naming it: an `--all-features` build (CI's) stays correct.

/// Whether the seeded bug `name` is switched on for this process.
pub(crate) fn active(name: &str) -> bool {
    std::env::var("REDMUTEX_VERIFY_BROKEN").is_ok_and(|v| v.split(',').any(|b| b.trim() == name))
}
