//! Stock deduction: concurrent orders take items from a stock counter, each under a
//! fenced lock: read the stock, refuse the order at zero, else take one item.
//!
//! A lock alone cannot keep the stock from going negative. A holder that pauses past its
//! lease (a GC pause, a stalled VM, here SIGSTOP) comes back still believing its earlier
//! read, and by then another order may have sold the last item. So every write goes
//! through the guard's fenced write (`guard.fenced(|w| ...)`). It runs in one script with
//! a check that this owner still holds the lock with the newest token. A paused holder's
//! write is refused and writes nothing; the order then starts over, reads 0 and reports
//! the item sold out. The unfenced variant runs the same steps with a plain `DECRBY` and
//! sells the last item twice.
//!
//! Redisson users write the fenced variant with `RFencedLock` and pass `getToken()` to
//! the storage, which has to check it itself. Here the check runs in Redis, in the same
//! script as the write.
//!
//! `cargo run --example stock_deduction` runs it against a throwaway redis-server and
//! checks the stock; the test suite runs it the same way (`cargo test`).

// A throwaway redis-server, started as the test suite starts its own.
use redmutex_harness::server;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use redmutex::{Client, Config, Error, RFencedLockGuard};

/// The lock, and the keys it protects. They share a hash tag, so in a cluster they sit in
/// the lock's slot, as a fenced write needs.
const LOCK: &str = "{stock:sku-42}";
const STOCK: &str = "{stock:sku-42}:available";
const SOLD: &str = "{stock:sku-42}:sold";
/// The paused holder's lease: how long the others wait for it.
const LEASE: Duration = Duration::from_millis(1000);
const HANG: Duration = Duration::from_secs(30);

/// What one order came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    Sold,
    SoldOut,
}

/// Whether writes go through the fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Writes {
    Fenced,
    Unfenced,
}

/// The stock, read by the holder.
fn stock(conn: &mut redis::Connection) -> redmutex::Result<i64> {
    Ok(redis::cmd("GET")
        .arg(STOCK)
        .query::<Option<i64>>(conn)?
        .unwrap_or(0))
}

/// Takes one item if the holder's read of the stock said there is one. A refused fenced
/// write is an error: the caller starts the order over.
fn take(
    guard: &RFencedLockGuard,
    conn: &mut redis::Connection,
    writes: Writes,
    order: &str,
) -> redmutex::Result<()> {
    match writes {
        Writes::Fenced => guard
            .fenced(|w| {
                w.incr_by(STOCK, -1).cmd("RPUSH", &[SOLD], order);
            })
            .map(drop),
        Writes::Unfenced => {
            let _: (i64, i64) = redis::pipe()
                .cmd("DECRBY")
                .arg(STOCK)
                .arg(1)
                .cmd("RPUSH")
                .arg(SOLD)
                .arg(order)
                .query(conn)?;
            Ok(())
        }
    }
}

/// One order, from the lock to the release; started over after a refused write.
fn place(
    client: &Client,
    conn: &mut redis::Connection,
    writes: Writes,
    order: &str,
) -> redmutex::Result<Order> {
    let lock = client.get_fenced_lock(LOCK);
    loop {
        let guard = lock.lock()?;
        if stock(conn)? <= 0 {
            guard.unlock()?;
            return Ok(Order::SoldOut);
        }
        match take(&guard, conn, writes, order) {
            Ok(()) => {
                guard.unlock()?;
                return Ok(Order::Sold);
            }
            // Someone else held the lock since our grant: what we read is stale.
            Err(Error::FenceRefused { .. }) => {
                let _ = guard.unlock();
            }
            Err(e) => return Err(e),
        }
    }
}

fn connect(url: &str) -> redmutex::Result<redis::Connection> {
    Ok(redis::Client::open(url)?.get_connection()?)
}

fn set_stock(url: &str, n: i64) -> Result<(), String> {
    let mut conn = connect(url).map_err(|e| e.to_string())?;
    redis::pipe()
        .cmd("SET")
        .arg(STOCK)
        .arg(n)
        .cmd("DEL")
        .arg(SOLD)
        .query::<()>(&mut conn)
        .map_err(|e| e.to_string())
}

/// The stock and the orders sold, as Redis has them.
fn outcome(url: &str) -> Result<(i64, i64), String> {
    let mut conn = connect(url).map_err(|e| e.to_string())?;
    let left = stock(&mut conn).map_err(|e| e.to_string())?;
    let sold: i64 = redis::cmd("LLEN")
        .arg(SOLD)
        .query(&mut conn)
        .map_err(|e| e.to_string())?;
    Ok((left, sold))
}

/// 40 orders from 8 threads (two clients) against a stock of 25: 25 sold, 15 sold
/// out, the stock at 0.
fn rush(url: &str) -> Result<(), String> {
    const STOCKED: i64 = 25;
    set_stock(url, STOCKED)?;
    let clients = [Client::open(url), Client::open(url)];
    let clients: Vec<Client> = clients
        .into_iter()
        .collect::<redmutex::Result<_>>()
        .map_err(|e| e.to_string())?;
    let outcomes: Vec<Order> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let client = &clients[t % 2];
                s.spawn(move || -> redmutex::Result<Vec<Order>> {
                    let mut conn = connect(url)?;
                    (0..5)
                        .map(|i| place(client, &mut conn, Writes::Fenced, &format!("t{t}-{i}")))
                        .collect()
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().map_err(|_| "an order thread panicked".to_owned()))
            .collect::<Result<Vec<_>, _>>()
    })?
    .into_iter()
    .collect::<redmutex::Result<Vec<Vec<Order>>>>()
    .map_err(|e| e.to_string())?
    .concat();
    let sold = outcomes.iter().filter(|o| **o == Order::Sold).count() as i64;
    let (left, recorded) = outcome(url)?;
    println!("rush: 40 orders, stock {STOCKED}: {sold} sold, stock now {left}");
    if sold != STOCKED || recorded != STOCKED || left != 0 {
        return Err(format!(
            "rush: sold {sold}, recorded {recorded}, stock {left}; wanted {STOCKED}, {STOCKED}, 0"
        ));
    }
    Ok(())
}

