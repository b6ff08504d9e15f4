//! The crate's one error type.

use std::fmt;
use std::time::Duration;

/// What can go wrong when talking to Redis about a lock.
///
/// "Someone else holds the lock" is not an error: the `try_*` methods answer it with
/// `Ok(None)`. Every variant here is something a caller can act on.
///
/// Note: [`Error::Redis`] and the other variants that carry a `redis::RedisError` follow
/// the `redis` crate's version (`redmutex::redis` re-exports the one in use).
///
/// Each message is whole on one line: it carries the words of its cause (the server's
/// reply, the operating system's error), so
/// [`source`](std::error::Error::source) returns `None` and a report that walks the
/// chain says each cause once. The wrapped errors stay reachable through the variants.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use redmutex::Error;
///
/// let client = redmutex::Client::open("redis://127.0.0.1:6379")?;
/// let lock = client.get_lock("orders:17");
/// let guard = loop {
///     match lock.try_lock_for(Duration::from_secs(1)) {
///         Ok(Some(guard)) => break guard,
///         Ok(None) => continue, // held by someone else: not an error
///         // Redis did not answer in time: the attempt may or may not have run; retry.
///         Err(Error::ResponseTimeout(_)) => continue,
///         Err(e) => return Err(e),
///     }
/// };
/// match guard.unlock() {
///     Ok(()) => {}
///     // LockLost (or NotHeld): the hold was gone before the release, so the section
///     // may not have been exclusive.
///     Err(e) if e.is_not_held() => eprintln!("lost while held: {e}"),
///     Err(e) => return Err(e),
/// }
/// # Ok::<(), redmutex::Error>(())
/// ```
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
    /// A call found no pooled connection to a node: nothing was sent, so it may be
    /// retried as it is. Each node has at most
    /// [`pool_max_size`](crate::Config::pool_max_size) pooled connections (per master in
    /// cluster and sentinel mode), taken in turns. A call without a deadline of its own
    /// (`lock()`) waits as long as other calls keep getting connections, and fails only
    /// when none did for a whole [`connection_timeout`](crate::Config::connection_timeout)
    /// (every connection stuck on a slow node, or the node unreachable); a call with a
    /// wait of its own fails when that wait runs out first. A larger pool or timeout, or
    /// fewer concurrent calls, avoid it.
    PoolTimeout {
        /// The node's `host:port`, as the client dials it.
        address: String,
        /// The most pooled connections the client keeps to that node (its
        /// [`pool_max_size`](crate::Config::pool_max_size)).
        pool_size: u32,
        /// How long the call waited.
        waited: Duration,
        /// Why a connection could not be opened, when that is what the wait ran into
        /// (the node refused or did not answer); `None` when every connection was busy.
        connect_error: Option<Box<str>>,
    },
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
    /// A lock over several independent servers could not get a quorum of them to agree,
    /// because too many of them failed or answered too slowly (a lock merely held by
    /// someone else is `Ok(None)`, not this). The details say which members failed and
    /// why.
    NoQuorum(Box<NoQuorum>),
    /// Replica sync is on ([`Config::check_lock_synced_slaves`](crate::Config::check_lock_synced_slaves))
    /// and no replica of the master acknowledged the acquire within
    /// [`slaves_sync_timeout`](crate::Config::slaves_sync_timeout), on the first try and
    /// on every retry (Redisson's `NoSyncedSlavesException`). Each try's hold was
    /// released again, so nothing is held; a failover now could have granted the lock
    /// to someone else. Replicas that are slow or frozen cause it; a longer timeout or
    /// turning the check off lets the acquire through, without that protection. In
    /// sentinel mode a master that the sentinels are replacing fails every try the same
    /// way, whatever its replicas acknowledged (its replicas are leaving it for the new
    /// master); the next try asks the sentinels first.
    NoSyncedReplicas {
        /// The lock's name.
        name: String,
        /// The replicas the master counted as connected (for a master being replaced:
        /// the most it or the sentinels counted).
        replicas: u64,
        /// Tries made (the first plus the retries).
        tries: u32,
    },
    /// [`Client::new`](crate::Client::new) could not open its first connection: nothing
    /// listens at the address, the credentials or the TLS handshake were refused, or the
    /// server did not answer in time. The message says what to check.
    Connect {
        /// The address, with its password masked.
        address: String,
        /// What the connection attempt ran into.
        source: redis::RedisError,
    },
    /// The server refused the login when the client was created: a wrong password or
    /// user name, no password where the server requires one (`NOAUTH`), or a password
    /// where the server has none. Checked with one `PING` after the login on the first
    /// connection (the single server, the master the sentinels name, the cluster seed),
    /// so it shows at [`Client::new`](crate::Client::new), not at the first lock. The
    /// message names the address and the user, never the password.
    Auth {
        /// The address, with its password masked.
        address: String,
        /// The user that logged in (`default` when none was given).
        user: String,
        /// The server's refusal.
        source: Box<redis::RedisError>,
    },
    /// An invalid argument of a call: a zero or absurd lease, TTL or expiry time. Nothing
    /// was sent to Redis.
    InvalidArgument {
        /// The parameter's name, as the method's documentation calls it (`lease`, `ttl`).
        argument: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// An invalid configuration or argument, or a count a Redisson client could not
    /// read: semaphore counts must stay within Java's `int`, and Redis refused the change
    /// without making it.
    Config(String),
    /// The lock is non-reentrant and the current thread holds it already (Redisson's
    /// `IllegalMonitorStateException` "is non-reentrant and is already held"). Nothing
    /// changed: the hold count stays 1.
    AlreadyHeld {
        /// The lock's name.
        name: String,
    },
    /// A fenced write was refused before anything was written; see
    /// [`LockGuard::fenced`](crate::LockGuard::fenced).
    FenceRefused {
        /// The lock's name.
        name: String,
        /// Why.
        reason: Refusal,
    },
    /// A fenced write passed its checks, then one of its commands failed. Scripts do not
    /// roll back: the `applied` commands before it took effect, it and the later ones
    /// did not.
    FencedPartial {
        /// The lock's name.
        name: String,
        /// How many commands took effect.
        applied: usize,
        /// The failed command's error.
        source: Box<redis::RedisError>,
    },
    /// Members of a [`MultiLock`](crate::MultiLock) or `RedLock`
    /// failed: each member's lock name and error. The other members did what was asked.
    Members(Vec<(String, Error)>),
    /// The client was shut down; it cannot be used any more.
    Shutdown,
    /// A wait was cancelled through its [`Cancel`](crate::Cancel) handle (Redisson's
    /// `lockInterruptibly()` interrupted). Nothing is held and nothing is left behind:
    /// no place in a fair lock's queue, no subscription.
    Cancelled,
    /// The operating system failed the client: a background thread could not be started,
    /// or its random source could not make a lock token.
    Io(std::io::Error),
}

