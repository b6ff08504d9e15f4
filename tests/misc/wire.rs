//! The on-wire layout, read back with raw commands: what a Redisson client sees.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support::raw::{await_numsub, exists, lock_channel, pttl};
use crate::support::{TestServer, unique};

/// Every message published on `channel` while `f` runs. A closing "end" message marks
/// where `f` stopped: messages on one channel arrive in order.
fn published_during(server: &TestServer, channel: &str, f: impl FnOnce()) -> Vec<String> {
    let (ready_tx, ready) = mpsc::channel();
    let mut conn = server.conn();
    let owned = channel.to_owned();
    let listener = std::thread::spawn(move || {
        let mut ps = conn.as_pubsub();
        ps.subscribe(&owned).unwrap();
        ready_tx.send(()).unwrap();
        let mut got = Vec::new();
        loop {
            let payload: String = ps.get_message().unwrap().get_payload().unwrap();
            if payload == "end" {
                return got;
            }
            got.push(payload);
        }
    });
    ready.recv().unwrap();
    f();
    let _: i64 = redis::cmd("PUBLISH")
        .arg(channel)
        .arg("end")
        .query(&mut server.conn())
        .unwrap();
    listener.join().unwrap()
}

#[test]
fn the_lock_is_a_hash_with_one_owner_field_and_the_watchdog_ttl() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client();
    let lock = client.get_lock(unique("wire"));
    let a = lock.lock().unwrap();
    let b = lock.lock().unwrap();
    let fields: Vec<(String, String)> = redis::cmd("HGETALL")
        .arg(lock.name())
        .query(&mut raw)
        .unwrap();
    assert_eq!(fields.len(), 1, "{fields:?}");
    let (field, count) = &fields[0];
    assert_eq!(count, "2");
    let (id, thread) = field.rsplit_once(':').unwrap();
    assert_eq!(id, client.id());
    assert!(
        thread.parse::<u64>().is_ok(),
        "thread part must be decimal: {field}"
    );
    let ttl = pttl(&mut raw, lock.name());
    assert!((29_000..=30_000).contains(&ttl), "{ttl}");
    let kind: String = redis::cmd("TYPE").arg(lock.name()).query(&mut raw).unwrap();
    assert_eq!(kind, "hash");
    b.unlock().unwrap();
    a.unlock().unwrap();
}

#[test]
fn client_ids_are_fresh_lowercase_hyphenated_uuids() {
    let server = TestServer::start();
    let (a, b) = (server.client(), server.client());
    for id in [a.id(), b.id()] {
        assert_eq!(id.len(), 36);
        assert_eq!(id.matches('-').count(), 4);
        assert!(
            id.chars()
                .all(|c| c == '-' || c.is_ascii_digit() || c.is_ascii_lowercase())
        );
        assert!(uuid_like(id));
    }
    assert_ne!(a.id(), b.id());
}

fn uuid_like(id: &str) -> bool {
    let parts: Vec<usize> = id.split('-').map(str::len).collect();
    parts == [8, 4, 4, 4, 12]
}

#[test]
fn threads_of_one_client_are_distinct_owners() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let client = server.client();
    let name = unique("wire");
    let mut fields = Vec::new();
    for _ in 0..3 {
        let lock = client.get_lock(name.clone());
        let name = name.clone();
        let field = std::thread::scope(|s| {
            s.spawn(|| {
                let g = lock.lock().unwrap();
                let mut raw = server.conn();
                let f: Vec<String> = redis::cmd("HKEYS").arg(&name).query(&mut raw).unwrap();
                g.unlock().unwrap();
                f[0].clone()
            })
            .join()
            .unwrap()
        });
        fields.push(field);
    }
    fields.sort();
    fields.dedup();
    assert_eq!(fields.len(), 3, "{fields:?}");
    assert!(!exists(&mut raw, &name));
}

/// "0" is published exactly once, on the full release only.
#[test]
fn only_the_full_release_publishes_one_zero() {
    let server = TestServer::start();
    let lock = server.client().get_lock(unique("wire"));
    let seen = published_during(&server, &lock_channel(lock.name()), || {
        let a = lock.lock().unwrap();
        let b = lock.lock().unwrap();
        b.unlock().unwrap(); // partial
        a.unlock().unwrap(); // full
    });
    assert_eq!(seen, vec!["0".to_owned()]);
}

/// Names that already contain a brace keep their own hash tag in the channel name.
#[test]
fn braced_names_publish_on_the_unwrapped_channel() {
    let server = TestServer::start();
    let name = format!("{{{}}}:orders", unique("tag"));
    let lock = server.client().get_lock(name.clone());
    let seen = published_during(&server, &format!("redisson_lock__channel:{name}"), || {
        lock.lock().unwrap().unlock().unwrap();
    });
    assert_eq!(seen, vec!["0".to_owned()]);
}

