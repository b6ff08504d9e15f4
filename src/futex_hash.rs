//! Room in the kernel's futex hash for thousands of parked threads (Linux 6.16 and later).
//!
//! Every thread blocked in `lock()` sleeps on a futex, and so does every thread queued
//! for a pooled connection. Since Linux 6.16 a multi-threaded process gets a futex hash
//! of its own, sized for its CPUs rather than its threads: 4 slots per online CPU, at
//! least 16, however many threads it starts. Each wake-up and each sleep walks the list
//! of its slot under that slot's spinlock, so with 10,000 parked threads on a 2-CPU
//! machine a wake-up walks about 625 entries, and the walks of two cores contend for
//! the same 16 locks. In the bench's burst (10,000 threads starting `lock()` at once
//! while established waiters are woken) a quarter of all CPU samples were spent in
//! `futex_wake` alone, and the woken waiters' hand-offs took 10-30 ms at the worst; with
//! one slot per thread they took 4-8 ms (see `docs/benchmarks.md`).
//!
//! The size is the process's, not this library's, so nothing here changes it unless the
//! application asks: `grow_for` once at start-up (or `set_slots`) in a program that
//! parks thousands of threads. A slot costs the kernel about 64 bytes. What the library
//! does by itself is tell: the first time 1,024 or more of the process's threads wait
//! in redmutex calls at once while the hash has fewer than one slot per 4 of them, it
//! logs one warning that names the call.
//!
//! Reading and sizing the hash takes a `prctl` call, the only `unsafe` code in the
//! crate, so it comes with the `futex-hash` feature (off by default): without it the
//! library is `#![forbid(unsafe_code)]`, has no `slots`, `set_slots` or `grow_for`, and
//! the warning, which then cannot read the size, goes out once on any Linux 6.16 or
//! later, naming the feature.

#[cfg(feature = "futex-hash")]
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The most slots [`grow_for`] asks for (65,536, about 4 MiB of kernel memory).
#[cfg(feature = "futex-hash")]
pub const MAX_GROWN_SLOTS: usize = 1 << 16;

/// `prctl` options of Linux 6.16's process futex hash (`PR_FUTEX_HASH`).
#[cfg(all(feature = "futex-hash", target_os = "linux"))]
#[allow(unsafe_code)]
mod sys {
    use std::ffi::{c_int, c_ulong};

    pub(super) const PR_FUTEX_HASH: c_int = 78;
    pub(super) const SET_SLOTS: c_ulong = 1;
    pub(super) const GET_SLOTS: c_ulong = 2;

    unsafe extern "C" {
        pub(super) fn prctl(option: c_int, ...) -> c_int;
    }
}

#[cfg(feature = "futex-hash")]
/// This process's futex hash slots: `Some(n)` for a private hash of `n` slots,
/// `Some(0)` while the process uses the kernel's global hash (before its second thread
/// starts, or after [`set_slots`]`(0)`), `None` where the kernel has no per-process hash
/// (Linux before 6.16, other systems).
///
/// # Errors
///
/// An unexpected `prctl` failure, as the OS reported it.
pub fn slots() -> io::Result<Option<usize>> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_FUTEX_HASH_GET_SLOTS reads a number; the unused arguments are
        // passed as zero `unsigned long`s, as the variadic prototype expects.
        #[allow(unsafe_code)]
        let got = unsafe { sys::prctl(sys::PR_FUTEX_HASH, sys::GET_SLOTS, 0 as std::ffi::c_ulong) };
        if got >= 0 {
            return Ok(usize::try_from(got).ok());
        }
        unsupported_or(io::Error::last_os_error())
    }
    #[cfg(not(target_os = "linux"))]
    Ok(None)
}

#[cfg(feature = "futex-hash")]
/// Gives this process a private futex hash of `slots` slots (a power of two, at least
/// 2), or the kernel's global hash (`0`). Returns false where the kernel has no
/// per-process hash (Linux before 6.16, other systems): nothing to size there.
///
/// Growing and shrinking a private hash may be repeated. The global hash is final: once
/// a process has switched to it, the kernel refuses every later size with `EBUSY`.
///
/// Threads sleeping meanwhile are moved to the new hash by the kernel; nothing is lost.
///
/// # Errors
///
/// [`io::ErrorKind::InvalidInput`] for a size that is not `0` or a power of two of at
/// least 2 (nothing is changed); the OS error when the kernel refuses:
/// [`io::ErrorKind::ResourceBusy`] after a switch to the global hash, `OutOfMemory`.
pub fn set_slots(slots: usize) -> io::Result<bool> {
    if slots != 0 && (slots < 2 || !slots.is_power_of_two()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("futex hash slots must be 0 or a power of two of at least 2, not {slots}"),
        ));
    }
    #[cfg(target_os = "linux")]
    {
        let Ok(n) = std::ffi::c_ulong::try_from(slots) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{slots} futex hash slots do not fit an unsigned long"),
            ));
        };
        // SAFETY: PR_FUTEX_HASH_SET_SLOTS takes the slot count and a flags word (zero:
        // a resizable hash), both `unsigned long`s; it touches no memory of ours.
        #[allow(unsafe_code)]
        let done = unsafe {
            sys::prctl(
                sys::PR_FUTEX_HASH,
                sys::SET_SLOTS,
                n,
                0 as std::ffi::c_ulong,
            )
        };
        if done == 0 {
            return Ok(true);
        }
        unsupported_or(io::Error::last_os_error()).map(|_| false)
    }
    #[cfg(not(target_os = "linux"))]
    Ok(false)
}

