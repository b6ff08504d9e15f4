//! `rediss://`: locks, waiting (pub/sub over TLS) and mutual exclusion against a
//! redis-server that speaks only TLS, against a cluster whose nodes, bus and
//! replication speak TLS, and in sentinel mode with the sentinel and the master on TLS,
//! with a throwaway CA made by `openssl` at test time.
#![cfg(feature = "tls")]

use redmutex_harness as support;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redmutex::{Client, Config, Error};
use support::cluster::{Cluster, ClusterSpec, ClusterTls, key_for_slot};
use support::raw::{await_numsub, lock_channel};
use support::watched::{Watched, ttl_if_present, watch_renewals};
use support::{TestServer, unique};

fn openssl(dir: &Path, args: &[&str]) {
    let status = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl must be on PATH");
    assert!(status.success(), "openssl {args:?}");
}

/// A CA and a server certificate for 127.0.0.1, in `dir`.
fn make_certs(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "1",
            "-subj",
            "/CN=redmutex test CA",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    );
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "1",
            "-extfile",
            "san.ext",
        ],
    );
}

struct TlsServer {
    server: TestServer,
    tls_port: u16,
    ca: Vec<u8>,
}

fn tls_server() -> TlsServer {
    let dir = std::env::temp_dir().join(format!(
        "redmutex-tls-{}",
        unique("certs").replace(':', "-")
    ));
    make_certs(&dir);
    let tls_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let path = |f: &str| dir.join(f).to_string_lossy().into_owned();
    let (cert, key, ca) = (path("server.crt"), path("server.key"), path("ca.crt"));
    let port = tls_port.to_string();
    let server = TestServer::with_args(&[
        "--tls-port",
        &port,
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-ca-cert-file",
        &ca,
        "--tls-auth-clients",
        "no",
    ]);
    let ca = std::fs::read(dir.join("ca.crt")).unwrap();
    TlsServer {
        server,
        tls_port,
        ca,
    }
}

impl TlsServer {
    fn client(&self) -> Client {
        Client::new(
            Config::builder()
                .address(format!("rediss://127.0.0.1:{}/", self.tls_port))
                .tls_root_certificate(self.ca.clone())
                .build(),
        )
        .unwrap()
    }
}

#[test]
fn locks_wake_ups_and_exclusion_work_over_tls() {
    if support::server_lacks_tls() {
        return;
    }
    let tls = tls_server();
    let mut raw = tls.server.conn();
    let (a, b) = (tls.client(), tls.client());
    let name = unique("tls");
    assert!(handed_over(&a, &b, &name, || await_numsub(
        &mut raw,
        &lock_channel(&name),
        1
    )));
    let inside = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    std::thread::scope(|s| {
        for client in [&a, &b] {
            for _ in 0..3 {
                s.spawn(|| {
                    let lock = client.get_lock(name.clone());
                    for _ in 0..30 {
                        let g = lock.lock().unwrap();
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0);
                        inside.fetch_sub(1, Ordering::SeqCst);
                        g.unlock().unwrap();
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        }
    });
    assert_eq!(done.load(Ordering::Relaxed), 180);
}

#[test]
fn an_unknown_ca_is_refused_at_connect() {
    if support::server_lacks_tls() {
        return;
    }
    let tls = tls_server();
    let other = std::env::temp_dir().join(format!(
        "redmutex-tls-{}",
        unique("other").replace(':', "-")
    ));
    make_certs(&other);
    let wrong_ca = std::fs::read(other.join("ca.crt")).unwrap();
    let err = Client::new(
        Config::builder()
            .address(format!("rediss://127.0.0.1:{}/", tls.tls_port))
            .tls_root_certificate(wrong_ca)
            .connection_timeout(Duration::from_secs(2))
            .build(),
    )
    .unwrap_err();
    assert!(matches!(err, Error::Connect { .. }), "{err}");
    // Plain text to the TLS port is no better.
    let err = Client::new(
        Config::builder()
            .address(format!("redis://127.0.0.1:{}/", tls.tls_port))
            .connection_timeout(Duration::from_secs(2))
            .response_timeout(Duration::from_secs(2))
            .build(),
    )
    .unwrap_err();
    assert!(matches!(err, Error::Connect { .. }), "{err}");
}

/// Whether `waiter` takes `name` from `holder`: the holder takes it under a 30 s lease,
/// `subscribed` returns once the waiter is seen waiting, and the holder releases. The
/// waiter waits at most 20 s, so only the unlock message can end its wait with the lock.
fn handed_over(holder: &Client, waiter: &Client, name: &str, subscribed: impl FnOnce()) -> bool {
    let guard = holder
        .get_lock(name.to_owned())
        .lock_with_lease(Duration::from_secs(30))
        .unwrap();
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            waiter
                .get_lock(name.to_owned())
                .try_lock_for(Duration::from_secs(20))
                .unwrap()
                .map(|g| g.unlock().unwrap())
                .is_some()
        });
        subscribed();
        guard.unlock().unwrap();
        w.join().unwrap()
    })
}

