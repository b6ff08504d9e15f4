//! Throwaway `redis-server` processes on free loopback ports.
//!
//! The one spawner of the project: the demo, the test harness (`tests/harness`), the
//! benchmark and the examples all start Redis through it, with the same arguments, and wait
//! for it the same way; [`super::servers`] says which server binary (`REDMUTEX_SERVER`).
//! It lives in the library because the published binary must build
//! from the packaged crate.

use std::io::{BufRead, BufReader, Lines};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How many OS-picked ports to try: one can be taken again before Redis binds it.
const PORT_ATTEMPTS: usize = 20;

/// A `redis-server` child on 127.0.0.1 with its own empty working directory. Without
/// extra arguments it persists nothing. Drop kills it and removes the directory.
pub struct RedisServer {
    child: Child,
    port: u16,
    dir: PathBuf,
    args: Vec<String>,
}

impl RedisServer {
    /// Starts a server on a free port. `extra` arguments come after the defaults, so they
    /// can override them (`--appendonly yes`).
    pub fn start(extra: &[&str]) -> Result<Self, String> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "redmutex-redis-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let args: Vec<String> = extra.iter().map(|a| (*a).to_owned()).collect();
        match first_free_port(&dir, &args) {
            Ok((port, child)) => Ok(Self {
                child,
                port,
                dir,
                args,
            }),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port())
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the server with SIGKILL: no shutdown save, clients see the connection drop.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Kills the server and starts it again on the same port, directory and arguments,
    /// so clients reconnect to the same address and find whatever it persisted.
    #[allow(
        dead_code,
        reason = "the test harness restarts servers; the demo and the benchmark do not"
    )]
    pub fn restart(&mut self) -> Result<(), String> {
        self.kill();
        let mut last = String::new();
        // The port stays in the kernel's hands for a moment after the kill.
        for _ in 0..100 {
            match spawn(self.port, &self.dir, &self.args)? {
                Spawned::Ready(child) => {
                    self.child = child;
                    return Ok(());
                }
                Spawned::Exited(log) => last = log,
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!(
            "redis-server did not restart on port {}; last said: {last}",
            self.port
        ))
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts a server on the first OS-picked port it can bind.
fn first_free_port(dir: &Path, args: &[String]) -> Result<(u16, Child), String> {
    let mut last = String::new();
    for _ in 0..PORT_ATTEMPTS {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free loopback port: {e}"))?
            .port();
        match spawn(port, dir, args)? {
            Spawned::Ready(child) => return Ok((port, child)),
            Spawned::Exited(log) => last = log,
        }
    }
    Err(format!(
        "redis-server did not start on {PORT_ATTEMPTS} free ports; last said: {last}"
    ))
}

/// How a `redis-server` start ended.
enum Spawned {
    /// It printed its ready line.
    Ready(Child),
    /// It exited first (a taken port, a bad argument), with its last log line.
    Exited(String),
}

/// Starts `redis-server` and waits for its "Ready to accept connections" line. An error
/// means it could not run at all.
fn spawn(port: u16, dir: &Path, extra: &[String]) -> Result<Spawned, String> {
    let server = super::servers::selected()?;
    let mut child = Command::new(&server.server)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir)
        .args(["--logfile", "", "--loglevel", "notice", "--daemonize", "no"])
        .args(server.adapt_args(extra))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| {
            format!(
                "cannot run {} ({}; apt-get install redis-server puts Debian's on PATH, \
                 {} fetches the others): {e}",
                server.server.display(),
                server.name(),
                super::servers::FETCH_SCRIPT
            )
        })?;
    let Some(stdout) = child.stdout.take() else {
        let _ = child.kill();
        let _ = child.wait();
        return Err("redis-server started without a stdout pipe".into());
    };
    let mut lines = BufReader::new(stdout).lines();
    match ready(&mut lines) {
        Ok(()) => {
            // Keep draining the log so the server never blocks on a full pipe.
            std::thread::spawn(move || for _ in lines {});
            Ok(Spawned::Ready(child))
        }
        Err(last) => {
            let _ = child.kill();
            let _ = child.wait();
            Ok(Spawned::Exited(last))
        }
    }
}

/// Reads the log up to the ready line; at the end of the log, the last line read.
fn ready(lines: &mut Lines<BufReader<ChildStdout>>) -> Result<(), String> {
    let mut last = String::new();
    for line in lines.map_while(Result::ok) {
        if line.contains("Ready to accept connections") {
            return Ok(());
        }
        last = line;
    }
    Err(last)
}
