//! `redmutex unlock`: release a lock whoever holds it, or one owner's holds only, and
//! tell its waiters the way that kind's unlock tells them, so Java waiters wake too.
//!
//! | kind | `--force` | message |
//! |---|---|---|
//! | lock, fenced lock | delete (the token counter stays) | `"0"` on `redisson_lock__channel:{name}` |
//! | fair lock | delete | `"0"` on the channel of the waiter first in line |
//! | read-write lock | delete | `"1"` on `redisson_rwlock:{name}` (wakes every waiter) |
//! | permit-expirable semaphore | return every acquired permit | the new count on `redisson_sc:{name}` |
//! | count-down latch | delete (count 0: open) | `"0"` on the latch channel |
//! | string-token lock | delete | none (its clients poll) |
//!
//! A semaphore records no holders, so there is nothing to force. A key without a lock's
//! shape (`shape.rs`: an application's hash or string, a list, a stream...) is refused
//! with exit code 1 and what it looks like; a doubtful one (owner-like fields with ids
//! that are no UUIDs, a token of no known format, an integer nobody waits on) only with
//! `--kind`.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::LazyLock;

use redis::Script;

use crate::connect::{ConnectOpts, Redis};
use crate::fail::Failure;
use crate::inspect::{self, Kind, Object, now_ms};
use crate::names;
use crate::presence::Presence;
use crate::status;

/// Declares the scripts the tool runs, each a `lua/` file with the `lua/lib/` files it
/// uses before it, as the library builds its own.
macro_rules! script {
    ($file:literal $(after [$($lib:literal),+])?) => {
        LazyLock::new(|| {
            Script::new(concat!(
                $($(include_str!(concat!("../../../lua/lib/", $lib)),)+)?
                include_str!(concat!("../../../lua/", $file))
            ))
        })
    };
}

static DELETE_AND_PUBLISH: LazyLock<Script> = script!("lock/delete_and_publish.lua");
static FAIR_FORCE: LazyLock<Script> =
    script!("fair/fair_force_release.lua" after ["fair_queue.lua"]);
static RW_FORCE: LazyLock<Script> = script!("rw/rw_force_release.lua");
static RELEASE_OWNER: LazyLock<Script> = script!("cli/release_owner.lua" after ["fair_queue.lua"]);
static RW_RELEASE_OWNER: LazyLock<Script> = script!("cli/rw_release_owner.lua");
static RELEASE_PERMITS: LazyLock<Script> = script!("cli/release_permits.lua");
static RELEASE_TOKEN: LazyLock<Script> = script!("cli/release_token.lua");

/// Release a lock whoever holds it, or one owner's holds, and wake its waiters
///
/// `--force` releases it whoever holds it, `--owner` only that owner's holds; either way
/// the waiters are told as that kind's own unlock tells them, so Java waiters wake too.
/// Asks first (the answer is read from stdin) unless `--yes`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["force", "owner"])))]
pub(crate) struct UnlockArgs {
    /// The object's name.
    name: String,
    /// Release it whoever holds it.
    #[arg(long)]
    force: bool,
    /// Release only this owner's holds: CLIENT-ID:THREAD as `status` shows it (for a
    /// permit-expirable semaphore the permit id, for a string-token lock the token).
    #[arg(long, value_name = "OWNER")]
    owner: Option<String>,
    /// Do not ask.
    #[arg(long, short)]
    yes: bool,
    /// Treat the object as this kind instead of telling it from the keys.
    #[arg(long, value_enum)]
    kind: Option<Kind>,
    #[command(flatten)]
    connect: ConnectOpts,
}

pub(crate) fn run(args: &UnlockArgs) -> Result<(), Failure> {
    let mut redis = Redis::open(&args.connect)?;
    let object = inspect::inspect(&mut redis, &args.name, args.kind)?;
    let action = plan(&object, args.owner.as_deref())?;
    if !args.yes {
        let presence = Presence::read(&mut redis);
        confirm(&status::render(&object, &presence), &action.question)?;
    }
    let released = action.run(&mut redis, &object)?;
    if released == 0 {
        return Err(Failure::nothing_done(format!(
            "`{}` changed meanwhile: nothing was released",
            object.name
        )));
    }
    println!("{}", action.done.replace("{n}", &released.to_string()));
    Ok(())
}

