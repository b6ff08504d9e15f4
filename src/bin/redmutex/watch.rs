//! `redmutex watch`: every unlock message of the objects, and every acquisition,
//! re-entry, release and expiry, with timestamps, until Ctrl-C.
//!
//! Messages come from subscriptions to each object's channels, plain and sharded (a
//! fair lock's waiter channels by pattern). Changes of the keys come from keyspace
//! notifications when the server has them on; then each notification re-reads the
//! object it names. Otherwise the objects are sampled every `--sample-ms`, and a holder
//! that vanished is told apart by what came before: an unlock message (released), a TTL
//! that had run out (expired), neither (deleted without a message).

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::mpsc::{RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::clock;
use crate::connect::{ConnectOpts, Redis};
use crate::fail::Failure;
use crate::inspect::{self, Kind, Object, now_ms};
use crate::names;

/// The keyspace-notification classes `watch` needs: K (keyspace channel), g (DEL,
/// EXPIRE), $ (strings), h (hashes), l (lists), z (sorted sets), x (expiries).
const NEEDED_EVENTS: &str = "Kg$hlzx";

/// Print unlock messages, acquisitions, re-entries and expiries as they happen
///
/// Subscribes to the objects' channels (plain and sharded) and prints each message with
/// a timestamp; key changes come from keyspace notifications when they are on (`--notify`
/// turns them on), else from sampling. Runs until Ctrl-C.
#[derive(Debug, clap::Args)]
pub(crate) struct WatchArgs {
    /// The objects' names.
    #[arg(required = true)]
    names: Vec<String>,
    /// Turn keyspace notifications on (CONFIG SET notify-keyspace-events) without asking,
    /// when they are off.
    #[arg(long)]
    notify: bool,
    /// Without keyspace notifications, read the objects this often.
    #[arg(long, default_value_t = 100, value_name = "MS")]
    sample_ms: u64,
    /// Print one JSON object per line.
    #[arg(long)]
    json: bool,
    /// Follow who leads the election NAME (the holder of the lock NAME, redmutex or
    /// Redisson) and print each change of leader instead.
    #[arg(long, conflicts_with_all = ["notify", "sample_ms"])]
    leader: bool,
    #[command(flatten)]
    connect: ConnectOpts,
}

/// One watched object: the last state read, and what was heard since.
struct Watched {
    object: Object,
    read_at: Instant,
    /// An unlock message arrived since the last read.
    message_seen: bool,
}

pub(crate) fn run(args: &WatchArgs) -> Result<(), Failure> {
    if args.leader {
        let [name] = args.names.as_slice() else {
            return Err(Failure::usage("--leader follows one election: name one"));
        };
        return crate::leader_watch::run(name, &args.connect, args.json);
    }
    let mut redis = Redis::open(&args.connect)?;
    let notifications = keyspace_events(&mut redis, args)?;
    let mut watched: BTreeMap<String, Watched> = BTreeMap::new();
    for name in &args.names {
        let object = inspect::inspect(&mut redis, name, None)?;
        watched.insert(
            name.clone(),
            Watched {
                object,
                read_at: Instant::now(),
                message_seen: false,
            },
        );
    }
    let db = database(&mut redis);
    // An object's keys and channels share its name as hash tag, so they live on one
    // node: each node gets one subscriber connection for the names it owns (sharded
    // subscriptions and keyspace notifications are heard only there).
    let mut by_node: BTreeMap<usize, Vec<&String>> = BTreeMap::new();
    for name in &args.names {
        by_node.entry(redis.node_of(name)).or_default().push(name);
    }
    let (tx, messages) = std::sync::mpsc::channel();
    let mut sharded = true;
    for group in by_node.values() {
        let mut sub = redis.subscriber(group[0])?;
        let mut commands = Vec::new();
        for name in group {
            for channel in channels_of(name) {
                commands.push(("SUBSCRIBE", channel.clone()));
                commands.push(("SSUBSCRIBE", channel));
            }
            commands.push((
                "PSUBSCRIBE",
                format!("{}:*", glob_escape(&names::lock_channel(name))),
            ));
            if notifications {
                for key in keys_of(name) {
                    commands.push(("SUBSCRIBE", format!("__keyspace@{db}__:{key}")));
                }
            }
        }
        sharded &= subscribe_all(&mut sub, &commands)?;
        listen(sub, tx.clone())?;
    }
    // The listeners hold the only senders: when all of them stop, recv says so.
    drop(tx);
    let how = if notifications {
        "keyspace notifications".to_owned()
    } else {
        format!("sampling every {} ms", args.sample_ms)
    };
    let ready = format!(
        "watching {} object(s) on {} ({}{}); Ctrl-C to stop",
        args.names.len(),
        redis.shown(),
        how,
        if sharded {
            ", plain and sharded channels"
        } else {
            ", plain channels"
        }
    );
    if args.json {
        println!(
            "{}",
            json!({"time": clock::timestamp(now_ms()), "event": "watching",
                   "names": args.names, "notifications": notifications, "sharded": sharded})
        );
    } else {
        println!("{ready}");
        for w in watched.values() {
            print!(
                "{}",
                crate::status::render(&w.object, &crate::presence::Presence::default())
            );
        }
    }
    let sample = Duration::from_millis(args.sample_ms.max(10));
    let wait = if notifications {
        Duration::from_secs(1)
    } else {
        sample
    };
    let mut next_sample = Instant::now() + sample;
    loop {
        match messages.recv_timeout(wait) {
            Ok(Ok((channel, payload))) => {
                on_message(&mut redis, &mut watched, &channel, &payload, args.json)?;
            }
            Ok(Err(e)) => return Err(Failure::redis_on("watching", e)),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                return Err(Failure::runtime("the subscriber thread stopped"));
            }
        }
        if !notifications && Instant::now() >= next_sample {
            let mut fresh = Vec::new();
            for name in &args.names {
                fresh.push(inspect::inspect(&mut redis, name, None)?);
            }
            // An unlock message published with a change this sample saw is on its way
            // (Redis queued it before answering our reads): hear it before judging how
            // a holder left.
            while let Ok(heard) = messages.recv_timeout(Duration::from_millis(10)) {
                let (channel, payload) = heard.map_err(|e| Failure::redis_on("watching", e))?;
                on_message(&mut redis, &mut watched, &channel, &payload, args.json)?;
            }
            for object in fresh {
                apply(&mut watched, object, "sample", args.json);
            }
            next_sample = Instant::now() + sample;
        }
    }
}

