//! Redisson's rules for the names of a lock's channel and auxiliary keys.
//!
//! Redisson keeps every key and channel of one object in one cluster slot by wrapping the
//! object name in a hash tag, unless the name already carries braces (then the name is
//! used as it is and the caller's own tag decides the slot).

/// `prefix:{name}`, or `prefix:name` when the name contains `{` (Redisson `prefixName`).
pub(crate) fn prefixed(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// The channel an RLock's unlock message is published on.
pub(crate) fn lock_channel(name: &str) -> String {
    prefixed("redisson_lock__channel", name)
}

/// The unlock latch key of one release request.
pub(crate) fn unlock_latch(name: &str, request_id: &str) -> String {
    let mut key = prefixed("redisson_unlock_latch", name);
    key.push(':');
    key.push_str(request_id);
    key
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
}
