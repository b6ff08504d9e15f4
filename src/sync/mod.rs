//! The synchronisers that are not locks: [`RSemaphore`](crate::RSemaphore),
//! [`RPermitExpirableSemaphore`](crate::RPermitExpirableSemaphore) and
//! [`RCountDownLatch`](crate::RCountDownLatch), on the named-object base they share with
//! each other, and the expiry commands ([`RExpirable`](crate::RExpirable)) that locks
//! offer too.

pub(crate) mod expiry;
pub(crate) mod latch;
pub(crate) mod object;
pub(crate) mod permit_semaphore;
pub(crate) mod semaphore;
