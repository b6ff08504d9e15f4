//! `redmutex status`: who holds what, since when, who waits, and whether each holder's
//! client is still connected.

use serde_json::{Value, json};

use crate::clock;
use crate::connect::{ConnectOpts, Redis};
use crate::fail::Failure;
use crate::inspect::{self, Holder, Kind, Object};
use crate::presence::{Connected, Presence};

/// Show who holds which lock, for how long, and who waits
///
/// For each object: its kind (told from the keys), holders as `client-id : thread` with
/// hold counts, TTL, fencing token, fair-queue order with each waiter's deadline, and
/// whether each holder's client is still connected (redmutex clients name their
/// connections after their id; a Redisson holder is "unknown" unless nothing else is
/// connected).
#[derive(Debug, clap::Args)]
pub(crate) struct StatusArgs {
    /// The objects' names (their Redis keys).
    #[arg(required_unless_present = "scan", conflicts_with = "scan")]
    names: Vec<String>,
    /// Show every object with a key matching this SCAN pattern instead (e.g. 'orders:*').
    #[arg(long, value_name = "PATTERN")]
    scan: Option<String>,
    /// Read the objects as this kind instead of telling it from the keys (an integer
    /// string can be a semaphore or a latch).
    #[arg(long, value_enum)]
    kind: Option<Kind>,
    /// Print JSON: an array with one element per object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    connect: ConnectOpts,
}

pub(crate) fn run(args: &StatusArgs) -> Result<(), Failure> {
    let mut redis = Redis::open(&args.connect)?;
    let names = match &args.scan {
        Some(pattern) => inspect::scan(&mut redis, pattern)?,
        None => args.names.clone(),
    };
    let mut objects = Vec::new();
    for name in &names {
        let object = inspect::inspect(&mut redis, name, args.kind)?;
        // A scan lists lock-family objects only.
        if args.scan.is_some() && matches!(object.kind, Kind::Other | Kind::None) {
            continue;
        }
        objects.push(object);
    }
    let presence = Presence::read(&mut redis);
    if args.json {
        let all: Vec<Value> = objects.iter().map(|o| to_json(o, &presence)).collect();
        println!("{}", Value::Array(all));
        return Ok(());
    }
    if objects.is_empty() {
        println!(
            "no lock-family object matches `{}`",
            args.scan.as_deref().unwrap_or("")
        );
    }
    for object in &objects {
        print!("{}", render(object, &presence));
    }
    Ok(())
}

/// One object as JSON.
pub(crate) fn to_json(object: &Object, presence: &Presence) -> Value {
    let holders: Vec<Value> = object
        .holders
        .iter()
        .map(|h| {
            json!({
                "owner": h.owner,
                "client_id": h.client_id,
                "thread": h.thread,
                "count": h.count,
                "mode": h.mode,
                "leases_ms": h.leases_ms,
                "connected": h.client_id.as_deref().and_then(|id| presence.of(id).as_json()),
            })
        })
        .collect();
    let queue: Vec<Value> = object
        .queue
        .iter()
        .map(|w| {
            json!({
                "owner": w.owner,
                "client_id": w.client_id,
                "thread": w.thread,
                "deadline_ms": w.deadline_ms,
                "deadline_in_ms": w.deadline_ms.map(|d| d - object.read_at_ms),
                "connected": w.client_id.as_deref().and_then(|id| presence.of(id).as_json()),
            })
        })
        .collect();
    json!({
        "name": object.name,
        "kind": object.kind.as_str(),
        "key_type": object.key_type,
        "ttl_ms": object.ttl_ms,
        "held": object.is_held(),
        "holders": holders,
        "queue": queue,
        "mode": object.mode,
        "token": object.token,
        "count": object.count,
        "subscribers": object.subscribers,
        "looks_like": object.looks_like,
        "could_be": object.could_be.map(Kind::as_str),
    })
}

