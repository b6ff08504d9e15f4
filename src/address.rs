//! What is wrong with a Redis address, said so that a person can fix it: which part of a
//! URL does not parse, and what to check when the server behind it cannot be reached.
//! Every message shows the address with its password masked.
//!
//! The `redmutex` binary reaches this module through `admin`, so the tool and the library
//! explain a bad address in the same words.

/// The URL schemes redis-rs accepts.
const TCP_SCHEMES: [&str; 4] = ["redis", "rediss", "valkey", "valkeys"];
const UNIX_SCHEMES: [&str; 3] = ["unix", "redis+unix", "valkey+unix"];

/// The shape of a TCP address, for messages.
const FORM: &str = "redis://[user[:password]@]host[:port][/db]";

/// Why `url` was refused by the Redis client (`err`), as one sentence that names the
/// part at fault; falls back to the client's own words for a fault it does not know.
pub(crate) fn explain(url: &str, err: &redis::RedisError) -> String {
    let shown = redact(url);
    match problem(url) {
        Some(problem) => format!("redis address `{shown}` {problem}"),
        None => format!("redis address `{shown}` was refused ({err}); the form is {FORM}"),
    }
}

/// What is wrong with `url`, if it is something this module recognises.
fn problem(url: &str) -> Option<String> {
    if url.trim().is_empty() {
        return Some(format!("is empty; the form is {FORM}"));
    }
    if url.chars().any(char::is_whitespace) {
        return Some("contains white space".to_owned());
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return Some(format!(
            "has no scheme: write it as {FORM} (rediss:// for TLS, unix:///path for a socket)"
        ));
    };
    let scheme = scheme.to_ascii_lowercase();
    if UNIX_SCHEMES.contains(&scheme.as_str()) {
        return rest
            .is_empty()
            .then(|| "names no socket path: write unix:///path/to/redis.sock".to_owned());
    }
    if !TCP_SCHEMES.contains(&scheme.as_str()) {
        return Some(format!(
            "has the scheme `{scheme}://`, which is not Redis's: use redis://, rediss:// (TLS) \
             or unix://"
        ));
    }
    if matches!(scheme.as_str(), "rediss" | "valkeys") && !cfg!(feature = "tls") {
        return Some("asks for TLS, but redmutex was built without its `tls` feature".to_owned());
    }
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    if rest[authority_end..].contains('@') {
        return Some(
            "has an `@` after a `/`, `?` or `#`: if the password holds one of those, \
             percent-encode it (%2F, %3F, %23; `@` itself as %40)"
                .to_owned(),
        );
    }
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    if let Some(problem) = host_port_problem(host_port) {
        return Some(problem);
    }
    let path_end = rest[authority_end..]
        .find(['?', '#'])
        .map_or(rest.len(), |i| authority_end + i);
    let db = rest[authority_end..path_end].trim_matches('/');
    if !db.is_empty() && db.parse::<i64>().is_err() {
        return Some(format!(
            "has `/{db}` after the host, where only a database number may stand"
        ));
    }
    None
}

/// What is wrong with the `host[:port]` part, if anything.
fn host_port_problem(host_port: &str) -> Option<String> {
    let (host, port) = if let Some(v6) = host_port.strip_prefix('[') {
        match v6.split_once(']') {
            Some((host, rest)) => (host, rest.strip_prefix(':')),
            None => return Some("has an IPv6 host without its closing `]`".to_owned()),
        }
    } else {
        match host_port.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        }
    };
    if host.is_empty() {
        return Some(format!(
            "names no host (a `#`, `/` or `?` in the password must be percent-encoded); \
             the form is {FORM}"
        ));
    }
    if matches!(host, "0.0.0.0" | "::") {
        return Some("names a wildcard address; connect to 127.0.0.1 or a real host".to_owned());
    }
    match port {
        Some("") => Some("ends the host with `:` but gives no port".to_owned()),
        Some(port) => match port.parse::<u32>() {
            Err(_) => Some(format!("has the port `{port}`, which is not a number")),
            Ok(0) | Ok(65_536..) => Some(format!("has the port {port}, outside 1-65535")),
            Ok(_) => None,
        },
        None => None,
    }
}

/// The database a TCP URL names in its path (`redis://host:6379/3` → 3), if any.
pub(crate) fn database(url: &str) -> Option<i64> {
    let (scheme, rest) = url.split_once("://")?;
    if !TCP_SCHEMES.contains(&scheme.to_ascii_lowercase().as_str()) {
        return None;
    }
    let authority_end = rest.find(['/', '?', '#'])?;
    let path = &rest[authority_end..];
    let path = &path[..path.find(['?', '#']).unwrap_or(path.len())];
    let db = path.trim_matches('/');
    (!db.is_empty()).then(|| db.parse().ok()).flatten()
}

/// The URL with the password part of its user info replaced by `***`.
pub fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_owned();
    };
    let rest = &url[scheme_end + 3..];
    // The last `@` anywhere, not only in the authority: a password with an unencoded
    // `/`, `?` or `#` ends the authority early, and must be masked all the same.
    let Some(at) = rest.rfind('@') else {
        return url.to_owned();
    };
    let user_info = &rest[..at];
    let user = user_info.split(':').next().unwrap_or("");
    let masked = if user_info.contains(':') {
        format!("{user}:***")
    } else {
        // `redis://secret@host` puts the password where the user would be.
        "***".to_owned()
    };
    format!("{}{}{}", &url[..scheme_end + 3], masked, &rest[at..])
}

