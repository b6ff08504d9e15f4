//! Failovers with holders and waiters.