/// The unlock latch is written by the release script and then deleted (off the caller's
/// path); none is left behind.
#[test]
fn unlock_latches_are_written_then_cleaned_up() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let lock = server.client().get_lock(unique("wire"));
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg("K$g")
        .query(&mut raw)
        .unwrap();
    let pattern = format!("__keyspace@0__:redisson_unlock_latch:{{{}}}:*", lock.name());
    let mut events = server.conn();
    let mut ps = events.as_pubsub();
    ps.psubscribe(&pattern).unwrap();
    for _ in 0..5 {
        lock.lock().unwrap().unlock().unwrap();
    }
    let mut sets = 0;
    let mut dels = 0;
    ps.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    while dels < 5 {
        let msg = ps.get_message().unwrap();
        let event: String = msg.get_payload().unwrap();
        let channel = msg.get_channel_name().to_owned();
        assert!(
            channel.len() == pattern.len() - 1 + 32,
            "latch ids are 32 hex chars: {channel}"
        );
        match event.as_str() {
            "set" => sets += 1,
            "del" => dels += 1,
            _ => {}
        }
    }
    assert_eq!(sets, 5);
    let left: Vec<String> = redis::cmd("KEYS")
        .arg("redisson_unlock_latch:*")
        .query(&mut raw)
        .unwrap();
    assert!(left.is_empty(), "{left:?}");
}

/// A release whose reply was lost is sent again under the same latch, and the retry
/// replays the first outcome. Its latch then outlives the call (to its PX): the first try
/// was answered late, so another try of the request could still be on its way, and only
/// the latch makes it replay instead of taking off a hold the thread takes next. A latch
/// whose tries all answered is deleted as before.
#[test]
fn a_release_whose_reply_was_lost_keeps_its_latch_to_its_expiry() {
    let server = TestServer::start();
    let proxy = crate::support::proxy::FaultProxy::start(server.port());
    let client = redmutex::Client::new(
        redmutex::Config::builder()
            .address(proxy.url())
            .response_timeout(Duration::from_millis(300))
            .pool_min_idle(Some(0))
            .build(),
    )
    .unwrap();
    let mut raw = server.conn();
    let lock = client.get_lock(unique("wire-lost-release"));
    let latches = |raw: &mut redis::Connection| -> Vec<String> {
        redis::cmd("KEYS")
            .arg(format!("redisson_unlock_latch:{{{}}}:*", lock.name()))
            .query(raw)
            .unwrap()
    };
    let guard = lock.lock().unwrap();
    proxy.drop_next_reply();
    guard.unlock().unwrap();
    assert!(proxy.reply_dropped());
    assert!(!exists(&mut raw, lock.name()));
    let kept = latches(&mut raw);
    assert_eq!(kept.len(), 1, "{kept:?}");
    // A release answered at once: its latch is queued for deletion after the first
    // one would have been (the watchdog thread deletes them in order), so once it is
    // gone the first one was not queued.
    lock.lock().unwrap().unlock().unwrap();
    crate::support::eventually(
        Duration::from_secs(10),
        "the answered latch deleted",
        || latches(&mut raw) == kept,
    );
    let left = pttl(&mut raw, &kept[0]);
    assert!(left > 0, "the lost reply's latch is gone: {left}");
    let outcome: String = redis::cmd("GET").arg(&kept[0]).query(&mut raw).unwrap();
    assert_eq!(outcome, "1");
}

/// A Java client's release is a DEL plus PUBLISH "0": a waiter wakes on the message,
/// long before the holder's 30 s TTL could have expired.
#[test]
fn a_waiter_wakes_on_a_foreign_unlock_message() {
    let server = TestServer::start();
    let mut raw = server.conn();
    let lock = server.client().get_lock(unique("wire"));
    let channel = lock_channel(lock.name());
    let _: () = redis::pipe()
        .cmd("HSET")
        .arg(lock.name())
        .arg("3f1c0000-0000-4000-8000-000000000000:57")
        .arg(1)
        .cmd("PEXPIRE")
        .arg(lock.name())
        .arg(30_000)
        .query(&mut raw)
        .unwrap();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let started = Instant::now();
            let guard = lock
                .try_lock_for(Duration::from_secs(60))
                .unwrap()
                .expect("acquired");
            let waited = started.elapsed();
            guard.unlock().unwrap();
            waited
        });
        await_numsub(&mut raw, &channel, 1);
        let _: () = redis::pipe()
            .cmd("DEL")
            .arg(lock.name())
            .cmd("PUBLISH")
            .arg(&channel)
            .arg("0")
            .query(&mut raw)
            .unwrap();
        let waited = waiter.join().unwrap();
        assert!(
            waited < Duration::from_secs(15),
            "woke by TTL, not by the message: {waited:?}"
        );
    });
}
