//! A lock holder to crash or freeze from tests: takes a lock, says so on stdout, then
//! either just holds it (until killed, or until stdin closes) or works in a loop that
//! shows what a fenced and an unfenced writer do once the lock is lost.

use std::io::{BufRead, Write};
use std::time::Duration;

use redmutex::{Client, Config};

/// (Test helper.) Take a lock, say `held <client-id>`, then hold it until stdin closes,
/// or work in a loop that shows a fenced and an unfenced writer (`--log`).
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
}

pub(crate) fn run(args: &HoldArgs) -> Result<(), String> {
    let url = args.url.as_str();
    let mut config = Config::builder().address(url);
    if let Some(ms) = args.watchdog_ms {
        config = config.lock_watchdog_timeout(Duration::from_millis(ms));
    }
    let client = Client::new(config.build()).map_err(|e| e.to_string())?;
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

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}