/// The certificates of a fresh throwaway CA, in a directory of their own.
fn certs() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "redmutex-tls-{}",
        unique("certs").replace(':', "-")
    ));
    make_certs(&dir);
    dir
}

/// The local ports that `CLIENT LIST` on `node` shows connections named `name` on.
fn ports_named(node: &mut redis::Connection, name: &str) -> Vec<u16> {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(node).unwrap();
    let want = format!("name={name}");
    list.lines()
        .filter(|l| l.split(' ').any(|f| f == want))
        .filter_map(|l| l.split(' ').find_map(|f| f.strip_prefix("laddr=")))
        .map(|a| a.rsplit_once(':').unwrap().1.parse().unwrap())
        .collect()
}

/// The TLS cluster holder's watchdog: renewed every 2 s, each connect or reply of its
/// watchdog capped at 500 ms (a twelfth). With 1 s the cap was 83 ms, less than a TLS
/// handshake of a debug build takes on a loaded machine: every renewal then failed to
/// connect, on every shard, and the hold ran out (`pttl -2`).
const HOLDER_WATCHDOG: Duration = Duration::from_secs(6);

/// A cluster that speaks TLS, seeded with `rediss://` addresses: the slot map's
/// addresses are dialled over TLS too (every connection of the client arrives on a TLS
/// port), and on every shard a lock is taken, renewed there by the watchdog,
/// and handed to a waiter of another client by its sharded unlock message.
#[test]
fn a_cluster_over_tls_locks_renews_and_wakes_on_every_shard() {
    if support::server_lacks_tls() {
        return;
    }
    let dir = certs();
    let cluster = Cluster::start(ClusterSpec {
        replicas: 0,
        tls: Some(ClusterTls {
            cert: dir.join("server.crt"),
            key: dir.join("server.key"),
            ca: dir.join("ca.crt"),
        }),
        ..ClusterSpec::default()
    });
    let ca = std::fs::read(dir.join("ca.crt")).unwrap();
    let client = |watchdog: Duration| {
        Client::new(
            Config::builder()
                .cluster_nodes(cluster.tls_urls())
                .tls_root_certificate(ca.clone())
                .lock_watchdog_timeout(watchdog)
                .build(),
        )
        .unwrap()
    };
    let (holder, waiter) = (client(HOLDER_WATCHDOG), client(Duration::from_secs(30)));
    let masters = cluster.masters();
    assert_eq!(masters.len(), 3);
    for master in &masters {
        let slot = *master.slots[0].start();
        let name = key_for_slot(slot, "tls-shard");
        let mut raw = master.conn();
        let guard = holder.get_lock(name.clone()).lock().unwrap();
        // A renewal on this master (its TTL rises), over the watchdog's own TLS
        // connection there; or a loaded machine starved the watchdog past the lease, and
        // the guard said so in time.
        let watched = watch_renewals(
            1,
            HOLDER_WATCHDOG + Duration::from_secs(1),
            Duration::from_millis(50),
            || {
                let ttl = ttl_if_present(&mut raw, &name)?;
                assert!(
                    ttl > 0 && ttl <= HOLDER_WATCHDOG.as_millis() as i64,
                    "{name}: pttl {ttl}"
                );
                Some(ttl)
            },
            || guard.is_lost(),
        );
        match watched {
            Watched::Kept { renewals, .. } => {
                assert_eq!(renewals, 1, "{name}: no renewal within the lease");
                support::watched::assert_kept_or_cautious(guard.loss(), &name);
                guard.unlock().unwrap();
            }
            Watched::ReportedLost { .. } => {
                let err = guard.unlock().unwrap_err();
                assert!(err.is_not_held(), "{name}: {err}");
            }
        }
        let channel = lock_channel(&name);
        let subscribed = || {
            support::eventually(Duration::from_secs(20), "the waiter subscribes", || {
                let n: Vec<redis::Value> = redis::cmd("PUBSUB")
                    .arg("SHARDNUMSUB")
                    .arg(&channel)
                    .query(&mut raw)
                    .unwrap();
                n.get(1) == Some(&redis::Value::Int(1))
            });
        };
        assert!(
            handed_over(&holder, &waiter, &name, subscribed),
            "{name}: the waiter timed out"
        );
    }
    // Every connection either client opened arrived on a TLS port.
    let tls_ports = cluster.tls_ports();
    for master in &masters {
        let mut raw = master.conn();
        for c in [&holder, &waiter] {
            let ports = ports_named(&mut raw, &format!("redmutex:{}", c.id()));
            assert!(
                !ports.is_empty(),
                "no connection of {} ({}) on {}",
                c.id(),
                if std::ptr::eq(c, &holder) {
                    "holder"
                } else {
                    "waiter"
                },
                master.port
            );
            assert!(
                ports.iter().all(|p| tls_ports.contains(p)),
                "plain-text connections on {}: {ports:?}",
                master.port
            );
        }
    }
}