/// What an unlock will do, in words, and how.
struct Action {
    question: String,
    done: String,
    how: How,
}

enum How {
    /// Delete the key and publish `message` on `channel`.
    DeleteAndPublish {
        channel: String,
        message: &'static str,
    },
    FairForce,
    RwForce {
        mode: String,
    },
    Permits {
        ids: Vec<Vec<u8>>,
    },
    Delete,
    Owner {
        owner: String,
    },
    RwOwner {
        owner: String,
    },
    Token {
        token: String,
    },
}

/// What to do with `object`: everything, or `owner`'s holds.
fn plan(object: &Object, owner: Option<&str>) -> Result<Action, Failure> {
    let name = &object.name;
    let kind = object.kind;
    match kind {
        Kind::None => {
            return Err(Failure::nothing_done(format!(
                "`{name}` does not exist: nothing to unlock"
            )));
        }
        Kind::Other => {
            let looks = object.looks_like.as_deref().unwrap_or("not a lock");
            let confirm = match object.could_be {
                Some(kind) => format!(
                    "; if it is a {} all the same, pass --kind {}",
                    kind.describe(),
                    kind.as_str()
                ),
                None => String::new(),
            };
            return Err(Failure::not_a_lock(format!(
                "`{name}` does not look like a lock: it is {looks}; nothing was released{confirm}"
            )));
        }
        Kind::SemaphoreOrLatch => {
            // An integer nobody waits on: a latch to open, a semaphore with nothing to
            // release, or an application's counter. Only the operator knows.
            return Err(Failure::not_a_lock(format!(
                "`{name}` holds an integer that nobody waits on: a semaphore (which records \
                 no holders, so there is nothing to release), a count-down latch, or an \
                 application's counter; nothing was released; pass --kind count-down-latch \
                 if it is a latch to open"
            )));
        }
        Kind::Semaphore => {
            return Err(Failure::usage(format!(
                "`{name}` is a {}: it records no holders, so there is nothing to release; \
                 add permits instead (RSemaphore.addPermits), or pass --kind \
                 count-down-latch if it is a latch",
                kind.describe()
            )));
        }
        _ => {}
    }
    if let Some(owner) = owner {
        return plan_owner(object, owner);
    }
    let held = object.is_held() || (kind == Kind::CountDownLatch && object.count.unwrap_or(0) > 0);
    if !held {
        return Err(Failure::nothing_done(format!(
            "`{name}` is not held: nothing to unlock"
        )));
    }
    let (how, what) = match kind {
        Kind::Lock | Kind::FencedLock => (
            How::DeleteAndPublish {
                channel: names::lock_channel(name),
                message: "0",
            },
            "deleted it and published \"0\" on its channel",
        ),
        Kind::FairLock => (
            How::FairForce,
            "deleted it and told the waiter first in line",
        ),
        Kind::ReadWriteLock => (
            How::RwForce {
                mode: object.mode.clone().unwrap_or_default(),
            },
            "deleted it and published \"1\" (wake every waiter)",
        ),
        Kind::CountDownLatch => (
            How::DeleteAndPublish {
                channel: names::latch_channel(name),
                message: "0",
            },
            "opened it (count 0) and published \"0\" to its waiters",
        ),
        Kind::PermitExpirableSemaphore => (
            How::Permits { ids: Vec::new() },
            "returned {n} permit(s) and published the new count",
        ),
        _ => (How::Delete, "deleted it (its clients poll: no message)"),
    };
    Ok(Action {
        question: format!("Release `{name}` ({}) whoever holds it?", kind.as_str()),
        done: format!("unlocked `{name}`: {what}"),
        how,
    })
}