/// What a quorum operation (acquire, extend, release over independent servers) got, and
/// why that was not enough; carried by [`Error::NoQuorum`].
#[derive(Debug)]
pub struct NoQuorum {
    pub(crate) name: String,
    pub(crate) operation: &'static str,
    pub(crate) members: usize,
    pub(crate) needed: usize,
    pub(crate) agreed: usize,
    pub(crate) too_slow: bool,
    pub(crate) failures: Vec<(usize, Error)>,
}

impl NoQuorum {
    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What was attempted: `"acquire"`, `"extend"` or `"release"`.
    pub fn operation(&self) -> &'static str {
        self.operation
    }

    /// How many members the lock has.
    pub fn members(&self) -> usize {
        self.members
    }

    /// How many have to agree: a majority, `members / 2 + 1`.
    pub fn needed(&self) -> usize {
        self.needed
    }

    /// How many agreed (granted, extended or released).
    pub fn agreed(&self) -> usize {
        self.agreed
    }

    /// True when enough members agreed but the round took so long that less than nothing
    /// was left of the lock's validity (TTL − elapsed − clock drift).
    pub fn too_slow(&self) -> bool {
        self.too_slow
    }

    /// The members (by index in the order given) that could not be asked or did not
    /// answer, with their errors.
    pub fn failures(&self) -> &[(usize, Error)] {
        &self.failures
    }
}

