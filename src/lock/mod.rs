//! The locks: one safe [`Lock<K>`] over every kind, in lock_api's shape. The kinds
//! ([`Reentrant`], [`Fair`], [`Read`], [`Write`]) supply their keys and scripts through
//! the sealed raw trait; [`Lock`] holds the lock methods, the acquire loop and the
//! release sequence once.
//!
//! The Redisson names are aliases: `RLock = Lock<Reentrant>`, `RFairLock = Lock<Fair>`,
//! `RReadLock = Lock<Read>`, `RWriteLock = Lock<Write>`, and their guards.

mod fair;
mod hold_state;
mod raw;
mod read_write;
mod reentrant;
mod safe;

pub use fair::{Fair, RFairLock, RFairLockGuard};
pub(crate) use hold_state::HoldState;
pub use raw::HeldLock;
pub use read_write::{
    RReadLock, RReadLockGuard, RReadWriteLock, RWriteLock, RWriteLockGuard, Read, Write,
};
pub use reentrant::{RLock, RLockGuard, Reentrant};
pub use safe::{Lock, LockGuard};
