//! The crate's one error type.

use std::fmt;

/// What can go wrong when talking to Redis about a lock.
///
/// "Someone else holds the lock" is not an error: the `try_*` methods answer it with
/// `Ok(None)`. Every variant here is something a caller can act on.
///
/// Note: [`Error::Redis`] and [`Error::PoolTimeout`] wrap types of the `redis` and `r2d2` crates;
/// they follow those crates' versions (`redmutex::redis` re-exports the one in use).
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The current thread does not hold the lock it tried to release (Redisson's
    /// `IllegalMonitorStateException`).
    NotHeld {
        /// The lock's name.
        name: String,
    },
    /// The current thread held the lock, but the hold was lost before this release: its
    /// lease ran out, the key was deleted or taken over, or renewal failed for so long
    /// that the lease may have ended. Whatever the guard protected may have been touched
    /// by another holder.
    LockLost {
        /// The lock's name.
        name: String,
    },
    /// Redis did not answer within the configured response timeout. The command may or
    /// may not have run.
    ResponseTimeout(redis::RedisError),
    /// No pooled connection became free within the configured connection timeout.
    PoolTimeout(r2d2::Error),
    /// The Redis user may not run a command, touch a key or use a channel (ACL `NOPERM`).
    Permission(redis::RedisError),
    /// The lock's key holds a value of another type than the lock expects.
    WrongType {
        /// The lock's name.
        name: String,
        /// The server's error.
        source: redis::RedisError,
    },
    /// Any other Redis or connection failure.
    Redis(redis::RedisError),
    /// [`Client::new`](crate::Client::new) could not open its first connection: nothing
    /// listens at the address, the credentials or the TLS handshake were refused, or the
    /// server did not answer in time. The message says what to check.
    Connect {
        /// The address, with its password masked.
        address: String,
        /// What the connection attempt ran into.
        source: redis::RedisError,
    },
    /// An invalid configuration or argument.
    Config(String),
    /// The client was shut down; it cannot be used any more.
    Shutdown,
    /// A background thread could not be started.
    Io(std::io::Error),
}

/// `Result` with [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// True for [`Error::NotHeld`] and [`Error::LockLost`]: either way the caller does not
    /// hold the lock now.
    pub fn is_not_held(&self) -> bool {
        matches!(self, Self::NotHeld { .. } | Self::LockLost { .. })
    }

    /// True when the outcome of the command is unknown because the connection failed or
    /// timed out after the command may have been sent.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::ResponseTimeout(_) => true,
            Self::Redis(e) => is_connection_error(e),
            _ => false,
        }
    }

    /// A failed first connection to `url` (shown with its password masked).
    pub(crate) fn connect(url: &str, source: redis::RedisError) -> Self {
        Self::Connect {
            address: crate::address::redact(url),
            source,
        }
    }

    /// Classifies a Redis error that came back while working on lock `name`.
    pub(crate) fn from_redis(name: &str, err: redis::RedisError) -> Self {
        if err.is_timeout() {
            return Self::ResponseTimeout(err);
        }
        match err.code() {
            Some("NOPERM") => Self::Permission(err),
            Some("WRONGTYPE") => Self::WrongType {
                name: name.to_owned(),
                source: err,
            },
            // Inside a script, ACL and type errors can come back wrapped in ERR.
            _ if err.to_string().contains("WRONGTYPE") => Self::WrongType {
                name: name.to_owned(),
                source: err,
            },
            // Inside a script, ACL refusals come back as ERR "The user executing the
            // script can't access / publish to ...".
            _ if err.to_string().contains("NOPERM")
                || err.to_string().contains("no permissions")
                || err.to_string().contains("user executing the script can't") =>
            {
                Self::Permission(err)
            }
            _ => Self::Redis(err),
        }
    }
}

/// Whether a Redis error means the connection broke (the command may have run).
pub(crate) fn is_connection_error(err: &redis::RedisError) -> bool {
    err.is_timeout()
        || err.is_io_error()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotHeld { name } => {
                write!(
                    f,
                    "lock `{}` is not held by the current thread",
                    short(name)
                )
            }
            Self::LockLost { name } => write!(
                f,
                "lock `{}` was lost before it was released (lease ended or key taken over)",
                short(name)
            ),
            Self::ResponseTimeout(e) => write!(f, "redis response timed out: {e}"),
            Self::PoolTimeout(e) => write!(f, "no pooled redis connection available: {e}"),
            Self::Permission(e) => write!(f, "redis refused the command (acl): {e}"),
            Self::WrongType { name, source } => write!(
                f,
                "key `{}` holds another type than the lock expects: {source}",
                short(name)
            ),
            Self::Redis(e) => write!(f, "redis: {e}"),
            Self::Connect { address, source } => {
                f.write_str(&crate::address::connect_failure(address, source))
            }
            Self::Config(msg) => write!(f, "invalid configuration: {msg}"),
            Self::Shutdown => f.write_str("the redmutex client was shut down"),
            Self::Io(e) => write!(f, "could not start a background thread: {e}"),
        }
    }
}

/// Lock names can be megabytes long; messages show a prefix.
fn short(name: &str) -> String {
    const MAX: usize = 200;
    if name.len() <= MAX {
        return name.escape_debug().to_string();
    }
    let mut end = MAX;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", name[..end].escape_debug(), name.len())
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::ResponseTimeout(e) | Self::Permission(e) | Self::Redis(e) => Some(e),
            Self::WrongType { source, .. } | Self::Connect { source, .. } => Some(source),
            Self::PoolTimeout(e) => Some(e),
            Self::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<redis::RedisError> for Error {
    fn from(err: redis::RedisError) -> Self {
        Self::from_redis("", err)
    }
}

impl From<r2d2::Error> for Error {
    fn from(err: r2d2::Error) -> Self {
        Self::PoolTimeout(err)
    }
}

impl From<std::io::Error> for Error {
    fn from(err: std::io::Error) -> Self {
        Self::Io(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_is_send_sync_static_and_small() {
        fn assert<T: Send + Sync + 'static>() {}
        assert::<Error>();
        assert!(std::mem::size_of::<Error>() <= 64);
    }

    #[test]
    fn display_is_lowercase_and_truncates_huge_names() {
        let e = Error::NotHeld {
            name: "x".repeat(1 << 20),
        };
        let text = e.to_string();
        assert!(text.starts_with("lock `xxx"));
        assert!(text.len() < 400, "{}", text.len());
        assert!(text.contains("1048576 bytes"));
        assert!(Error::Shutdown.to_string().starts_with("the "));
    }

    #[test]
    fn not_held_and_lost_are_both_not_held() {
        assert!(Error::NotHeld { name: "a".into() }.is_not_held());
        assert!(Error::LockLost { name: "a".into() }.is_not_held());
        assert!(!Error::Shutdown.is_not_held());
    }
}
