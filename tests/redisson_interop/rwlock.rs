//! `RReadWriteLock` against `RedissonReadWriteLock`: shared reads, a waiting writer, a
//! write unlock waking every reader (scenario 12).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serial_test::parallel;

use crate::peer::{Peer, Pending};
use crate::support::raw::{exists, hgetall, pttl, read_timeout_key, rwlock_channel};
use crate::support::{TestServer, unique};
use crate::{HANG, WATCHDOG_MS, assert_woken_by_message, ms, run_versions, wait_subscribers};

/// Read-write lock: a Rust and a Java reader share it while a Java writer waits for both;
/// the Java reader's unlock keeps the hash alive for the Rust reader (whose timeout key
/// Redisson's script reads), the Rust reader's unlock wakes the writer; then a Rust
/// writer's unlock wakes three Java readers at once.
#[test]
#[parallel]
fn scenario_12_read_write_lock_interop() {
    run_versions(12, read_write_lock_interop);
}

fn read_write_lock_interop(v: &str) {
    let server = TestServer::start();
    let peer = Peer::start(v, &server.url(), WATCHDOG_MS);
    let client = server.client();
    let mut raw = server.conn();

    // A Rust reader and a Java reader hold at once; a Java writer waits.
    let name = unique("s12-readers");
    let rw_channel = rwlock_channel(&name);
    let rw = client.get_read_write_lock(name.clone());
    let rust_read = rw.read_lock().lock().unwrap();
    let rust_field = {
        let h = hgetall(&mut raw, &name);
        assert_eq!(h.get("mode").map(String::as_str), Some("read"), "{h:?}");
        let fields: Vec<_> = h.keys().filter(|k| *k != "mode").cloned().collect();
        assert_eq!(fields.len(), 1, "{h:?}");
        let field = fields.into_iter().next().unwrap();
        let thread = field.strip_prefix(&format!("{}:", client.id()));
        assert!(thread.is_some_and(|t| t.parse::<u64>().is_ok()), "{h:?}");
        field
    };
    let rust_timeout = read_timeout_key(&name, &rust_field, 1);
    assert!(exists(&mut raw, &rust_timeout), "{rust_timeout} missing");

    peer.ok("r", &format!("read.lock {name}"));
    let java_field = peer.field(&peer.thread_id("r"));
    assert_eq!(
        hgetall(&mut raw, &name),
        BTreeMap::from([
            ("mode".to_owned(), "read".to_owned()),
            (rust_field.clone(), "1".to_owned()),
            (java_field.clone(), "1".to_owned()),
        ]),
        "both readers hold"
    );
    assert!(peer.bool("r", &format!("read.isheld {name}")));
    assert_eq!(peer.num("r", &format!("read.holdcount {name}")), 1);
    assert!(rw.read_lock().is_held_by_current_thread().unwrap());
    assert!(rw.read_lock().is_locked().unwrap());
    assert!(!rw.write_lock().is_locked().unwrap());
    assert!(peer.bool("x", &format!("read.islocked {name}")));
    assert!(!peer.bool("x", &format!("write.islocked {name}")));
    assert!(!peer.bool("x", &format!("write.trylock {name} -1")));

    let writer = peer.send("w", &format!("write.lock {name}"));
    wait_subscribers(&mut raw, &rw_channel, 1);
    assert_eq!(
        writer.try_wait(Duration::ZERO),
        None,
        "java write.lock returned while two readers hold"
    );

    // The Java reader leaves: the Rust reader's live timeout key keeps the hash.
    peer.ok("r", &format!("read.unlock {name}"));
    assert_eq!(
        hgetall(&mut raw, &name),
        BTreeMap::from([
            ("mode".to_owned(), "read".to_owned()),
            (rust_field.clone(), "1".to_owned()),
        ]),
        "java read unlock with a rust reader left"
    );
    assert!(exists(&mut raw, &rust_timeout), "{rust_timeout} missing");
    let ttl = pttl(&mut raw, &name);
    assert!(
        (1..=WATCHDOG_MS as i64).contains(&ttl),
        "hash PTTL after the java read unlock: {ttl}"
    );
    assert!(!peer.bool("r", &format!("read.isheld {name}")));
    assert!(rw.read_lock().is_held_by_current_thread().unwrap());
    assert_eq!(
        writer.try_wait(Duration::from_millis(300)),
        None,
        "java write.lock returned while the rust reader holds"
    );

    // The Rust reader leaves: the writer wakes.
    let unlocked = Instant::now();
    rust_read.unlock().unwrap();
    let (reply, at) = writer.wait_timed(HANG);
    assert_eq!(reply, Ok(String::new()));
    let latency = at.duration_since(unlocked);
    println!(
        "scenario 12 version {v}: java write.lock returned {:.2} ms after the last (rust) \
         read unlock (hash PTTL was {ttl} ms)",
        ms(latency)
    );
    assert_woken_by_message("java writer", latency);
    let writer_field = format!("{}:write", peer.field(&peer.thread_id("w")));
    assert_eq!(
        hgetall(&mut raw, &name),
        BTreeMap::from([
            ("mode".to_owned(), "write".to_owned()),
            (writer_field, "1".to_owned()),
        ])
    );
    assert!(!exists(&mut raw, &rust_timeout));
    assert!(rw.write_lock().is_locked().unwrap());
    assert!(rw.read_lock().try_lock().unwrap().is_none());
    assert!(rw.write_lock().try_lock().unwrap().is_none());
    peer.ok("w", &format!("write.unlock {name}"));
    assert!(!exists(&mut raw, &name));

    // A Rust writer holds; three Java threads block in read.lock; its unlock wakes them all.
    const READERS: usize = 3;
    let name = unique("s12-writer");
    let rw_channel = rwlock_channel(&name);
    let rw = client.get_read_write_lock(name.clone());
    let write = rw.write_lock().lock().unwrap();
    let h = hgetall(&mut raw, &name);
    assert_eq!(h.len(), 2, "{h:?}");
    assert_eq!(h.get("mode").map(String::as_str), Some("write"), "{h:?}");
    assert!(
        h.iter()
            .any(|(k, c)| k.starts_with(&format!("{}:", client.id()))
                && k.ends_with(":write")
                && c == "1"),
        "{h:?}"
    );
    assert!(peer.bool("x", &format!("write.islocked {name}")));
    assert!(!peer.bool("x", &format!("read.trylock {name} -1")));

    let fields: Vec<String> = (0..READERS)
        .map(|i| peer.field(&peer.thread_id(&format!("r{i}"))))
        .collect();
    let readers: Vec<Pending> = (0..READERS)
        .map(|i| peer.send(&format!("r{i}"), &format!("read.lock {name}")))
        .collect();
    // One Redisson client shares one subscription among its threads, so NUMSUB says 1;
    // each thread must also be parked on the latch, or Redisson itself would not wake it
    // (see Peer::wait_parked).
    wait_subscribers(&mut raw, &rw_channel, 1);
    let threads: Vec<String> = (0..READERS).map(|i| format!("r{i}")).collect();
    let threads: Vec<&str> = threads.iter().map(String::as_str).collect();
    let runs = peer.wait_parked(&threads, "org.redisson.RedissonLock.lock", HANG);
    for (i, r) in readers.iter().enumerate() {
        assert_eq!(
            r.try_wait(Duration::ZERO),
            None,
            "java reader {i} returned while rust writes"
        );
    }
    assert!(rw.write_lock().is_held_by_current_thread().unwrap());

    let unlocked = Instant::now();
    write.unlock().unwrap();
    let latencies: Vec<Duration> = readers
        .into_iter()
        .map(|r| {
            let (reply, at) = r.wait_timed(HANG);
            assert_eq!(reply, Ok(String::new()));
            at.duration_since(unlocked)
        })
        .collect();
    println!(
        "scenario 12 version {v}: {READERS} java read.lock calls (parked per jstack run \
         {runs}) returned {:?} ms after the rust write unlock",
        latencies
            .iter()
            .map(|d| (ms(*d) * 100.0).round() / 100.0)
            .collect::<Vec<_>>()
    );
    for l in &latencies {
        assert_woken_by_message("java reader", *l);
    }
    let mut expected = BTreeMap::from([("mode".to_owned(), "read".to_owned())]);
    expected.extend(fields.iter().map(|f| (f.clone(), "1".to_owned())));
    assert_eq!(hgetall(&mut raw, &name), expected);
    for f in &fields {
        assert!(exists(&mut raw, &read_timeout_key(&name, f, 1)));
    }
    // Rust reads alongside them, but cannot write.
    let shared = rw.read_lock().try_lock().unwrap();
    assert!(shared.is_some(), "rust reader shut out by java readers");
    drop(shared);
    assert!(rw.write_lock().try_lock().unwrap().is_none());
    for i in 0..READERS {
        peer.ok(&format!("r{i}"), &format!("read.unlock {name}"));
    }
    assert!(!exists(&mut raw, &name));
    peer.quit();
}
