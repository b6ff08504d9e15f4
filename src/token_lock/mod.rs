//! The plain string-token lock: `SET key token NX PX ttl` to acquire, a compare-and-delete
//! to release, a compare-and-`PEXPIRE` to extend. It is the protocol of go-redsync,
//! redis-py's `Lock`, node-redlock and the textbook recipe, so a [`TokenLock`] shares its
//! keys with those clients, and a [`QuorumTokenLock`] shares a set of independent servers
//! with redsync's quorum.
//!
//! `docs/token-lock.md` describes the wire format, the interop with each peer, and the
//! shortcuts this lock does not offer (and why).

use crate::lock::held;
mod options;
mod quorum;
mod single;
pub(crate) mod token;

pub use options::{ExtendMode, TokenLockOptions};
pub use quorum::{QuorumTokenLock, QuorumTokenLockGuard};
pub use single::{Token, TokenLock, TokenLockGuard};
pub use token::TokenFormat;
