//! A lock holder to crash or freeze from tests: takes a lock, says so on stdout, then
//! either just holds it (until killed, or until stdin closes) or works in a loop that
//! shows what a fenced and an unfenced writer do once the lock is lost. With
//! `--kind token` the lock is the plain string-token lock, which only holds; with
//! `--fenced-counter KEY` it increments a counter under a fenced lock, step by step on
//! cue, to show a fenced write refused where an unfenced one corrupts the counter.

use std::io::{BufRead, Write};
use std::time::Duration;

use redmutex::{Client, Config, Error};

/// (Test helper.) Take a lock, say `held <client-id>`, then hold it until stdin closes,
/// or work in a loop that shows a fenced and an unfenced writer (`--log`), or step a
/// counter under a fenced lock (`--fenced-counter`).
#[derive(Debug, clap::Args)]
pub(crate) struct HoldArgs {
    #[arg(long)]
    url: String,
    #[arg(long)]
    lock: String,
    /// 0: under the watchdog.
    #[arg(long, default_value_t = 0)]
    lease_ms: u64,
    #[arg(long)]
    watchdog_ms: Option<u64>,
    #[arg(long)]
    log: Option<String>,
    /// Increment this counter under a fenced lock, step by step on cue.
    #[arg(long, conflicts_with = "log")]
    fenced_counter: Option<String>,
    /// `rlock` or `token` (the string-token lock, which only holds).
    #[arg(long, default_value = "rlock")]
    kind: String,
}

pub(crate) fn run(args: &HoldArgs) -> Result<(), String> {
    let url = args.url.as_str();
    let mut config = Config::builder().address(url);
    if let Some(ms) = args.watchdog_ms {
        config = config.lock_watchdog_timeout(Duration::from_millis(ms));
    }
    let client = Client::new(config.build()).map_err(|e| e.to_string())?;
    match args.kind.as_str() {
        "rlock" => {}
        "token" => return hold_token(&client, &args.lock, args.lease_ms),
        other => return Err(format!("`--kind` is rlock or token, not `{other}`")),
    }
    if let Some(counter) = args.fenced_counter.as_deref() {
        return fenced_increment(&client, url, &args.lock, counter);
    }
    let lock = client.get_lock(args.lock.as_str());
    let guard = match args.lease_ms {
        0 => lock.lock(),
        ms => lock.lock_with_lease(Duration::from_millis(ms)),
    }
    .map_err(|e| e.to_string())?;
    say(&format!("held {}", client.id()));

    let Some(log) = args.log.as_deref() else {
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

/// Takes the fenced lock `name`, says `held <token>`, reads `counter` and says
/// `read <value>`. The parent freezes us there (SIGSTOP), lets the lease run out, and
/// resumes us with a line on stdin. Then we write `value + 1` fenced and say `fenced ok`
/// or `fenced refused <why>`; after the next stdin line we write it unfenced (a plain
/// `SET`, as code that trusts its lock would) and say `unfenced wrote <value>`; last we
/// release and say `unlock ok` or `unlock refused`.
fn fenced_increment(client: &Client, url: &str, name: &str, counter: &str) -> Result<(), String> {
    let guard = client
        .get_fenced_lock(name)
        .lock_and_get_token()
        .map_err(|e| e.to_string())?;
    say(&format!("held {}", guard.token()));
    let mut conn = redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .map_err(|e| e.to_string())?;
    let value: Option<i64> = redis::cmd("GET")
        .arg(counter)
        .query(&mut conn)
        .map_err(|e| e.to_string())?;
    let next = value.unwrap_or(0) + 1;
    say(&format!("read {}", value.unwrap_or(0)));
    let stdin = std::io::stdin();
    let mut cues = stdin.lock().lines();
    let _ = cues.next();
    match guard.fenced(|w| {
        w.set(counter, next);
    }) {
        Ok(_) => say("fenced ok"),
        Err(Error::FenceRefused { reason, .. }) => say(&format!("fenced refused {reason:?}")),
        Err(e) => return Err(e.to_string()),
    }
    let _ = cues.next();
    redis::cmd("SET")
        .arg(counter)
        .arg(next)
        .query::<()>(&mut conn)
        .map_err(|e| e.to_string())?;
    say(&format!("unfenced wrote {next}"));
    let released = guard.unlock();
    say(if released.is_ok() {
        "unlock ok"
    } else {
        "unlock refused"
    });
    Ok(())
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}
