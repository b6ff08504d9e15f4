//! Whether a key's contents have the shape of a lock, told from the contents alone, so
//! that `status` does not show an application's hash as a lock and `unlock --force` does
//! not delete it.
//!
//! | key | a lock when | doubtful (acted on only with `--kind`) | never a lock |
//! |---|---|---|---|
//! | hash | every field `<uuid>:<thread>` with a hold count (a read-write lock: also `mode` = `read`/`write`, its writer's field ending `:write`) | the same fields, but ids that are no UUID (Redisson's and redmutex's ids are) | any other field or value |
//! | string | an integer (semaphore, latch); 24 base64 characters of 16 bytes (redsync's and redmutex's default token); 32 hex digits (redis-py's `uuid1().hex`, redmutex's `UuidHex`); ShedLock's `ADDED:<time>@<host>[:<uuid>]` (its task locks, redmutex's `TaskLock`) | any other short printable word: a token of a custom format | empty, over 1 KiB, not UTF-8, or with spaces or control characters |
//!
//! Which lock kind a hash or an integer string is comes from its companion keys and
//! channels (`inspect.rs`); this module only says whether it can be one at all.

/// A token longer than this is no lock token anyone makes.
const MAX_TOKEN: usize = 1024;

/// What a key's contents say about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Shape<T> {
    /// The shape of a lock of this sort.
    Lock(T),
    /// Could be a lock of this sort but looks unlike the ones we know: how it looks.
    Doubtful(T, String),
    /// No lock has this shape: how it looks.
    Foreign(String),
}

/// The sorts of hash a lock can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HashLock {
    /// An RLock's hash (also a fair, fenced, spin or non-reentrant lock's).
    Owners,
    /// A read-write lock's hash, with its `mode` field.
    ReadWrite,
}

/// The sorts of string a lock-family object can be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StringLock {
    /// An integer: a semaphore's permits or a latch's count.
    Counter(i64),
    /// A string-token lock's token.
    Token(String),
}

/// The shape of a hash with `fields` (name, value), in any order.
pub(crate) fn of_hash(fields: &[(Vec<u8>, Vec<u8>)]) -> Shape<HashLock> {
    let n = fields.len();
    let many = |what: &str| {
        format!(
            "a hash of {n} field{} {what}",
            if n == 1 { "" } else { "s" }
        )
    };
    let mut text = Vec::with_capacity(n);
    for (field, value) in fields {
        match (std::str::from_utf8(field), std::str::from_utf8(value)) {
            (Ok(f), Ok(v)) => text.push((f, v)),
            _ => return Shape::Foreign(many("with binary (non-UTF-8) contents")),
        }
    }
    let mode = text.iter().find(|(f, _)| *f == "mode").map(|(_, v)| *v);
    if let Some(mode) = mode
        && mode != "read"
        && mode != "write"
    {
        return Shape::Foreign(many(&format!(
            "whose `mode` is {}, where a read-write lock's is `read` or `write`",
            quoted(mode)
        )));
    }
    let sort = if mode.is_some() {
        HashLock::ReadWrite
    } else {
        HashLock::Owners
    };
    let mut foreign_ids = 0;
    for (field, value) in text.iter().filter(|(f, _)| *f != "mode") {
        let owner = match sort {
            HashLock::ReadWrite => field.strip_suffix(":write").unwrap_or(field),
            HashLock::Owners => field,
        };
        let Some((id, thread)) = owner.rsplit_once(':') else {
            return Shape::Foreign(not_owners(&many(""), field));
        };
        if id.is_empty() || thread.is_empty() || !thread.bytes().all(|b| b.is_ascii_digit()) {
            return Shape::Foreign(not_owners(&many(""), field));
        }
        if !value.parse::<i64>().is_ok_and(|count| count > 0) {
            return Shape::Foreign(many(&format!(
                "whose field `{}` holds {}, where a lock's holds its hold count",
                clip(field),
                quoted(value)
            )));
        }
        if !is_uuid(id) {
            foreign_ids += 1;
        }
    }
    if foreign_ids > 0 {
        return Shape::Doubtful(
            sort,
            many(
                "that look like lock owners (`<id>:<thread>` with a hold count), but whose \
                 ids are no UUIDs, as Redisson's and redmutex's are",
            ),
        );
    }
    Shape::Lock(sort)
}

/// "a hash of 2 fields that are not lock owners ..., e.g. `name`".
fn not_owners(hash: &str, field: &str) -> String {
    format!(
        "{}that are not lock owners (a lock's fields are `<uuid>:<thread>` with a hold \
         count), e.g. `{}`",
        hash,
        clip(field)
    )
}

/// The shape of a string `value`.
pub(crate) fn of_string(value: &[u8]) -> Shape<StringLock> {
    let Ok(text) = std::str::from_utf8(value) else {
        return Shape::Foreign(format!(
            "a string of {} bytes that are not UTF-8, which no lock token is",
            value.len()
        ));
    };
    if let Ok(count) = text.parse::<i64>() {
        return Shape::Lock(StringLock::Counter(count));
    }
    if is_redsync_token(text) || is_hex_token(text) || is_shedlock_value(text) {
        return Shape::Lock(StringLock::Token(text.to_owned()));
    }
    let bytes = text.len();
    if text.is_empty() {
        return Shape::Foreign("an empty string, which no lock token is".to_owned());
    }
    if bytes > MAX_TOKEN {
        return Shape::Foreign(format!(
            "a string of {bytes} bytes, longer than any lock token"
        ));
    }
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Shape::Foreign(format!(
            "a string of {bytes} bytes with spaces or control characters, which no lock \
             token has"
        ));
    }
    Shape::Doubtful(
        StringLock::Token(text.to_owned()),
        format!(
            "a string of {bytes} bytes that is neither a number (a semaphore or a latch) nor \
             a lock token of a known shape (redsync's 24 base64 characters, redis-py's 32 \
             hex digits, ShedLock's ADDED:<time>@<host>)"
        ),
    )
}

