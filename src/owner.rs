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
