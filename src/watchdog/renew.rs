//! The watchdog's scripts: one renewal round per kind of hold (hash locks, read holds,
//! token locks), each for one key's master or, in a cluster, for every key a master
//! serves at once (the per-node scripts, with unflagged twins for servers before 7.0),
//! and the per-node delete of a shut-down client's holds.

use std::sync::LazyLock;

use redis::{Connection, RedisResult, Script};

use crate::protocol::script::{invoke, invoke_per_node, unflagged};

crate::protocol::script::scripts! {
    RENEW => "watchdog/renew.lua",
    RENEW_LOCAL => "watchdog/renew_local.lua",
    DELETE_LOCAL => "watchdog/delete_local.lua",
    RENEW_READS => "watchdog/renew_reads.lua",
    RENEW_READS_LOCAL => "watchdog/renew_reads_local.lua",
    TOKEN_RENEW => "watchdog/token_renew.lua",
    TOKEN_RENEW_LOCAL => "watchdog/token_renew_local.lua",
}

static RENEW_LOCAL_UNFLAGGED: LazyLock<Script> = LazyLock::new(|| {
    unflagged(include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/lua/watchdog/renew_local.lua"
    )))
});
static DELETE_LOCAL_UNFLAGGED: LazyLock<Script> = LazyLock::new(|| {
    unflagged(include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/lua/watchdog/delete_local.lua"
    )))
});
static RENEW_READS_LOCAL_UNFLAGGED: LazyLock<Script> = LazyLock::new(|| {
    unflagged(include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/lua/watchdog/renew_reads_local.lua"
    )))
});
static TOKEN_RENEW_LOCAL_UNFLAGGED: LazyLock<Script> = LazyLock::new(|| {
    unflagged(include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/lua/watchdog/token_renew_local.lua"
    )))
});

/// Renews every `(key, owner)` pair with `lease_ms`; element i of the answer says whether
/// pair i was still held.
pub(crate) fn renew(
    conn: &mut Connection,
    holds: &[(&str, &str)],
    lease_ms: u64,
) -> RedisResult<Vec<bool>> {
    let mut call = RENEW.prepare_invoke();
    call.arg(lease_ms);
    for (key, owner) in holds {
        call.key(*key).arg(*owner);
    }
    let answer: Vec<i64> = invoke(&call, conn)?;
    Ok(answer.into_iter().map(|v| v == 1).collect())
}

/// What a per-node renewal found for one hold: held (renewed), not held, or not on
/// this node (`None`: ask the key's owner).
fn local_answers(answer: Vec<i64>) -> Vec<Option<bool>> {
    answer
        .into_iter()
        .map(|v| match v {
            1 => Some(true),
            0 => Some(false),
            _ => None,
        })
        .collect()
}

/// Deletes `keys`, all served by the cluster master the call goes to, whatever their
/// slots; returns how many existed. `flags`: see [`invoke_per_node`].
pub(crate) fn delete_local(
    conn: &mut Connection,
    keys: &[String],
    flags: bool,
) -> RedisResult<i64> {
    invoke_per_node(
        &DELETE_LOCAL,
        &DELETE_LOCAL_UNFLAGGED,
        flags,
        conn,
        |call| {
            for key in keys {
                call.arg(key);
            }
        },
    )
}

/// [`renew`] for one cluster master, with the locks named in arguments (any slots the
/// node serves); element i is `None` when the node could not look at pair i. `flags`:
/// see [`invoke_per_node`].
pub(crate) fn renew_local(
    conn: &mut Connection,
    holds: &[(&str, &str)],
    lease_ms: u64,
    flags: bool,
) -> RedisResult<Vec<Option<bool>>> {
    invoke_per_node(&RENEW_LOCAL, &RENEW_LOCAL_UNFLAGGED, flags, conn, |call| {
        call.arg(lease_ms);
        for (key, owner) in holds {
            call.arg(*key).arg(*owner);
        }
    })
    .map(local_answers)
}

/// Renews the read holds `(lock name, read owner)`; element i of the answer says
/// whether owner i still held reads. Runs of the same lock share one key pair.
pub(crate) fn renew_reads(
    conn: &mut Connection,
    holds: &[(&str, &str)],
    lease_ms: u64,
) -> RedisResult<Vec<bool>> {
    let mut call = RENEW_READS.prepare_invoke();
    call.arg(lease_ms);
    for run in holds.chunk_by(|a, b| a.0 == b.0) {
        let name = run.first().map_or("", |h| h.0);
        call.key(name)
            .key(crate::protocol::names::read_key_prefix(name));
        call.arg(run.len());
        for (_, owner) in run {
            call.arg(*owner);
        }
    }
    let answer: Vec<i64> = invoke(&call, conn)?;
    Ok(answer.into_iter().map(|v| v == 1).collect())
}

/// [`renew_reads`] for one cluster master, with the locks named in arguments. `flags`:
/// see [`invoke_per_node`].
pub(crate) fn renew_reads_local(
    conn: &mut Connection,
    holds: &[(&str, &str)],
    lease_ms: u64,
    flags: bool,
) -> RedisResult<Vec<Option<bool>>> {
    invoke_per_node(
        &RENEW_READS_LOCAL,
        &RENEW_READS_LOCAL_UNFLAGGED,
        flags,
        conn,
        |call| {
            call.arg(lease_ms);
            for run in holds.chunk_by(|a, b| a.0 == b.0) {
                let name = run.first().map_or("", |h| h.0);
                call.arg(name)
                    .arg(crate::protocol::names::read_key_prefix(name));
                call.arg(run.len());
                for (_, owner) in run {
                    call.arg(*owner);
                }
            }
        },
    )
    .map(local_answers)
}

/// Renews every `(key, token)` pair with `lease_ms`; element i of the answer says whether
/// key i still held token i.
pub(crate) fn renew_tokens(
    conn: &mut Connection,
    holds: &[(&str, &str)],
    lease_ms: u64,
) -> RedisResult<Vec<bool>> {
    let mut call = TOKEN_RENEW.prepare_invoke();
    call.arg(lease_ms);
    for (key, token) in holds {
        call.key(*key).arg(*token);
    }
    let answer: Vec<i64> = invoke(&call, conn)?;
    Ok(answer.into_iter().map(|v| v == 1).collect())
}

/// [`renew_tokens`] for one cluster master, with the keys named in arguments (any slots
/// the node serves); element i is `None` when the node could not look at pair i.
/// `flags`: see [`invoke_per_node`].
pub(crate) fn renew_tokens_local(
    conn: &mut Connection,
    holds: &[(&str, &str)],
    lease_ms: u64,
    flags: bool,
) -> RedisResult<Vec<Option<bool>>> {
    invoke_per_node(
        &TOKEN_RENEW_LOCAL,
        &TOKEN_RENEW_LOCAL_UNFLAGGED,
        flags,
        conn,
        |call| {
            call.arg(lease_ms);
            for (key, token) in holds {
                call.arg(*key).arg(*token);
            }
        },
    )
    .map(local_answers)
}