/// The paused holder (a child process of this example): holds the lock, reads the
/// stock, says so, and is frozen by the parent. On `go` it takes its item and says what
/// happened.
fn paused_holder(url: &str, writes: Writes) -> redmutex::Result<()> {
    let client = Client::new(
        Config::builder()
            .address(url)
            .lock_watchdog_timeout(LEASE)
            .build(),
    )?;
    let mut conn = connect(url)?;
    let lock = client.get_fenced_lock(LOCK);
    let guard = lock.lock()?;
    let read = stock(&mut conn)?;
    println!("read {read}");
    // Frozen here by the parent; resumed with a line on stdin.
    std::io::stdin().lock().lines().next();
    if read <= 0 {
        println!("sold out");
        return Ok(());
    }
    match take(&guard, &mut conn, writes, "paused") {
        Ok(()) => println!("took the item"),
        Err(Error::FenceRefused { reason, .. }) => {
            println!("refused {reason:?}");
            drop(guard);
            let again = place(&client, &mut conn, writes, "paused")?;
            println!("ordered again: {again:?}");
        }
        Err(e) => return Err(e),
    }
    Ok(())
}

struct Holder {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Holder {
    fn spawn(url: &str, writes: Writes) -> Result<Self, String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mode = match writes {
            Writes::Fenced => "fenced",
            Writes::Unfenced => "unfenced",
        };
        let mut child = Command::new(exe)
            .args(["holder", url, mode])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start the holder: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let out = child.stdout.take().ok_or("no stdout")?;
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Self {
            child,
            stdin,
            lines,
        })
    }

    fn said(&self) -> Result<String, String> {
        let line = self
            .lines
            .recv_timeout(HANG)
            .map_err(|_| "the holder said nothing".to_owned())?;
        if line.starts_with("error") {
            return Err(format!("holder: {line}"));
        }
        Ok(line)
    }

    fn signal(&self, sig: &str) -> Result<(), String> {
        let status = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()
            .map_err(|e| e.to_string())?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("kill -{sig} failed"))
        }
    }

    fn resume(&mut self) -> Result<(), String> {
        self.signal("CONT")?;
        writeln!(self.stdin, "go").map_err(|e| e.to_string())
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.signal("CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One item left. The holder reads it, is frozen past its lease, and another order buys
/// the item meanwhile; then the holder runs again and takes the item it read. Returns
/// the stock and the orders sold at the end, and what the holder said.
fn pause(url: &str, writes: Writes) -> Result<(i64, i64, Vec<String>), String> {
    set_stock(url, 1)?;
    let mut holder = Holder::spawn(url, writes)?;
    let read = holder.said()?;
    if read != "read 1" {
        return Err(format!("the holder said {read:?}"));
    }
    holder.signal("STOP")?;
    // No unlock is ever published: this order waits until the frozen lease ends.
    let client = Client::open(url).map_err(|e| e.to_string())?;
    let mut conn = connect(url).map_err(|e| e.to_string())?;
    let rival = place(&client, &mut conn, writes, "rival").map_err(|e| e.to_string())?;
    if rival != Order::Sold {
        return Err(format!("the rival order came to {rival:?}"));
    }
    holder.resume()?;
    let mut said = vec![holder.said()?];
    if said[0].starts_with("refused") {
        said.push(holder.said()?);
    }
    let (left, sold) = outcome(url)?;
    println!("{writes:?}: holder said {said:?}; stock {left}, orders sold {sold}");
    Ok((left, sold, said))
}

fn run() -> Result<(), String> {
    let redis = server::RedisServer::start(&[])?;
    let url = redis.url();
    rush(&url)?;

    let (left, sold, said) = pause(&url, Writes::Fenced)?;
    let expected = ["refused NotHeld", "ordered again: SoldOut"];
    if left != 0 || sold != 1 || said != expected {
        return Err(format!(
            "fenced: stock {left}, sold {sold}, holder {said:?}; wanted 0, 1, {expected:?}"
        ));
    }
    let (left, sold, said) = pause(&url, Writes::Unfenced)?;
    if left != -1 || sold != 2 || said != ["took the item"] {
        return Err(format!(
            "unfenced: stock {left}, sold {sold}, holder {said:?}; the oversell did not show"
        ));
    }
    println!(
        "ok: fenced writes never oversold; the same pause without the fence sold the last \
         item twice (stock -1)"
    );
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("holder") {
        let writes = match args.get(3).map(String::as_str) {
            Some("fenced") => Writes::Fenced,
            _ => Writes::Unfenced,
        };
        if let Err(e) = paused_holder(&args[2], writes) {
            println!("error {e}");
            std::process::exit(1);
        }
        return;
    }
    if let Err(e) = run() {
        eprintln!("stock_deduction FAILED: {e}");
        std::process::exit(1);
    }
}
