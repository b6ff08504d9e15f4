//! The locks: one safe [`Lock<K>`] over every kind, in lock_api's shape. The kinds
//! ([`Reentrant`], [`Fair`], [`Read`], [`Write`], [`Fenced`], [`Spin`],
//! [`NonReentrant`], [`NonReentrantFair`]) supply their keys and scripts through the
//! sealed raw trait; [`Lock`] holds the lock methods, the acquire loop and the release
//! sequence once. [`Composite`] holds locks made of other locks, with a policy each:
//! [`MultiLock`] (`Composite<All>`) composes locks of any kinds; [`RedLock`]
//! (`Composite<Majority>`) holds a majority of RLocks on independent servers.
//!
//! The Redisson names are aliases: `RLock = Lock<Reentrant>`, `RFairLock = Lock<Fair>`,
//! `RReadLock = Lock<Read>`, `RWriteLock = Lock<Write>`, `RFencedLock = Lock<Fenced>`,
//! `RSpinLock = Lock<Spin>`, and their guards.

mod composite;
pub(crate) mod fair;
pub(crate) mod fenced;
pub(crate) mod fenced_write;
pub(crate) mod held;
mod interruptible;
mod non_reentrant;
mod owned;
mod raw;
pub(crate) mod read_write;
mod reentrant;
mod reentry;
mod safe;
mod scoped;
mod spin;

pub use composite::{
    All, AnyLock, Composite, CompositeGuard, Majority, MultiLock, MultiLockGuard, RedLock,
    RedLockGuard,
};
pub use fair::{Fair, RFairLock, RFairLockGuard};
pub use fenced::{Fenced, RFencedLock, RFencedLockGuard};
pub use fenced_write::FencedWrite;
pub use non_reentrant::{
    NonReentrant, NonReentrantFair, RNonReentrantFairLock, RNonReentrantFairLockGuard,
    RNonReentrantLock, RNonReentrantLockGuard,
};
pub(crate) use raw::{Acquire, Adopt, Answer, Backoff, Names, Owned, Ownership, RawLock};
pub use raw::{HeldLock, LockKind};
pub use read_write::{
    RReadLock, RReadLockGuard, RReadWriteLock, RWriteLock, RWriteLockGuard, Read, Write,
};
pub use reentrant::{RLock, RLockGuard, Reentrant};
pub use reentry::{Counted, Refused};
pub use safe::{Lock, LockGuard};
pub use spin::{RSpinLock, RSpinLockGuard, Spin};
