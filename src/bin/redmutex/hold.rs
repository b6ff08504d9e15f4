//! A lock holder to crash or freeze from tests: takes a lock, says so on stdout, then
//! either just holds it (until killed, or until stdin closes) or works in a loop that
//! shows what a fenced and an unfenced writer do once the lock is lost. With
//! `--kind token` the lock is the plain string-token lock, which only holds.

use std::io::{BufRead, Write};
use std::time::Duration;

use redmutex::{Client, Config};

use crate::args::Args;

pub(crate) fn run(args: &Args) -> Result<(), String> {
    let url = args.required("url")?;
    let name = args.required("lock")?;
    let mut config = Config::builder().address(url);
    if let Some(ms) = args.text("watchdog-ms") {
        let ms: u64 = ms
            .parse()
            .map_err(|_| "`--watchdog-ms` takes milliseconds")?;
        config = config.lock_watchdog_timeout(Duration::from_millis(ms));
    }
    let client = Client::new(config.build()).map_err(|e| e.to_string())?;
    match args.text("kind") {
        None | Some("rlock") => {}
        Some("token") => return hold_token(&client, name, args.number("lease-ms", 0)?),
        Some(other) => return Err(format!("`--kind` is rlock or token, not `{other}`")),
    }
    let lock = client.get_lock(name);
    let guard = match args.number("lease-ms", 0)? {
        0 => lock.lock(),
        ms => lock.lock_with_lease(Duration::from_millis(ms)),
    }
    .map_err(|e| e.to_string())?;
    say(&format!("held {}", client.id()));

    let Some(log) = args.text("log") else {
        // Hold until the parent closes our stdin (or kills us).
        for _ in std::io::stdin().lock().lines() {}
        guard.unlock().map_err(|e| e.to_string())?;
        return Ok(());
    };
    let mut conn = redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .map_err(|e| e.to_string())?;
    let push = |conn: &mut redis::Connection, what: &str| -> Result<(), String> {
        redis::cmd("RPUSH")
            .arg(log)
            .arg(what)
            .query::<i64>(conn)
            .map(drop)
            .map_err(|e| e.to_string())
    };
    loop {
        // The parent freezes us right after this line, in the middle of the "work".
        say("working");
        std::thread::sleep(Duration::from_millis(200));
        // An unfenced writer writes whatever happened meanwhile.
        push(&mut conn, "A-naive")?;
        // A careful writer asks the guard first; it costs no round trip.
        if let Some(loss) = guard.loss() {
            say(&format!("lost {loss:?}"));
            let result = guard.unlock();
            say(&format!(
                "unlock {}",
                if result.is_err() { "refused" } else { "ok" }
            ));
            return Ok(());
        }
        push(&mut conn, "A-careful")?;
    }
}

/// Holds the token lock `name` (under the watchdog, or for `lease_ms`) until stdin
/// closes; says `held <token>` once it holds it.
fn hold_token(client: &Client, name: &str, lease_ms: u64) -> Result<(), String> {
    let lock = client.get_token_lock(name);
    let guard = match lease_ms {
        0 => lock.lock(),
        ms => lock.lock_with_lease(Duration::from_millis(ms)),
    }
    .map_err(|e| e.to_string())?;
    say(&format!("held {}", guard.token()));
    for _ in std::io::stdin().lock().lines() {}
    guard.unlock().map_err(|e| e.to_string())
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}