/// `8-4-4-4-12` hex digits (Java's `UUID.toString()`, redmutex's client ids).
fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, len)| g.len() == len && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Standard base64 of 16 bytes: 22 characters and `==` (go-redsync's `genValue`).
fn is_redsync_token(text: &str) -> bool {
    text.len() == 24
        && text.ends_with("==")
        && text[..22]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

/// 32 hex digits (redis-py's `uuid.uuid1().hex`).
fn is_hex_token(text: &str) -> bool {
    text.len() == 32 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// ShedLock's lock value: `ADDED:` and a UTC time with milliseconds, then `@<hostname>`
/// (and `:<uuid>` from ShedLock 6.10).
fn is_shedlock_value(text: &str) -> bool {
    let Some((time, host)) = text.strip_prefix("ADDED:").and_then(|r| r.split_once('@')) else {
        return false;
    };
    time.len() == "2026-12-01T09:30:12.345Z".len()
        && time.ends_with('Z')
        && time.as_bytes().get(10) == Some(&b'T')
        && !host.is_empty()
        && !host.contains(char::is_whitespace)
}

/// `text` in backquotes, cut short when long.
fn quoted(text: &str) -> String {
    format!("`{}`", clip(text))
}

/// At most 40 characters of `text`, with `…` when cut.
fn clip(text: &str) -> String {
    const MAX: usize = 40;
    match text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(fields: &[(&str, &str)]) -> Shape<HashLock> {
        let fields: Vec<(Vec<u8>, Vec<u8>)> = fields
            .iter()
            .map(|(f, v)| (f.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect();
        of_hash(&fields)
    }

    const OWNER: &str = "0b5e7c4e-1111-4222-8333-444455556666:57";

    #[test]
    fn lock_hashes_are_owner_fields_with_counts() {
        assert_eq!(hash(&[(OWNER, "2")]), Shape::Lock(HashLock::Owners));
        let writer = format!("{OWNER}:write");
        assert_eq!(
            hash(&[("mode", "write"), (&writer, "1"), (OWNER, "1")]),
            Shape::Lock(HashLock::ReadWrite)
        );
        assert_eq!(
            hash(&[("mode", "read"), (OWNER, "3")]),
            Shape::Lock(HashLock::ReadWrite)
        );
    }

    #[test]
    fn other_hashes_are_no_locks() {
        for fields in [
            &[("name", "alice"), ("age", "3")][..],
            &[("user:1", "alice")],
            &[(OWNER, "0")],
            &[(OWNER, "many")],
            &[("mode", "fast"), (OWNER, "1")],
            &[("0b5e7c4e-1111-4222-8333-444455556666:x", "1")],
            // A writer's field outside a read-write lock is no RLock owner.
            &[("0b5e7c4e-1111-4222-8333-444455556666:5:write", "1")],
        ] {
            assert!(
                matches!(hash(fields), Shape::Foreign(_)),
                "{fields:?}: {:?}",
                hash(fields)
            );
        }
        let Shape::Foreign(says) = hash(&[("name", "alice"), ("age", "3")]) else {
            unreachable!()
        };
        assert!(
            says.starts_with("a hash of 2 fields that are not lock owners"),
            "{says}"
        );
        assert!(says.ends_with("e.g. `name`"), "{says}");
        let binary = of_hash(&[(vec![0xff, 0xfe], b"1".to_vec())]);
        assert!(matches!(binary, Shape::Foreign(_)), "{binary:?}");
    }

    #[test]
    fn owner_fields_with_other_ids_are_doubtful() {
        assert!(matches!(
            hash(&[("user:1", "5")]),
            Shape::Doubtful(HashLock::Owners, _)
        ));
    }

    #[test]
    fn strings_are_counters_tokens_or_doubtful() {
        assert_eq!(of_string(b"5"), Shape::Lock(StringLock::Counter(5)));
        assert_eq!(of_string(b"-1"), Shape::Lock(StringLock::Counter(-1)));
        for token in [
            "Zm9vYmFyYmF6cXV4MTIzNA==",
            "/////////////////////w==",
            "8c4bd2a2d0f411ee9c6b0242ac120002",
            "ADDED:2026-12-01T09:30:12.345Z@node-1:0b7f3c9e-5d2a-4c1b-9e8f-7a6b5c4d3e2f",
            "ADDED:2026-12-01T09:30:12.345Z@node-1",
        ] {
            assert_eq!(
                of_string(token.as_bytes()),
                Shape::Lock(StringLock::Token(token.to_owned()))
            );
        }
        for doubtful in ["hello", "job-17-owner", "Zm9vYmFy", "ADDED:yesterday@node"] {
            assert!(
                matches!(of_string(doubtful.as_bytes()), Shape::Doubtful(..)),
                "{doubtful}"
            );
        }
        for foreign in [
            &b""[..],
            b"hello world",
            b"{\"a\":\n1}",
            &[0xff, 0x00],
            &[b'a'; 2000],
        ] {
            assert!(
                matches!(of_string(foreign), Shape::Foreign(_)),
                "{foreign:?}"
            );
        }
    }

    #[test]
    fn long_names_are_clipped() {
        let long = "x".repeat(100);
        assert_eq!(clip(&long).chars().count(), 41);
        assert_eq!(clip("short"), "short");
    }
}