/// Reads the subscriber connection on a thread of its own, with no read timeout: a
/// timed-out read would make redis-rs skip the next reply, which here is a message.
fn listen(
    mut sub: redis::Connection,
    tx: Sender<redis::RedisResult<(String, String)>>,
) -> Result<(), Failure> {
    std::thread::Builder::new()
        .name("redmutex-watch".into())
        .spawn(move || {
            loop {
                let heard = match sub.recv_response() {
                    Ok(value) => match message(value) {
                        Some(m) => Ok(m),
                        None => continue,
                    },
                    Err(e) => Err(e),
                };
                let stop = heard.is_err();
                if tx.send(heard).is_err() || stop {
                    return;
                }
            }
        })?;
    Ok(())
}

/// Whether keyspace notifications are on (turning them on if asked to).
fn keyspace_events(redis: &mut Redis, args: &WatchArgs) -> Result<bool, Failure> {
    // Every node's own setting: in a cluster a key's events are heard only on its node,
    // so one node with notifications off would silence the names it serves.
    let mut current = Vec::new();
    for conn in redis.nodes() {
        let flags: Option<(String, String)> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("notify-keyspace-events")
            .query(conn)
            .ok();
        let Some((_, flags)) = flags else {
            eprintln!("redmutex: cannot read notify-keyspace-events (CONFIG refused); sampling");
            return Ok(false);
        };
        current.push(flags);
    }
    let Some(off) = current.iter().find(|flags| !covers(flags)).cloned() else {
        return Ok(true);
    };
    let wanted = union(&off);
    let ask = !args.notify && std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let enable = args.notify
        || (ask && {
            eprint!(
                "keyspace notifications are off (notify-keyspace-events \"{off}\"); set them \
                 to \"{wanted}\" so acquisitions and expiries show at once? [y/N] "
            );
            let mut answer = String::new();
            std::io::stdin().read_line(&mut answer).is_ok()
                && matches!(answer.trim(), "y" | "Y" | "yes")
        });
    if !enable {
        eprintln!(
            "redmutex: keyspace notifications are off; sampling every {} ms (--notify turns \
             them on: CONFIG SET notify-keyspace-events {wanted})",
            args.sample_ms
        );
        return Ok(false);
    }
    for (conn, flags) in redis.nodes().into_iter().zip(&current) {
        if covers(flags) {
            continue;
        }
        let wanted = union(flags);
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("notify-keyspace-events")
            .arg(&wanted)
            .query::<()>(conn)
            .map_err(|e| Failure::redis_on("turning keyspace notifications on", e))?;
        eprintln!("redmutex: set notify-keyspace-events to \"{wanted}\" (it was \"{flags}\")");
    }
    Ok(true)
}

