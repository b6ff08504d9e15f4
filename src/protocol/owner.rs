//! Who holds a lock: the client's UUID and a per-thread number.
//!
//! Redisson writes `<client-uuid>:<java-thread-id>` into the lock hash. Rust's `ThreadId`
//! has no stable number, so each thread draws one from a process-wide counter the first
//! time it touches a lock. Numbers are never reused within the process, so a thread that
//! exits cannot hand its holds to a newer thread.

use std::sync::atomic::{AtomicU64, Ordering};

static NEXT: AtomicU64 = AtomicU64::new(1);

thread_local! {
    // Relaxed is enough: the counter only has to hand out distinct values.
    static NUMBER: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
}

/// The current thread's lock-owner number, unique within this process.
pub(crate) fn thread_number() -> u64 {
    NUMBER.with(|n| *n)
}

/// An owner of holds that is not tied to the thread that calls: Redisson's explicit
/// `threadId` (`lock(leaseTime, unit, threadId)`, `unlockAsync(threadId)`), for a thread
/// pool whose unlocking thread is not the locking one.
///
/// Every hold has an owner, written into the lock's hash as `<client-id>:<number>`. The
/// ordinary methods ([`Lock::lock`](crate::Lock::lock) and the rest) use the calling
/// thread's own number, which is what almost every caller wants. The `*_as` methods
/// ([`Lock::lock_as`](crate::Lock::lock_as), [`Lock::unlock_as`](crate::Lock::unlock_as),
/// …) take an `Owner` instead: whichever thread passes the same owner acts for the same
/// holder, and a thread without it is refused as any other non-owner is
/// ([`Error::NotHeld`](crate::Error::NotHeld)).
///
/// An `Owner` is a number and copies freely; keep it with the work it locked for (a
/// job's state), and pass it to the unlock.
///
/// ```no_run
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client.get_lock("job:17");
/// let owner = redmutex::Owner::unique();
/// lock.lock_as(owner)?;
/// std::thread::spawn(move || {
///     // ... the job runs on another thread, which unlocks for the same owner ...
///     lock.unlock_as(owner)
/// })
/// .join()
/// .unwrap()?;
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Owner(u64);

impl Owner {
    /// A new owner, distinct from every thread of this process and from every other
    /// `Owner::unique()`: numbers come from the counter that numbers threads.
    pub fn unique() -> Self {
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    /// The calling thread as an owner: its holds are the ones the ordinary methods take.
    pub fn current_thread() -> Self {
        Self(thread_number())
    }

    /// The owner with number `id` (Redisson's `threadId`): the hash field is
    /// `<client-id>:<id>`. The same number is the same owner, whoever uses it; choosing
    /// numbers that no thread of this process has (threads are numbered from 1 up, see
    /// [`unique`](Self::unique)) is the caller's part.
    pub const fn from_id(id: u64) -> Self {
        Self(id)
    }

    /// The owner's number, the part after the client id in the hash field.
    pub const fn id(self) -> u64 {
        self.0
    }
}

/// The hash field that marks `thread` of client `client_id` as a holder.
pub(crate) fn field(client_id: &str, thread: u64) -> String {
    format!("{client_id}:{thread}")
}

/// The field of a write hold of a read-write lock: the thread's field plus `:write`
/// (Redisson `RedissonWriteLock.getLockName`).
pub(crate) fn write_field(client_id: &str, thread: u64) -> String {
    write_field_of(&field(client_id, thread))
}

/// The write field of the thread whose read field is `read_field`.
pub(crate) fn write_field_of(read_field: &str) -> String {
    format!("{read_field}:write")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_get_distinct_stable_numbers() {
        let here = thread_number();
        assert_eq!(here, thread_number());
        let there = std::thread::spawn(thread_number).join().unwrap();
        assert_ne!(here, there);
        assert_eq!(field("u", 7), "u:7");
        assert_eq!(write_field("u", 7), "u:7:write");
    }
}