#[cfg(feature = "futex-hash")]
/// Makes room for `parked_threads` sleeping threads: one slot per thread, rounded up to
/// a power of two, at least 16 and at most [`MAX_GROWN_SLOTS`]. A private hash that is
/// already that large is left alone; a smaller one, or the global hash, is replaced
/// (the size then stays when more threads start: the kernel only sizes hashes nobody
/// chose). Returns the slots in use afterwards, or `None` where the kernel has no
/// per-process hash.
///
/// Call it once, early, in a program that parks thousands of threads at a time (one
/// per waiting `lock()`); see the module docs for why.
///
/// ```
/// // Room for up to 10,000 threads waiting at once.
/// match redmutex::futex_hash::grow_for(10_000) {
///     Ok(Some(slots)) => assert!(slots >= 16_384),
///     Ok(None) => {} // No per-process hash on this system: nothing to size.
///     Err(e) => eprintln!("futex hash left at the kernel's size: {e}"),
/// }
/// ```
///
/// # Errors
///
/// As [`set_slots`]; [`io::ErrorKind::ResourceBusy`] in a process that chose the global
/// hash ([`set_slots`]`(0)`).
pub fn grow_for(parked_threads: usize) -> io::Result<Option<usize>> {
    let wanted = parked_threads
        .clamp(16, MAX_GROWN_SLOTS)
        .next_power_of_two();
    match slots()? {
        None => Ok(None),
        Some(have) if have >= wanted => Ok(Some(have)),
        Some(_) => {
            if !set_slots(wanted)? {
                return Ok(None);
            }
            slots()
        }
    }
}

/// `Ok(None)` when `err` says the kernel does not know `PR_FUTEX_HASH` (`EINVAL` from a
/// kernel before 6.16), else `err`.
#[cfg(all(feature = "futex-hash", target_os = "linux"))]
fn unsupported_or(err: io::Error) -> io::Result<Option<usize>> {
    if err.kind() == io::ErrorKind::InvalidInput {
        Ok(None)
    } else {
        Err(err)
    }
}

/// Threads of this process waiting in a redmutex call now, every client counted.
static PARKED: AtomicUsize = AtomicUsize::new(0);
/// The warning was logged (it is logged once per process).
static WARNED: AtomicBool = AtomicBool::new(false);
/// Waiting threads from which the hash's size is worth a look.
const WARN_FROM: usize = 1_024;

/// One thread waiting in a redmutex call, for the warning in the module docs.
pub(crate) struct Parked(());

impl Parked {
    /// Counts the calling thread as waiting until the value is dropped. Costs two
    /// atomic additions; the hash is read (one system call) only when the count reaches
    /// a power of two from [`WARN_FROM`] on, and never after the warning.
    pub(crate) fn begin() -> Self {
        // Relaxed: the count only decides when to look at the hash, and a look that
        // comes a few waiters early or late warns just the same.
        let now = PARKED.fetch_add(1, Ordering::Relaxed) + 1;
        if now >= WARN_FROM && now.is_power_of_two() && !WARNED.load(Ordering::Relaxed) {
            warn_if_small(now);
        }
        Self(())
    }
}

impl Drop for Parked {
    fn drop(&mut self) {
        PARKED.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Logs the warning once if the private hash has fewer than one slot per 4 of `parked`
/// sleepers. The global hash's size is not known here, so it draws no warning.
#[cfg(feature = "futex-hash")]
fn warn_if_small(parked: usize) {
    let Ok(Some(slots)) = slots() else {
        return;
    };
    if slots == 0 || slots.saturating_mul(4) >= parked || WARNED.swap(true, Ordering::Relaxed) {
        return;
    }
    log::warn!(
        "redmutex: {parked} threads of this process wait on locks and its futex hash has \
         {slots} slots, so every wake-up walks about {} sleepers; call \
         redmutex::futex_hash::grow_for({}) once at start-up (see the futex_hash docs)",
        parked / slots,
        parked.next_power_of_two()
    );
}

/// Without the `futex-hash` feature the hash cannot be read (that takes a `prctl` call,
/// which needs `unsafe`), so the warning goes out once on a kernel that sizes hashes per
/// process (Linux 6.16 and later, read from `/proc` without a system call of our own),
/// saying how to find out.
#[cfg(not(feature = "futex-hash"))]
fn warn_if_small(parked: usize) {
    let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
        return;
    };
    if !sizes_per_process(&release) || WARNED.swap(true, Ordering::Relaxed) {
        return;
    }
    log::warn!(
        "redmutex: {parked} threads of this process wait on locks, and on Linux {} the \
         process's futex hash is sized for its CPUs, not its threads; build redmutex with \
         the `futex-hash` feature and call redmutex::futex_hash::grow_for({}) once at \
         start-up (see the futex_hash docs)",
        release.trim(),
        parked.next_power_of_two()
    );
}

/// Whether a kernel release string (`6.16.3-arch1`) is Linux 6.16 or later.
#[cfg(not(feature = "futex-hash"))]
fn sizes_per_process(release: &str) -> bool {
    let mut parts = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= (6, 16),
        _ => false,
    }
}

#[cfg(all(test, not(feature = "futex-hash")))]
mod tests {
    use super::sizes_per_process;

    #[test]
    fn kernels_from_6_16_size_the_hash_per_process() {
        for (release, per_process) in [
            ("6.16.0", true),
            ("6.17.2-arch1-1\n", true),
            ("7.0", true),
            ("6.15.9-generic", false),
            ("5.10.0-28-amd64", false),
            ("6", false),
            ("", false),
        ] {
            assert_eq!(sizes_per_process(release), per_process, "{release:?}");
        }
    }
}
