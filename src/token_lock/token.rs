//! Lock tokens: the value a holder writes into the key, and the only thing that lets it
//! release or extend the lock.

use std::fmt;
use std::sync::Arc;

use redis::{Connection, RedisResult};

use crate::error::{Error, Result};
use crate::protocol::replies::UNLOCK_MESSAGE;
use crate::protocol::script::{Call, invoke};
use crate::random;

/// How a token lock makes the token it writes into the key.
///
/// The token is what makes a release safe: the release deletes the key only while it
/// still holds the releaser's token, so it must be unique per acquisition and hard to
/// guess. The peers do not read each other's tokens; the format only matters to tools
/// that inspect the keys, or to code that must recognise its own values.
///
/// # Examples
///
/// ```
/// use redmutex::{TokenFormat, TokenLockOptions};
///
/// // redis-py's shape (32 hex digits), or the caller's own values.
/// let py = TokenLockOptions::new().token_format(TokenFormat::UuidHex);
/// let own = TokenLockOptions::new().token_format(TokenFormat::custom(|| {
///     format!("worker-7:{}", std::process::id())
/// }));
/// # let _ = (py, own);
/// # Ok::<(), redmutex::Error>(())
/// ```
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum TokenFormat {
    /// 16 bytes from the operating system's random source, in standard base64 with
    /// padding (24 characters ending in `==`): go-redsync's default value. The default.
    #[default]
    Random,
    /// 32 lowercase hex digits, the shape of redis-py's `uuid.uuid1().hex`. redis-py's
    /// uuid1 is made of the time and the host's address; this one is a random (v4) UUID,
    /// which has the same shape and cannot be guessed.
    UuidHex,
    /// The caller's own values: the function is called once per acquisition (as
    /// redsync's `WithGenValueFunc`). It must not return an empty string, and should not
    /// return the same value twice, or one holder could release another's lock.
    Custom(Arc<dyn Fn() -> String + Send + Sync>),
}

impl TokenFormat {
    /// A [`TokenFormat::Custom`] from a function.
    pub fn custom(make: impl Fn() -> String + Send + Sync + 'static) -> Self {
        Self::Custom(Arc::new(make))
    }

    /// A fresh token.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the OS random source fails; [`Error::Config`] when a custom
    /// function returns an empty token.
    pub(crate) fn make(&self) -> Result<String> {
        match self {
            Self::Random => {
                let mut bytes = [0u8; 16];
                random::fill(&mut bytes)?;
                Ok(base64(&bytes))
            }
            Self::UuidHex => Ok(uuid::Uuid::new_v4().simple().to_string()),
            Self::Custom(make) => {
                let token = make();
                if token.is_empty() {
                    return Err(Error::Config(
                        "a custom lock token must not be empty".into(),
                    ));
                }
                Ok(token)
            }
        }
    }
}

impl fmt::Debug for TokenFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Random => f.write_str("Random"),
            Self::UuidHex => f.write_str("UuidHex"),
            Self::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// Standard base64 with padding (RFC 4648 §4), as Go's `base64.StdEncoding`.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

// ---- Redis scripts ------------------------------------------------------------

crate::protocol::script::scripts! {
    TOKEN_ACQUIRE => "token/token_acquire.lua",
    TOKEN_RELEASE => "token/token_release.lua",
    TOKEN_EXTEND => "token/token_extend.lua",
}

/// redmutex's wake-up message on a token lock's channel: wakes one waiter.
pub(crate) const TOKEN_WAKE_MESSAGE: &str = UNLOCK_MESSAGE;

/// Runs the token acquire: `None` when the key now holds `token` for `ttl_ms`, otherwise
/// the holder's remaining TTL in ms (-1: none).
///
/// A free key is taken with a plain `SET NX PX`, the peers' own command and the cheapest
/// one Redis has for it; only a refused `SET` (the key exists, whatever its type) pays for
/// the script, which tries again and reads the holder's PTTL or reports a wrong type.
/// Trying twice is safe: the token is this caller's alone, and `NX` never overwrites.
pub(crate) fn token_acquire(
    conn: &mut Connection,
    key: &str,
    token: &str,
    ttl_ms: u64,
) -> RedisResult<Option<i64>> {
    let set: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg(token)
        .arg("NX")
        .arg("PX")
        .arg(ttl_ms)
        .query(conn)?;
    if set.is_some() {
        return Ok(None);
    }
    invoke(TOKEN_ACQUIRE.key(key).arg(token).arg(ttl_ms), conn)
}