fn plan_owner(object: &Object, owner: &str) -> Result<Action, Failure> {
    let name = &object.name;
    let owner = owner.strip_suffix(":write").unwrap_or(owner);
    let holds = object.holders.iter().find(|h| h.owner == owner);
    let Some(holder) = holds else {
        return Err(Failure::nothing_done(format!(
            "`{owner}` holds nothing of `{name}`"
        )));
    };
    let how = match object.kind {
        Kind::Lock | Kind::FencedLock | Kind::FairLock => How::Owner {
            owner: owner.to_owned(),
        },
        Kind::ReadWriteLock => How::RwOwner {
            owner: owner.to_owned(),
        },
        Kind::PermitExpirableSemaphore => How::Permits {
            ids: vec![hex_bytes(owner).ok_or_else(|| {
                Failure::usage(format!("`{owner}` is not a permit id (32 hex digits)"))
            })?],
        },
        Kind::TokenLock => How::Token {
            token: owner.to_owned(),
        },
        kind => {
            return Err(Failure::usage(format!(
                "a {} has no owners to release",
                kind.as_str()
            )));
        }
    };
    Ok(Action {
        question: format!(
            "Release the {} hold(s) of `{owner}` on `{name}`?",
            holder.count
        ),
        done: format!("released {{n}} hold(s) of `{owner}` on `{name}`"),
        how,
    })
}

impl Action {
    /// Runs it; the number of holds (or permits, or keys) released.
    fn run(&self, redis: &mut Redis, object: &Object) -> Result<i64, Failure> {
        let name = object.name.as_str();
        let publish = redis.publish_command();
        let now = now_ms();
        let conn = redis.on_key(name);
        let result: redis::RedisResult<i64> = match &self.how {
            How::DeleteAndPublish { channel, message } => DELETE_AND_PUBLISH
                .key(name)
                .key(channel)
                .arg(*message)
                .arg(publish)
                .invoke(conn),
            How::FairForce => FAIR_FORCE
                .key(name)
                .key(names::fair_queue(name))
                .key(names::fair_timeouts(name))
                .key(names::lock_channel(name))
                .arg("0")
                .arg(now)
                .arg(publish)
                .invoke(conn),
            How::RwForce { mode } => RW_FORCE
                .key(name)
                .key(names::rwlock_channel(name))
                .arg("1")
                .arg(publish)
                .arg(mode)
                // 2: the mode changed meanwhile; nothing was deleted.
                .invoke(conn)
                .map(|r: i64| if r == 1 { 1 } else { 0 }),
            How::Permits { ids } => {
                let mut call = RELEASE_PERMITS.prepare_invoke();
                call.key(name)
                    .key(names::semaphore_channel(name))
                    .key(names::permit_timeouts(name))
                    .arg(publish);
                for id in ids {
                    call.arg(id.as_slice());
                }
                call.invoke(conn)
            }
            How::Delete => redis::cmd("DEL").arg(name).query(conn),
            How::Owner { owner } => RELEASE_OWNER
                .key(name)
                .key(names::lock_channel(name))
                .key(names::fair_queue(name))
                .key(names::fair_timeouts(name))
                .arg(owner)
                .arg(publish)
                .arg(if object.kind == Kind::FairLock {
                    "fair"
                } else {
                    "plain"
                })
                .arg(now)
                .invoke(conn),
            How::RwOwner { owner } => RW_RELEASE_OWNER
                .key(name)
                .key(names::rwlock_channel(name))
                .arg(owner)
                .arg(publish)
                .arg(names::read_key_prefix(name))
                .invoke(conn),
            How::Token { token } => RELEASE_TOKEN.key(name).arg(token).invoke(conn),
        };
        result.map_err(|e| Failure::redis_on(&format!("unlocking `{name}`"), e))
    }
}

/// Shows `summary`, asks `question` on stderr and reads the answer from stdin: only
/// `y` or `yes` goes ahead. Without a terminal the answer is read all the same, so a
/// script can pipe it in; end of input is a no.
fn confirm(summary: &str, question: &str) -> Result<(), Failure> {
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "{summary}{question} [y/N] ");
    let _ = err.flush();
    let mut answer = String::new();
    let stdin = std::io::stdin();
    let read = stdin.lock().read_line(&mut answer)?;
    if !stdin.is_terminal() {
        let _ = writeln!(err, "{}", answer.trim());
    }
    if read > 0 && matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
        return Ok(());
    }
    Err(Failure::nothing_done(
        "not confirmed: nothing was released (pass --yes to skip the question)",
    ))
}

/// 32 hex digits as 16 bytes.
fn hex_bytes(text: &str) -> Option<Vec<u8>> {
    if text.len() != 32 || !text.is_ascii() {
        return None;
    }
    (0..16)
        .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok())
        .collect()
}