impl fmt::Display for NoQuorum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "quorum lock `{}`: {} reached {} of {} members, {} needed",
            short(&self.name),
            self.operation,
            self.agreed,
            self.members,
            self.needed
        )?;
        if self.too_slow {
            f.write_str(", but too late to be valid")?;
        }
        for (member, e) in &self.failures {
            write!(f, "; member {member}: {e}")?;
        }
        Ok(())
    }
}

/// Why a fenced write was refused (see [`Error::FenceRefused`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Refusal {
    /// The owner no longer holds the lock: its lease ran out, or the lock was deleted or
    /// taken over.
    NotHeld,
    /// The lock is held, but a later acquisition drew a newer fencing token than the
    /// guard's (a fenced lock only).
    StaleToken {
        /// The newest token drawn on the lock.
        newest: u64,
    },
}

/// `Result` with [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// True for [`Error::NotHeld`], [`Error::LockLost`] and a fenced write refused with
    /// [`Refusal::NotHeld`]: in each case the caller does not hold the lock now.
    pub fn is_not_held(&self) -> bool {
        matches!(
            self,
            Self::NotHeld { .. }
                | Self::LockLost { .. }
                | Self::FenceRefused {
                    reason: Refusal::NotHeld,
                    ..
                }
        )
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

    /// True when Redis refused the command before running any of it because the
    /// deployment is changing under it (a cluster slot migrating, `TRYAGAIN`; a redirect
    /// loop; the cluster down; a master gone or still loading; a demoted master's
    /// `READONLY`) and the transport's own retries ran out. Nothing ran, so a caller with
    /// time left may try again later.
    pub(crate) fn is_unsettled(&self) -> bool {
        use redis::ServerErrorKind as K;
        match self {
            Self::Redis(e) => matches!(
                e.kind(),
                redis::ErrorKind::Server(
                    K::TryAgain
                        | K::ClusterDown
                        | K::MasterDown
                        | K::BusyLoading
                        | K::ReadOnly
                        | K::Moved
                        | K::Ask
                )
            ),
            _ => false,
        }
    }

    /// A zero or absurd duration given as `argument`.
    pub(crate) fn invalid(argument: &'static str, problem: impl Into<String>) -> Self {
        Self::InvalidArgument {
            argument,
            problem: problem.into(),
        }
    }

    /// Classifies a Redis error that came back while working on lock `name`.
    pub(crate) fn from_redis(name: &str, err: redis::RedisError) -> Self {
        if err.is_timeout() {
            return Self::ResponseTimeout(err);
        }
        let detail = err.detail().unwrap_or_default();
        match err.code() {
            // The error codes of our own scripts.
            Some("PERMITS_OUT_OF_RANGE") => Self::Config(format!(
                "`{}`: {detail} (Redisson reads permit counts as a Java int)",
                short(name)
            )),
            Some("NON_REENTRANT_REACQUIRE") => Self::AlreadyHeld {
                name: name.to_owned(),
            },
            Some("FENCED_NOT_HELD") => Self::FenceRefused {
                name: name.to_owned(),
                reason: Refusal::NotHeld,
            },
            Some("FENCED_STALE_TOKEN") => Self::FenceRefused {
                name: name.to_owned(),
                reason: Refusal::StaleToken {
                    newest: detail.trim().parse().unwrap_or(0),
                },
            },
            Some("FENCED_BAD_PROGRAM") => {
                Self::Config(format!("fenced write on `{}`: {detail}", short(name)))
            }
            Some("FENCED_PARTIAL") => {
                let failed: usize = detail
                    .split_whitespace()
                    .next()
                    .and_then(|i| i.parse().ok())
                    .unwrap_or(1);
                Self::FencedPartial {
                    name: name.to_owned(),
                    applied: failed.saturating_sub(1),
                    source: Box::new(err),
                }
            }
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
            // Inside a script, ACL refusals come back as ERR: "The user executing the
            // script can't access / publish to ..." (7.0), "ACL failure in script: No
            // permissions to access a channel" (7.2+, Valkey).
            _ if is_acl_refusal(&err.to_string()) => Self::Permission(err),
            _ => Self::Redis(err),
        }
    }
}

