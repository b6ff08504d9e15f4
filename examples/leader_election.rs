//! Leader election: three processes run for leader of one election; one leads, the
//! others wait. Killing the leader (SIGKILL) hands leadership to another within the
//! lease; freezing a leader (SIGSTOP) does too, and when the frozen one runs again
//! (SIGCONT) it learns at once that it lost, does no more leader work and steps down.
//!
//! `cargo run --example leader_election` runs the whole story against a throwaway
//! redis-server and checks it; the test suite runs it the same way (`cargo test`).
//! Each candidate counts its terms in a Redis counter, so every new leader's term is
//! one more than the last.

// A throwaway redis-server, started as the test suite starts its own.
use redmutex_harness::server;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant};

use redmutex::{Client, Config};

/// The lease: how long a dead or frozen leader keeps the election.
const LEASE: Duration = Duration::from_millis(1500);
/// Hang guard for any step.
const HANG: Duration = Duration::from_secs(30);
const CANDIDATES: usize = 3;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("candidate") {
        if let Err(e) = candidate(&args[2], &args[3]) {
            println!("error {e}");
            std::process::exit(1);
        }
        return;
    }
    match election() {
        Ok(()) => println!("ok: one leader at a time, handed over on kill and on freeze"),
        Err(e) => {
            eprintln!("leader_election FAILED: {e}");
            std::process::exit(1);
        }
    }
}

/// One candidate process: lead when elected, work while leading, step down when told.
fn candidate(url: &str, name: &str) -> redmutex::Result<()> {
    let client = Client::new(
        Config::builder()
            .address(url)
            .lock_watchdog_timeout(LEASE)
            .build(),
    )?;
    let latch = client.leader(name);
    let mut conn = redis::Client::open(url)?.get_connection()?;
    println!("following");
    loop {
        let leadership = latch.await_leadership()?;
        let term: i64 = redis::cmd("INCR")
            .arg(format!("{name}:term"))
            .query(&mut conn)?;
        println!("leading term {term}");
        // Leader work: one step per 50 ms, each only after checking leadership.
        loop {
            if let Some(loss) = leadership.wait_lost(Duration::from_millis(50)) {
                println!("lost {loss:?}; stepping down");
                break;
            }
            println!("working term {term} at {}", epoch_ms());
        }
        // Gone already; the release says so, which is expected here.
        let _ = leadership.step_down();
        println!("following");
    }
}

/// A candidate process and the lines it printed.
struct Candidate {
    child: Child,
}

/// What a candidate printed, and who.
type Said = (usize, String);

fn spawn(i: usize, url: &str, name: &str, tx: Sender<Said>) -> Result<Candidate, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = Command::new(exe)
        .args(["candidate", url, name])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start a candidate: {e}"))?;
    let out = child.stdout.take().ok_or("no stdout")?;
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send((i, line)).is_err() {
                break;
            }
        }
    });
    Ok(Candidate { child })
}

/// Waits for the first line that `wanted` accepts, failing on candidates' errors.
fn next(rx: &Receiver<Said>, what: &str, wanted: impl Fn(&Said) -> bool) -> Result<Said, String> {
    let end = Instant::now() + HANG;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let said = rx
            .recv_timeout(left)
            .map_err(|_| format!("timed out waiting for {what}"))?;
        if said.1.starts_with("error") {
            return Err(format!("candidate {} failed: {}", said.0, said.1));
        }
        if wanted(&said) {
            return Ok(said);
        }
    }
}

fn epoch_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// The `at <ms>` stamp of a work line.
fn stamp(line: &str) -> Option<u128> {
    line.rsplit_once(" at ")?.1.parse().ok()
}

fn signal(child: &Child, sig: &str) -> Result<(), String> {
    let status = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(child.id().to_string())
        .status()
        .map_err(|e| e.to_string())?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("kill -{sig} failed"))
    }
}

fn election() -> Result<(), String> {
    let redis = server::RedisServer::start(&[])?;
    let url = redis.url();
    let name = "leader:example";
    println!("redis-server at {url}; {CANDIDATES} candidates for `{name}`, lease {LEASE:?}");
    let (tx, rx) = channel();
    let mut candidates: Vec<Candidate> = (0..CANDIDATES)
        .map(|i| spawn(i, &url, name, tx.clone()))
        .collect::<Result<_, _>>()?;
    let result = story(&rx, &mut candidates);
    for c in &mut candidates {
        let _ = signal(&c.child, "CONT");
        let _ = c.child.kill();
        let _ = c.child.wait();
    }
    result
}

fn story(rx: &Receiver<Said>, candidates: &mut [Candidate]) -> Result<(), String> {
    let leading = |s: &Said| s.1.starts_with("leading");
    // Term 1: exactly one leads; nobody else may claim a term meanwhile.
    let (first, line) = next(rx, "a first leader", leading)?;
    println!("candidate {first}: {line}");
    if line != "leading term 1" {
        return Err(format!("the first leader said {line:?}"));
    }
    // Let it lead for a few steps; a second leader now would be a split brain.
    for _ in 0..5 {
        let (who, line) = next(rx, "leader work", |s| {
            s.1.starts_with("working") || leading(s)
        })?;
        if who != first {
            return Err(format!("candidate {who} said {line:?} while {first} leads"));
        }
    }

    // SIGKILL the leader: another takes over once its lease has run out.
    signal(&candidates[first].child, "KILL")?;
    let killed = Instant::now();
    let (second, line) = next(rx, "a leader after the kill", leading)?;
    let took = killed.elapsed();
    println!("candidate {second}: {line} ({took:?} after candidate {first} was killed)");
    if line != "leading term 2" || second == first {
        return Err(format!("after the kill candidate {second} said {line:?}"));
    }
    // It cannot have been before the lease, which nobody released.
    if took + Duration::from_millis(100) < LEASE / 3 {
        return Err(format!(
            "took over after {took:?}, long before a lease could end"
        ));
    }

    // SIGSTOP the new leader: frozen, it cannot renew; the last candidate takes over.
    signal(&candidates[second].child, "STOP")?;
    let (third, line) = next(rx, "a leader after the freeze", |s| {
        leading(s) && s.0 != second
    })?;
    println!("candidate {third}: {line} (candidate {second} is frozen)");
    if line != "leading term 3" {
        return Err(format!("after the freeze candidate {third} said {line:?}"));
    }

    // SIGCONT: the frozen leader's first word must be that it lost, not more work.
    // Work lines it wrote before the freeze may still be on their way: their stamps
    // are older than the resumption.
    let resumed_at = epoch_ms();
    signal(&candidates[second].child, "CONT")?;
    let (_, line) = next(rx, "the resumed leader", |s| {
        s.0 == second && stamp(&s.1).is_none_or(|t| t >= resumed_at)
    })?;
    println!("candidate {second}: {line} (resumed)");
    if !line.starts_with("lost") {
        return Err(format!(
            "the resumed leader said {line:?} before stepping down"
        ));
    }
    let (_, line) = next(rx, "the resumed leader to follow", |s| s.0 == second)?;
    if line != "following" {
        return Err(format!("the resumed leader then said {line:?}"));
    }
    // The third keeps leading; the resumed one claims nothing.
    for _ in 0..5 {
        let (who, line) = next(rx, "leader work", |s| {
            s.1.starts_with("working") || leading(s)
        })?;
        if who != third {
            return Err(format!("candidate {who} said {line:?} while {third} leads"));
        }
    }
    Ok(())
}