/// The one-line message of a failed first connection to the address `shown` (already
/// masked): what happened and what to check.
pub fn connect_failure(shown: &str, err: &redis::RedisError) -> String {
    format!(
        "cannot connect to redis at `{shown}`: {err}; {}",
        connect_hint(err)
    )
}

/// The one-line message of a login the server at `shown` (already masked) refused for
/// `user`: what the server said and what to change. Never shows a password (the
/// server's replies carry none).
pub(crate) fn login_failure(shown: &str, user: &str, err: &redis::RedisError) -> String {
    let text = err.to_string();
    let hint = if shown.starts_with("sentinels ") {
        "check the sentinels' own login (ConfigBuilder::sentinel_username and \
         sentinel_password, Redisson's `sentinelUsername` and `sentinelPassword`, or \
         user:password in the sentinel addresses)"
    } else if text.contains("NOAUTH") {
        "no password was given, but the server requires one: put it in the address \
         (redis://[user]:PASSWORD@host) or set it with ConfigBuilder::password (Redisson's \
         `password`)"
    } else if text.contains("without any password configured") {
        "a password was given, but the server has none for this user: drop the password, \
         or set one on the server (requirepass, ACL SETUSER)"
    } else {
        "check the user name and the password (in the address, ConfigBuilder::username and \
         ConfigBuilder::password, or Redisson's `username` and `password`)"
    };
    format!("redis at `{shown}` refused the login of user `{user}`: {text}; {hint}")
}

/// Whether `err`, from a connection's login or its first command, means the server
/// refused the credentials (rather than being down or unreachable).
pub fn is_login_refusal(err: &redis::RedisError) -> bool {
    let text = err.to_string();
    err.kind() == redis::ErrorKind::AuthenticationFailed
        || err.code() == Some("NOAUTH")
        || err.code() == Some("WRONGPASS")
        || text.contains("NOAUTH")
        || text.contains("WRONGPASS")
        || text.contains("invalid password")
        || text.contains("without any password configured")
}

/// What to check after the first connection failed with `err`.
fn connect_hint(err: &redis::RedisError) -> &'static str {
    let text = err.to_string();
    if err.is_connection_refusal() {
        "nothing accepts connections there: check the host and port, and that redis-server \
         is running"
    } else if err.is_timeout() {
        "no answer in time: check the host, the port and firewalls; a TLS port says nothing \
         to redis://, use rediss:// there"
    } else if err.kind() == redis::ErrorKind::AuthenticationFailed
        || text.contains("WRONGPASS")
        || text.contains("NOAUTH")
        || text.contains("invalid password")
    {
        "the server refused the credentials: check the user name and password in the URL"
    } else if text.contains("TLS") || text.contains("SSL") || text.contains("certificate") {
        "the TLS handshake failed: check that the port speaks TLS and that its certificate \
         is signed by the trusted root (Config::tls_root_certificate for a private CA)"
    } else if text.contains("lookup") || text.contains("resolve") {
        "the host name does not resolve: check its spelling and DNS"
    } else if err.is_connection_dropped() || err.is_io_error() {
        "the connection broke during the handshake: check that a Redis server (not another \
         service) listens there, and whether it speaks TLS"
    } else {
        "check the address, the credentials and the server's log"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(url: &str) -> String {
        let err = redis::Client::open(url).expect_err(url);
        explain(url, &err)
    }

    #[test]
    fn each_broken_part_is_named() {
        let cases = [
            ("not a url", "contains white space"),
            ("127.0.0.1:6379", "has no scheme"),
            ("http://127.0.0.1/", "`http://`"),
            ("redis://127.0.0.1:port/", "`port`, which is not a number"),
            ("redis://127.0.0.1:70000/", "outside 1-65535"),
            ("redis://127.0.0.1/zero", "`/zero` after the host"),
            ("redis://:se#cret@127.0.0.1/", "percent-encode"),
            ("redis://:@/", "names no host"),
        ];
        for (url, expected) in cases {
            let text = refused(url);
            assert!(text.contains(expected), "{url}: {text}");
        }
    }

    #[test]
    fn the_path_names_the_database() {
        assert_eq!(database("redis://127.0.0.1:6379/3"), Some(3));
        assert_eq!(database("redis://u:p@127.0.0.1/0"), Some(0));
        assert_eq!(database("rediss://h:1/12?protocol=resp3"), Some(12));
        assert_eq!(database("redis://127.0.0.1:6379/"), None);
        assert_eq!(database("redis://127.0.0.1:6379"), None);
        assert_eq!(database("redis://h:1#insecure"), None);
        assert_eq!(database("unix:///tmp/redis.sock"), None);
    }

    #[test]
    fn passwords_never_show() {
        for url in [
            "redis://user:hunter2@127.0.0.1:port/",
            "redis://user:hunter2@127.0.0.1:99999/",
            "redis://user:hunter2@127.0.0.1/x",
        ] {
            let text = refused(url);
            assert!(!text.contains("hunter2"), "{text}");
            assert!(text.contains("***"), "{text}");
        }
    }
}