/// Whether an error's text is an ACL refusal, in the wordings of Redis 6.2 to 8.x and
/// Valkey.
fn is_acl_refusal(text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    text.contains("noperm")
        || text.contains("no permissions")
        || text.contains("acl failure")
        || text.contains("user executing the script can't")
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
            Self::PoolTimeout {
                address,
                pool_size,
                waited,
                connect_error,
            } => {
                write!(
                    f,
                    "no pooled connection to redis at {address} within {} ms: ",
                    waited.as_millis()
                )?;
                match connect_error {
                    Some(e) => write!(f, "opening one failed: {e}"),
                    None => write!(
                        f,
                        "all {pool_size} were busy (pool_max_size, Redisson's \
                         connectionPoolSize, caps them per node)"
                    ),
                }
            }
            Self::Permission(e) => write!(f, "redis refused the command (acl): {e}"),
            Self::WrongType { name, source } => write!(
                f,
                "key `{}` holds another type than the lock expects: {source}",
                short(name)
            ),
            Self::Redis(e) => write!(f, "redis: {e}"),
            Self::NoQuorum(detail) => detail.fmt(f),
            Self::NoSyncedReplicas {
                name,
                replicas,
                tries,
            } => write!(
                f,
                "lock `{}`: none of the master's {replicas} replica(s) acknowledged the acquire \
                 in {tries} tries, so it was released again (increase slaves_sync_timeout, or \
                 turn check_lock_synced_slaves off)",
                short(name)
            ),
            Self::Connect { address, source } => {
                f.write_str(&crate::address::connect_failure(address, source))
            }
            Self::Auth {
                address,
                user,
                source,
            } => f.write_str(&crate::address::login_failure(address, user, source)),
            Self::InvalidArgument { argument, problem } => {
                write!(f, "invalid argument `{argument}`: {problem}")
            }
            Self::Config(msg) => write!(f, "invalid configuration: {msg}"),
            Self::AlreadyHeld { name } => write!(
                f,
                "lock `{}` is non-reentrant and the current thread holds it already",
                short(name)
            ),
            Self::FenceRefused { name, reason } => match reason {
                Refusal::NotHeld => write!(
                    f,
                    "fenced write refused: lock `{}` is no longer held by this owner",
                    short(name)
                ),
                Refusal::StaleToken { newest } => write!(
                    f,
                    "fenced write refused: lock `{}` has a newer token ({newest})",
                    short(name)
                ),
            },
            Self::FencedPartial {
                name,
                applied,
                source,
            } => write!(
                f,
                "fenced write on `{}` failed after {applied} command(s) took effect: {source}",
                short(name)
            ),
            Self::Members(failures) => {
                write!(f, "{} member lock(s) failed:", failures.len())?;
                for (name, e) in failures {
                    write!(f, " `{}`: {e};", short(name))?;
                }
                Ok(())
            }
            Self::Shutdown => f.write_str("the redmutex client was shut down"),
            Self::Cancelled => f.write_str("the wait was cancelled through its Cancel handle"),
            Self::Io(e) => write!(f, "could not start a background thread: {e}"),
        }
    }
}

/// Lock names can be megabytes long; messages show a prefix.
pub(crate) fn short(name: &str) -> String {
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

/// Every message already carries its cause's words (see [`Error`]): no source, so that a
/// report walking the chain does not say them again.
impl std::error::Error for Error {}

impl From<redis::RedisError> for Error {
    fn from(err: redis::RedisError) -> Self {
        Self::from_redis("", err)
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

    /// A refused connection says "Connection refused" once, whether the message is
    /// printed alone or with its chain of causes.
    #[test]
    fn each_cause_is_said_once() {
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let io_text = io.to_string();
        let err = Error::Connect {
            address: "redis://127.0.0.1:1/".into(),
            source: redis::RedisError::from(io),
        };
        let mut chain = err.to_string();
        let mut source = std::error::Error::source(&err);
        while let Some(cause) = source {
            chain.push_str(&format!(": {cause}"));
            source = cause.source();
        }
        assert_eq!(chain.matches(io_text.as_str()).count(), 1, "{chain}");
    }

    #[test]
    fn not_held_and_lost_are_both_not_held() {
        assert!(Error::NotHeld { name: "a".into() }.is_not_held());
        assert!(Error::LockLost { name: "a".into() }.is_not_held());
        assert!(!Error::Shutdown.is_not_held());
    }
}