/// [`token_acquire`] as a [`Call`]; its reply reads as [`token_acquire`]'s.
pub(crate) fn token_acquire_call(key: &str, token: &str, ttl_ms: u64) -> Call {
    let ttl = ttl_ms.to_string();
    Call::new(
        &TOKEN_ACQUIRE,
        &[key.as_bytes()],
        &[token.as_bytes(), ttl.as_bytes()],
    )
}

/// What a token release found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenReleased {
    /// The key held the token and was deleted; waiters were told.
    Deleted,
    /// The key holds another token; nothing changed.
    Other,
    /// The key was gone; nothing changed.
    Gone,
}

impl TokenReleased {
    /// The release script's answer: 1, 0 or -1.
    pub(crate) fn from_reply(reply: i64) -> Self {
        match reply {
            1 => Self::Deleted,
            0 => Self::Other,
            _ => Self::Gone,
        }
    }
}

/// Runs the token release (compare-and-delete, then a wake-up on `channel`).
pub(crate) fn token_release(
    conn: &mut Connection,
    [key, channel]: [&str; 2],
    token: &str,
    publish: &str,
) -> RedisResult<TokenReleased> {
    invoke::<i64>(
        TOKEN_RELEASE
            .key(key)
            .key(channel)
            .arg(token)
            .arg(publish)
            .arg(TOKEN_WAKE_MESSAGE),
        conn,
    )
    .map(TokenReleased::from_reply)
}

/// [`token_release`] as a [`Call`]; its reply is the script's 1, 0 or -1.
pub(crate) fn token_release_call([key, channel]: [&str; 2], token: &str, publish: &str) -> Call {
    Call::new(
        &TOKEN_RELEASE,
        &[key.as_bytes(), channel.as_bytes()],
        &[
            token.as_bytes(),
            publish.as_bytes(),
            TOKEN_WAKE_MESSAGE.as_bytes(),
        ],
    )
}

/// How a token extend changes the TTL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExtendBy {
    /// The TTL becomes the given time.
    Set,
    /// The given time is added to the TTL left.
    Add,
}

impl ExtendBy {
    fn arg(self) -> &'static str {
        match self {
            Self::Set => "set",
            Self::Add => "add",
        }
    }
}

/// Runs the token extend: the new TTL in ms (≥ 1) when `token` holds the key; 0 when it
/// does not; -1 when adding to a key without a TTL.
pub(crate) fn token_extend(
    conn: &mut Connection,
    key: &str,
    token: &str,
    ms: u64,
    by: ExtendBy,
) -> RedisResult<i64> {
    invoke(TOKEN_EXTEND.key(key).arg(token).arg(ms).arg(by.arg()), conn)
}

/// [`token_extend`] as a [`Call`]; its reply reads as [`token_extend`]'s.
pub(crate) fn token_extend_call(key: &str, token: &str, ms: u64, by: ExtendBy) -> Call {
    let ms = ms.to_string();
    Call::new(
        &TOKEN_EXTEND,
        &[key.as_bytes()],
        &[token.as_bytes(), ms.as_bytes(), by.arg().as_bytes()],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_the_evalsha_of_its_script() {
        let call = token_acquire_call("k", "t", 1500);
        let expected = format!(
            "*6\r\n$7\r\nEVALSHA\r\n$40\r\n{}\r\n$1\r\n1\r\n$1\r\nk\r\n$1\r\nt\r\n$4\r\n1500\r\n",
            TOKEN_ACQUIRE.get_hash()
        );
        assert_eq!(String::from_utf8_lossy(call.packed()), expected);
    }

    #[test]
    fn base64_matches_rfc_4648_test_vectors() {
        for (input, want) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), want);
        }
        assert_eq!(base64(&[0xff; 16]), "/////////////////////w==");
    }

    #[test]
    fn formats_have_the_peers_shapes() {
        let t = TokenFormat::Random.make().unwrap();
        assert_eq!(t.len(), 24);
        assert!(t.ends_with("=="));
        assert_ne!(t, TokenFormat::Random.make().unwrap());
        let u = TokenFormat::UuidHex.make().unwrap();
        assert_eq!(u.len(), 32);
        assert!(u.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')));
        assert_eq!(
            TokenFormat::custom(|| "mine".into()).make().unwrap(),
            "mine"
        );
        assert!(TokenFormat::custom(String::new).make().is_err());
    }
}
