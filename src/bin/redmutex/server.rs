//! A throwaway `redis-server` for the demo.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};

/// A `redis-server` child on a free loopback port, killed on drop.
pub(crate) struct Throwaway {
    child: Child,
    pub(crate) url: String,
}

impl Throwaway {
    pub(crate) fn start() -> Result<Self, String> {
        for _ in 0..10 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map_err(|e| format!("no free port: {e}"))?
                .port();
            let mut child = Command::new("redis-server")
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .args(["--logfile", "", "--daemonize", "no"])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot start redis-server (is it installed?): {e}"))?;
            let ready = child.stdout.take().is_some_and(|out| {
                BufReader::new(out)
                    .lines()
                    .map_while(Result::ok)
                    .any(|line| line.contains("Ready to accept connections"))
            });
            if ready {
                return Ok(Self {
                    child,
                    url: format!("redis://127.0.0.1:{port}/"),
                });
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        Err("redis-server did not start".into())
    }
}

impl Drop for Throwaway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