/// Whether `flags` deliver every event `watch` reads on the keyspace channel.
fn covers(flags: &str) -> bool {
    flags.contains('K')
        && (flags.contains('A') || NEEDED_EVENTS.chars().skip(1).all(|c| flags.contains(c)))
}

/// `flags` plus what `watch` needs.
fn union(flags: &str) -> String {
    let mut out: String = flags.to_owned();
    for c in NEEDED_EVENTS.chars() {
        if !out.contains(c) {
            out.push(c);
        }
    }
    out
}

/// The database the connection uses (keyspace channels name it).
fn database(redis: &mut Redis) -> i64 {
    let info: Option<String> = redis::cmd("CLIENT")
        .arg("INFO")
        .query(redis.nodes().remove(0))
        .ok();
    info.and_then(|i| {
        i.split(' ')
            .find_map(|kv| kv.strip_prefix("db=")?.trim().parse().ok())
    })
    .unwrap_or(0)
}

/// Every channel any kind of object called `name` publishes on (fair waiters' own
/// channels are matched by pattern instead).
fn channels_of(name: &str) -> Vec<String> {
    vec![
        names::lock_channel(name),
        names::rwlock_channel(name),
        names::semaphore_channel(name),
        names::latch_channel(name),
    ]
}

/// The keys whose changes matter for `name`.
fn keys_of(name: &str) -> Vec<String> {
    vec![
        name.to_owned(),
        names::fair_queue(name),
        names::permit_timeouts(name),
    ]
}

/// `text` with glob characters escaped, for PSUBSCRIBE.
fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Sends every subscription, one channel per command, and reads their confirmations
/// before returning, so nothing published afterwards can be missed. Returns whether the
/// server took the sharded ones (Redis 7.0 and later).
fn subscribe_all(
    sub: &mut redis::Connection,
    commands: &[(&str, String)],
) -> Result<bool, Failure> {
    for (command, channel) in commands {
        let packed = redis::cmd(command).arg(channel).get_packed_command();
        sub.send_packed_command(&packed).map_err(Failure::redis)?;
    }
    let mut sharded = true;
    for (command, _) in commands {
        match sub.recv_response() {
            // A server before 7.0 answers SSUBSCRIBE with an error reply, which arrives
            // as a value here: plain channels only.
            Ok(redis::Value::ServerError(_)) if *command == "SSUBSCRIBE" => sharded = false,
            Ok(redis::Value::ServerError(e)) => {
                return Err(Failure::redis_on(
                    &format!("{command} failed"),
                    redis::RedisError::from(e),
                ));
            }
            Ok(_) => {}
            Err(e) if *command == "SSUBSCRIBE" && e.kind() != redis::ErrorKind::Io => {
                sharded = false;
            }
            Err(e) => return Err(Failure::redis_on(&format!("{command} failed"), e)),
        }
    }
    Ok(sharded)
}

/// A published message: (channel, payload).
fn message(value: redis::Value) -> Option<(String, String)> {
    let msg = redis::Msg::from_owned_value(value.clone()).or_else(|| smessage(value))?;
    Some((
        msg.get_channel_name().to_owned(),
        String::from_utf8_lossy(msg.get_payload_bytes()).into_owned(),
    ))
}

