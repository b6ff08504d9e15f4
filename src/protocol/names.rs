//! Redisson's rules for the names of a lock's channel and auxiliary keys.
//!
//! Redisson keeps every key and channel of one object in one cluster slot by wrapping the
//! object name in a hash tag, unless the name already carries braces (then the name is
//! used as it is and the caller's own tag decides the slot).

/// `prefix:{name}`, or `prefix:name` when the name contains `{` (Redisson `prefixName`).
pub fn prefixed(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// `{name}:suffix`, or `name:suffix` when the name contains `{` (Redisson `suffixName`).
pub(crate) fn suffixed(name: &str, suffix: &str) -> String {
    if name.contains('{') {
        format!("{name}:{suffix}")
    } else {
        format!("{{{name}}}:{suffix}")
    }
}

/// The channel an RLock's unlock message is published on.
pub fn lock_channel(name: &str) -> String {
    prefixed("redisson_lock__channel", name)
}

/// The unlock latch key of one release request.
pub(crate) fn unlock_latch(name: &str, request_id: &str) -> String {
    let mut key = prefixed("redisson_unlock_latch", name);
    key.push(':');
    key.push_str(request_id);
    key
}

/// The fair lock's waiter queue (a list of owner fields).
pub fn fair_queue(name: &str) -> String {
    prefixed("redisson_lock_queue", name)
}

/// The fair lock's waiter timeouts (a sorted set of owner fields by slot expiry).
pub fn fair_timeouts(name: &str) -> String {
    prefixed("redisson_lock_timeout", name)
}

/// The channel a fair-lock waiter listens on: its own, so an unlock wakes only it.
pub(crate) fn fair_waiter_channel(name: &str, owner: &str) -> String {
    let mut channel = lock_channel(name);
    channel.push(':');
    channel.push_str(owner);
    channel
}

/// A fenced lock's token counter (Redisson `prefixName("redisson_lock_token", name)`).
pub(crate) fn fenced_token(name: &str) -> String {
    prefixed("redisson_lock_token", name)
}

/// The read-write lock's channel, shared by its read and write halves.
pub fn rwlock_channel(name: &str) -> String {
    prefixed("redisson_rwlock", name)
}

/// The prefix of one read owner's hold-timeout keys, without the hold number:
/// `{name}:<owner>:rwlock_timeout` (Redisson `suffixName(name, owner) + ":rwlock_timeout"`).
pub fn read_timeout_prefix(name: &str, owner: &str) -> String {
    let mut key = suffixed(name, owner);
    key.push_str(":rwlock_timeout");
    key
}

/// What precedes `:<owner>:rwlock_timeout:<n>` in every read-hold timeout key of the
/// lock: `{name}`, or the bare name when it has braces (Redisson `getKeyPrefix`). The
/// read scripts build other owners' timeout keys from it.
pub fn read_key_prefix(name: &str) -> String {
    if name.contains('{') {
        name.to_owned()
    } else {
        format!("{{{name}}}")
    }
}

/// The channel of a semaphore and of a permit-expirable semaphore.
pub fn semaphore_channel(name: &str) -> String {
    prefixed("redisson_sc", name)
}

/// The sorted set of a permit-expirable semaphore's acquired permits.
pub fn permit_timeouts(name: &str) -> String {
    suffixed(name, "timeout")
}

/// The count-down latch's channel. Redisson always wraps the name in braces here, even
/// when it already has some, so this one ignores the brace rule.
pub fn latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

/// The channel on which redmutex wakes the waiters of the string-token lock with key
/// `key`. It is redmutex's own: go-redsync and redis-py publish nothing on release.
pub(crate) fn token_channel(key: &str) -> String {
    prefixed("redmutex_token_lock__channel", key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_are_wrapped_in_a_hash_tag() {
        assert_eq!(lock_channel("lock"), "redisson_lock__channel:{lock}");
        assert_eq!(
            unlock_latch("lock", "ab"),
            "redisson_unlock_latch:{lock}:ab"
        );
    }

    #[test]
    fn braced_names_keep_their_own_tag() {
        assert_eq!(lock_channel("{a}b"), "redisson_lock__channel:{a}b");
        assert_eq!(lock_channel("a{b"), "redisson_lock__channel:a{b");
        assert_eq!(lock_channel("a}b"), "redisson_lock__channel:{a}b}");
        assert_eq!(lock_channel(""), "redisson_lock__channel:{}");
    }

    #[test]
    fn auxiliary_names_follow_redisson() {
        assert_eq!(suffixed("a", "timeout"), "{a}:timeout");
        assert_eq!(suffixed("{a}b", "timeout"), "{a}b:timeout");
        assert_eq!(fair_queue("l"), "redisson_lock_queue:{l}");
        assert_eq!(fair_timeouts("{t}l"), "redisson_lock_timeout:{t}l");
        assert_eq!(
            fair_waiter_channel("l", "u:1"),
            "redisson_lock__channel:{l}:u:1"
        );
        assert_eq!(rwlock_channel("rw"), "redisson_rwlock:{rw}");
        assert_eq!(fenced_token("f"), "redisson_lock_token:{f}");
        assert_eq!(fenced_token("{t}f"), "redisson_lock_token:{t}f");
        assert_eq!(read_timeout_prefix("rw", "u:1"), "{rw}:u:1:rwlock_timeout");
        assert_eq!(
            read_timeout_prefix("{t}rw", "u:1"),
            "{t}rw:u:1:rwlock_timeout"
        );
        assert_eq!(read_key_prefix("rw"), "{rw}");
        assert_eq!(read_key_prefix("{t}rw"), "{t}rw");
        assert_eq!(semaphore_channel("s"), "redisson_sc:{s}");
        assert_eq!(token_channel("t"), "redmutex_token_lock__channel:{t}");
        assert_eq!(permit_timeouts("s"), "{s}:timeout");
        assert_eq!(latch_channel("c"), "redisson_countdownlatch__channel__{c}");
        assert_eq!(
            latch_channel("{a}b"),
            "redisson_countdownlatch__channel__{{a}b}"
        );
    }
}