/// One object for people, several lines.
pub(crate) fn render(object: &Object, presence: &Presence) -> String {
    let mut out = format!("{}  {}", object.name, object.kind.describe());
    let state = match (object.kind, object.is_held()) {
        (Kind::None, _) => String::new(),
        (Kind::Other, _) => match (&object.looks_like, object.could_be) {
            (Some(looks), Some(kind)) => {
                format!(
                    ": {looks} (pass --kind {} to read it as one)",
                    kind.as_str()
                )
            }
            (Some(looks), None) => format!(": {looks}"),
            (None, _) => format!(" (a {} key)", object.key_type),
        },
        (Kind::Semaphore | Kind::SemaphoreOrLatch, _) => {
            format!(": {} available", object.count.unwrap_or(0))
        }
        (Kind::CountDownLatch, _) => format!(": count {}", object.count.unwrap_or(0)),
        (Kind::PermitExpirableSemaphore, _) => format!(
            ": {} available, {} acquired",
            object.count.unwrap_or(0),
            object.holders.len()
        ),
        (_, true) => ": held".to_owned(),
        (_, false) => ": free".to_owned(),
    };
    out.push_str(&state);
    match object.ttl_ms {
        Some(-1) => out.push_str(", NO TTL: it never expires"),
        Some(ms) => out.push_str(&format!(", TTL {}", clock::span(ms))),
        None => {}
    }
    if let Some(mode) = &object.mode {
        out.push_str(&format!(", mode {mode}"));
    }
    if let Some(token) = object.token {
        out.push_str(&format!(", last fencing token {token}"));
    }
    out.push('\n');
    if object.kind == Kind::SemaphoreOrLatch {
        out.push_str(
            "  an integer that nobody waits on; pass --kind semaphore or --kind \
             count-down-latch to say which\n",
        );
    }
    for holder in &object.holders {
        out.push_str(&holder_line(object.kind, holder, presence));
    }
    for (i, waiter) in object.queue.iter().enumerate() {
        let who = waiter
            .client_id
            .as_deref()
            .map_or(waiter.owner.clone(), |id| {
                format!("{id} : {}", waiter.thread.unwrap_or(0))
            });
        let slot = match waiter.deadline_ms {
            Some(d) if d <= object.read_at_ms => format!(
                "slot ended {} ago (stale: dropped at the next acquire)",
                clock::span(object.read_at_ms - d)
            ),
            Some(d) => format!(
                "slot ends in {} ({})",
                clock::span(d - object.read_at_ms),
                clock::timestamp(d)
            ),
            None => "no slot".to_owned(),
        };
        let connected = waiter
            .client_id
            .as_deref()
            .map(|id| connected_text(&presence.of(id)))
            .unwrap_or_default();
        out.push_str(&format!("  waiter {}. {who}  {slot}{connected}\n", i + 1));
    }
    if object.subscribers > 0 {
        out.push_str(&format!(
            "  {} client(s) subscribed to its channel\n",
            object.subscribers
        ));
    }
    if object.holders.iter().any(|h| h.client_id.is_some()) {
        out.push_str(&others_line(presence));
    }
    out
}

fn holder_line(kind: Kind, holder: &Holder, presence: &Presence) -> String {
    match kind {
        Kind::PermitExpirableSemaphore => {
            let lease = match holder.leases_ms.first().copied().flatten() {
                Some(ms) => format!("lease ends in {}", clock::span(ms)),
                None => "no lease".to_owned(),
            };
            format!("  permit {}  {lease}\n", holder.owner)
        }
        Kind::TokenLock => format!("  token {}\n", holder.owner),
        _ => {
            let who = match (&holder.client_id, holder.thread) {
                (Some(id), Some(thread)) => format!("{id} : {thread}"),
                _ => holder.owner.clone(),
            };
            let mode = holder.mode.map(|m| format!("{m} ")).unwrap_or_default();
            let mut line = format!("  {mode}holder {who}  holds {}", holder.count);
            if !holder.leases_ms.is_empty() {
                let leases: Vec<String> = holder
                    .leases_ms
                    .iter()
                    .map(|l| match l {
                        Some(ms) if *ms >= 0 => clock::span(*ms),
                        _ => "gone".to_owned(),
                    })
                    .collect();
                line.push_str(&format!(" (read holds left: {})", leases.join(", ")));
            }
            if let Some(id) = &holder.client_id {
                line.push_str(&connected_text(&presence.of(id)));
            }
            line.push('\n');
            line
        }
    }
}

fn connected_text(connected: &Connected) -> String {
    match connected {
        Connected::Yes(name) => format!("  connected ({name})"),
        Connected::No => {
            "  NOT CONNECTED: its process is gone; the lock ends with its TTL".to_owned()
        }
        Connected::Unknown => "  connected: unknown".to_owned(),
    }
}

/// Who else is connected, when some holder's presence could not be told.
fn others_line(presence: &Presence) -> String {
    if let Some(why) = presence.unavailable() {
        return format!("  (CLIENT LIST refused: {why})\n");
    }
    let others = presence.others();
    if others.is_empty() && presence.unnamed() == 0 {
        return String::new();
    }
    let mut parts: Vec<String> = others.iter().map(|(n, c)| format!("{n} ×{c}")).collect();
    if presence.unnamed() > 0 {
        parts.push(format!("{} unnamed", presence.unnamed()));
    }
    format!(
        "  other connections (a Redisson holder is one of these only if it set clientName): {}\n",
        parts.join(", ")
    )
}