/// A sharded message (`smessage`) arrives in RESP2 as an array redis-rs does not parse.
fn smessage(value: redis::Value) -> Option<redis::Msg> {
    let redis::Value::Array(items) = value else {
        return None;
    };
    let [kind, channel, payload] = <[redis::Value; 3]>::try_from(items).ok()?;
    let kind: String = redis::from_redis_value(kind).ok()?;
    if kind != "smessage" {
        return None;
    }
    redis::Msg::from_owned_value(redis::Value::Array(vec![
        redis::Value::BulkString(b"message".to_vec()),
        channel,
        payload,
    ]))
}

fn on_message(
    redis: &mut Redis,
    watched: &mut BTreeMap<String, Watched>,
    channel: &str,
    payload: &str,
    json: bool,
) -> Result<(), Failure> {
    if let Some(key) = channel
        .strip_prefix("__keyspace@")
        .and_then(|rest| rest.split_once("__:"))
        .map(|(_, k)| k)
    {
        // A keyspace notification: the payload is the event.
        let Some(name) = watched
            .keys()
            .find(|n| keys_of(n).iter().any(|k| k == key))
            .cloned()
        else {
            return Ok(());
        };
        let source = match payload {
            "expired" => "expired",
            "del" => "del",
            _ => "keyspace",
        };
        return refresh(redis, watched, &name, source, json);
    }
    let Some((name, what)) = watched.keys().find_map(|n| describe(n, channel, payload)) else {
        return Ok(());
    };
    let time = now_ms();
    if json {
        println!(
            "{}",
            json!({"time": clock::timestamp(time), "time_ms": time, "name": name,
                   "event": "message", "channel": channel, "message": payload, "meaning": what})
        );
    } else {
        println!(
            "{}  {name}  message \"{payload}\" on {channel}: {what}",
            clock::timestamp(time)
        );
    }
    if let Some(w) = watched.get_mut(&name) {
        w.message_seen = true;
    }
    Ok(())
}

/// Which watched object a message on `channel` concerns, and what it means.
fn describe(name: &str, channel: &str, payload: &str) -> Option<(String, String)> {
    let what = if channel == names::lock_channel(name) {
        "unlock (wakes one waiter)".to_owned()
    } else if channel.starts_with(&format!("{}:", names::lock_channel(name))) {
        "fair unlock: this waiter is next".to_owned()
    } else if channel == names::rwlock_channel(name) {
        match payload {
            "1" => "write unlock (wakes every waiter)".to_owned(),
            _ => "read unlock (wakes one waiter)".to_owned(),
        }
    } else if channel == names::semaphore_channel(name) {
        format!("permits released: {payload} available")
    } else if channel == names::latch_channel(name) {
        match payload {
            "0" => "latch opened (count 0)".to_owned(),
            _ => "latch count set".to_owned(),
        }
    } else {
        return None;
    };
    Some((name.to_owned(), what))
}

/// Reads `name` again and prints what changed since the last read. `source` says what
/// prompted it: a keyspace event (`expired`, `del`, other) or a sample.
fn refresh(
    redis: &mut Redis,
    watched: &mut BTreeMap<String, Watched>,
    name: &str,
    source: &str,
    json: bool,
) -> Result<(), Failure> {
    let object = inspect::inspect(redis, name, None)?;
    apply(watched, object, source, json);
    Ok(())
}

/// Prints what changed from the last state read of `object`'s name, and keeps it.
fn apply(watched: &mut BTreeMap<String, Watched>, object: Object, source: &str, json: bool) {
    let name = object.name.clone();
    let Some(w) = watched.get_mut(&name) else {
        return;
    };
    let elapsed = w.read_at.elapsed().as_millis() as i64;
    for (event, owner, count, text) in changes(&w.object, &object, source, w.message_seen, elapsed)
    {
        let time = now_ms();
        if json {
            println!(
                "{}",
                json!({"time": clock::timestamp(time), "time_ms": time, "name": name,
                       "event": event, "owner": owner, "count": count,
                       "kind": object.kind.as_str(), "ttl_ms": object.ttl_ms,
                       "source": if source == "sample" { "sample" } else { "keyspace" }})
            );
        } else {
            println!("{}  {name}  {text}", clock::timestamp(time));
        }
    }
    w.object = object;
    w.read_at = Instant::now();
    w.message_seen = false;
}