/// Sentinel mode with a `rediss://` sentinel address: the sentinel is asked over TLS,
/// the master it names is dialled over TLS as well (every connection of the clients
/// arrives on its TLS port), and a lock taken there is handed to another client's waiter
/// by its unlock message.
#[test]
fn sentinel_mode_over_tls_asks_the_sentinel_and_locks_on_the_master() {
    if support::server_lacks_tls() {
        return;
    }
    let dir = certs();
    let file = |f: &str| dir.join(f).to_string_lossy().into_owned();
    let (cert, key, ca_file) = (file("server.crt"), file("server.key"), file("ca.crt"));
    let master_tls = support::supervised::free_port();
    let master = TestServer::with_args(&[
        "--tls-port",
        &master_tls.to_string(),
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-ca-cert-file",
        &ca_file,
        "--tls-auth-clients",
        "no",
    ]);
    let root = support::supervised::harness_dir("tls-sentinel");
    let sentinel_dir = root.join("sentinel");
    std::fs::create_dir_all(&sentinel_dir).unwrap();
    let (plain, tls_port) = (
        support::supervised::free_port(),
        support::supervised::free_port(),
    );
    // The plain port is the harness's readiness check; the client gets the TLS one only.
    let conf = sentinel_dir.join("sentinel.conf");
    std::fs::write(
        &conf,
        format!(
            "port {plain}\nbind 127.0.0.1\ndaemonize no\nlogfile \"redis.log\"\n\
             dir \"{dir}\"\ntls-port {tls_port}\ntls-cert-file \"{cert}\"\n\
             tls-key-file \"{key}\"\ntls-ca-cert-file \"{ca_file}\"\n\
             tls-auth-clients no\ntls-replication yes\n\
             sentinel monitor tlsmaster 127.0.0.1 {master_tls} 1\n",
            dir = sentinel_dir.display(),
        ),
    )
    .unwrap();
    let _sentinel = support::supervised::RedisProcess::start(
        &root,
        sentinel_dir,
        plain,
        vec![conf.into_os_string(), "--sentinel".into()],
    )
    .unwrap();
    let ca = std::fs::read(dir.join("ca.crt")).unwrap();
    let client = || {
        Client::new(
            Config::builder()
                .master_name("tlsmaster")
                .sentinel_addresses([format!("rediss://127.0.0.1:{tls_port}")])
                .tls_root_certificate(ca.clone())
                .build(),
        )
        .unwrap()
    };
    let (holder, waiter) = (client(), client());
    let name = unique("tls-sentinel");
    let mut raw = master.conn();
    let subscribed = || {
        assert!(
            support::raw::exists(&mut raw, &name),
            "not locked on the master"
        );
        await_numsub(&mut raw, &lock_channel(&name), 1);
    };
    assert!(
        handed_over(&holder, &waiter, &name, subscribed),
        "the waiter timed out"
    );
    for c in [&holder, &waiter] {
        let ports = ports_named(&mut raw, &format!("redmutex:{}", c.id()));
        assert!(
            !ports.is_empty(),
            "no connection of {} on the master",
            c.id()
        );
        assert!(ports.iter().all(|p| *p == master_tls), "{ports:?}");
    }
    // The sentinel was asked on its TLS port (nothing else of ours speaks TLS to it).
    let mut sentinel = redis::Client::open(format!("redis://127.0.0.1:{plain}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut sentinel)
        .unwrap();
    let on_tls = format!("laddr=127.0.0.1:{tls_port}");
    assert!(
        list.lines().any(|l| l.split(' ').any(|f| f == on_tls)),
        "no connection on the sentinel's TLS port:\n{list}"
    );
}