/// One change: (event, owner, count, words).
type Change = (&'static str, Option<String>, Option<i64>, String);

/// What changed from `old` to `new`.
fn changes(
    old: &Object,
    new: &Object,
    source: &str,
    message_seen: bool,
    elapsed_ms: i64,
) -> Vec<Change> {
    let mut out = Vec::new();
    let counts = |o: &Object| -> BTreeMap<(String, Option<&'static str>), i64> {
        o.holders
            .iter()
            .map(|h| ((h.owner.clone(), h.mode), h.count))
            .collect()
    };
    let (before, after) = (counts(old), counts(new));
    let who = |owner: &str, mode: Option<&str>| {
        let (id, thread) = inspect::split_owner(owner);
        let base = match (id, thread) {
            (Some(id), Some(t)) => format!("{id} : {t}"),
            _ => owner.to_owned(),
        };
        match mode {
            Some(m) => format!("{base} ({m})"),
            None => base,
        }
    };
    for ((owner, mode), count) in &after {
        let w = who(owner, *mode);
        match before.get(&(owner.clone(), *mode)) {
            None => out.push((
                "acquired",
                Some(owner.clone()),
                Some(*count),
                format!("acquired by {w} (holds {count})"),
            )),
            Some(c) if count > c => out.push((
                "reentered",
                Some(owner.clone()),
                Some(*count),
                format!("re-entered by {w} (holds {count})"),
            )),
            Some(c) if count < c => out.push((
                "released-one",
                Some(owner.clone()),
                Some(*count),
                format!("one hold released by {w} (holds {count})"),
            )),
            _ => {}
        }
    }
    for ((owner, mode), count) in &before {
        if after.contains_key(&(owner.clone(), *mode)) {
            continue;
        }
        let w = who(owner, *mode);
        let expired = source == "expired"
            || (source == "sample"
                && !message_seen
                && old.ttl_ms.is_some_and(|t| t >= 0 && t <= elapsed_ms + 50));
        let (event, text) = if expired {
            (
                "expired",
                format!("expired: the lease of {w} ran out (held {count})"),
            )
        } else if message_seen || source == "del" || source == "keyspace" {
            ("released", format!("released by {w} (or forced)"))
        } else {
            (
                "gone",
                format!("{w} is gone without an unlock message (deleted)"),
            )
        };
        out.push((event, Some(owner.clone()), Some(*count), text));
    }
    if matches!(old.kind, Kind::FairLock) || matches!(new.kind, Kind::FairLock) {
        let before: Vec<&str> = old.queue.iter().map(|q| q.owner.as_str()).collect();
        let after: Vec<&str> = new.queue.iter().map(|q| q.owner.as_str()).collect();
        for (i, owner) in after.iter().enumerate() {
            if !before.contains(owner) {
                out.push((
                    "queued",
                    Some((*owner).to_owned()),
                    None,
                    format!("{} queued (position {})", who(owner, None), i + 1),
                ));
            }
        }
        for owner in before.iter().filter(|o| !after.contains(o)) {
            out.push((
                "dequeued",
                Some((*owner).to_owned()),
                None,
                format!("{} left the queue", who(owner, None)),
            ));
        }
    }
    if old.count != new.count && new.count.is_some() {
        out.push((
            "count",
            None,
            new.count,
            format!(
                "count {} -> {}",
                old.count.map_or("-".to_owned(), |c| c.to_string()),
                new.count.unwrap_or(0)
            ),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyspace_flags_are_checked_and_merged() {
        assert!(!covers(""));
        assert!(covers("KA"));
        assert!(covers("Kg$hlzx"));
        assert!(!covers("Ex"));
        assert_eq!(union("Ex"), "ExKg$hlz");
    }

    #[test]
    fn glob_characters_are_escaped() {
        assert_eq!(glob_escape("a*b?[c]"), "a\\*b\\?\\[c\\]");
    }
}
