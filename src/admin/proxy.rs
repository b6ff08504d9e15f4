//! A TCP fault proxy between redmutex and redis-server, on std threads.
//!
//! Modes apply to every connection, current and future: pass (optionally delayed per
//! direction), blackhole (bytes are read and thrown away both ways; connections stay
//! open, so the client sees silence), freeze (nothing is read until resumed; bytes wait
//! in the kernel buffers and flow again afterwards), drop the next reply, reset (every
//! open connection is shut down abruptly), and flush the server's script cache right
//! after a client loaded a script, before its next command.
//!
//! The test harness injects faults with it, and `redmutex demo` shows recovery through it.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

const PASS: u8 = 0;
const BLACKHOLE: u8 = 1;
const FREEZE: u8 = 2;

/// States of the one-shot "flush after load": off, waiting for a `SCRIPT LOAD` to go up,
/// and flush before the next command goes up.
const FLUSH_OFF: u8 = 0;
const FLUSH_ARMED: u8 = 1;
const FLUSH_DUE: u8 = 2;

struct Shared {
    target: SocketAddr,
    mode: AtomicU8,
    delay_up_us: AtomicU64,
    delay_down_us: AtomicU64,
    drop_next_reply: AtomicBool,
    close_at_next_reply: AtomicBool,
    flush_after_load: AtomicU8,
    flushes: AtomicU64,
    stop: AtomicBool,
    streams: Mutex<Vec<TcpStream>>,
    connections: AtomicU64,
}

/// A proxy listening on 127.0.0.1 and forwarding to `target`.
pub struct FaultProxy {
    shared: Arc<Shared>,
    pub port: u16,
}

impl FaultProxy {
    pub fn start(target_port: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared {
            target: SocketAddr::from(([127, 0, 0, 1], target_port)),
            mode: AtomicU8::new(PASS),
            delay_up_us: AtomicU64::new(0),
            delay_down_us: AtomicU64::new(0),
            drop_next_reply: AtomicBool::new(false),
            close_at_next_reply: AtomicBool::new(false),
            flush_after_load: AtomicU8::new(FLUSH_OFF),
            flushes: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            streams: Mutex::new(Vec::new()),
            connections: AtomicU64::new(0),
        });
        let accept_shared = Arc::clone(&shared);
        listener.set_nonblocking(true).unwrap();
        std::thread::spawn(move || accept_loop(&listener, &accept_shared));
        Self { shared, port }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn pass(&self) {
        self.shared.delay_up_us.store(0, Ordering::SeqCst);
        self.shared.delay_down_us.store(0, Ordering::SeqCst);
        self.shared.mode.store(PASS, Ordering::SeqCst);
    }

    /// Delays every chunk in each direction (client→server, server→client).
    pub fn delay(&self, up: Duration, down: Duration) {
        self.shared
            .delay_up_us
            .store(up.as_micros() as u64, Ordering::SeqCst);
        self.shared
            .delay_down_us
            .store(down.as_micros() as u64, Ordering::SeqCst);
        self.shared.mode.store(PASS, Ordering::SeqCst);
    }

    pub fn blackhole(&self) {
        self.shared.mode.store(BLACKHOLE, Ordering::SeqCst);
    }

    pub fn freeze(&self) {
        self.shared.mode.store(FREEZE, Ordering::SeqCst);
    }

    pub fn resume(&self) {
        self.shared.mode.store(PASS, Ordering::SeqCst);
    }

    /// Throws away the next chunk the server sends (one reply, at low load).
    pub fn drop_next_reply(&self) {
        self.shared.drop_next_reply.store(true, Ordering::SeqCst);
    }

    /// Whether the armed reply drop has happened.
    pub fn reply_dropped(&self) -> bool {
        !self.shared.drop_next_reply.load(Ordering::SeqCst)
    }

    /// Closes the connection that carries the next chunk the server sends, instead of
    /// forwarding it: the server ran the command, and the client sees the connection
    /// close before its reply.
    pub fn close_at_next_reply(&self) {
        self.shared
            .close_at_next_reply
            .store(true, Ordering::SeqCst);
    }

    /// Whether the armed close has happened.
    pub fn closed_at_reply(&self) -> bool {
        !self.shared.close_at_next_reply.load(Ordering::SeqCst)
    }

    /// Once: after the next `SCRIPT LOAD` a client sends, runs `SCRIPT FLUSH` on the
    /// server before that client's next command reaches it, so a script loaded to answer
    /// `NOSCRIPT` is gone again when it is called.
    pub fn flush_scripts_after_next_load(&self) {
        self.shared
            .flush_after_load
            .store(FLUSH_ARMED, Ordering::SeqCst);
    }

    /// How many flushes `flush_scripts_after_next_load` has run.
    pub fn flushes(&self) -> u64 {
        self.shared.flushes.load(Ordering::SeqCst)
    }

    /// Shuts down every open connection at once.
    pub fn reset(&self) {
        for s in self.shared.streams.lock().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.reset();
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((client, _)) => {
                let Ok(server) = TcpStream::connect(shared.target) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                shared.connections.fetch_add(1, Ordering::SeqCst);
                client.set_nonblocking(false).unwrap();
                for s in [&client, &server] {
                    s.set_nodelay(true).unwrap();
                    s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
                }
                {
                    let mut streams = shared.streams.lock();
                    streams.push(client.try_clone().unwrap());
                    streams.push(server.try_clone().unwrap());
                }
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let up = Arc::clone(shared);
                std::thread::spawn(move || pump(client, s2, &up, false));
                let down = Arc::clone(shared);
                std::thread::spawn(move || pump(server, c2, &down, true));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(_) => return,
        }
    }
}

fn pump(mut from: TcpStream, mut to: TcpStream, shared: &Shared, down: bool) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        if shared.mode.load(Ordering::SeqCst) == FREEZE {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(_) => break,
        };
        let arrived = Instant::now();
        match shared.mode.load(Ordering::SeqCst) {
            BLACKHOLE => continue,
            // Frozen while we were reading: hold the bytes until resumed.
            FREEZE => {
                while shared.mode.load(Ordering::SeqCst) == FREEZE
                    && !shared.stop.load(Ordering::SeqCst)
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
                if shared.mode.load(Ordering::SeqCst) == BLACKHOLE {
                    continue;
                }
            }
            _ => {}
        }
        if down && shared.drop_next_reply.swap(false, Ordering::SeqCst) {
            continue;
        }
        if down && shared.close_at_next_reply.swap(false, Ordering::SeqCst) {
            break;
        }
        let delay = if down {
            &shared.delay_down_us
        } else {
            &shared.delay_up_us
        };
        let us = delay.load(Ordering::SeqCst);
        if us > 0 {
            wait_until(arrived + Duration::from_micros(us));
        }
        if !down {
            flush_after_load(shared, &buf[..n]);
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

/// The "flush after load" step for one chunk going up: a due flush runs before the chunk
/// is forwarded; a chunk carrying `SCRIPT LOAD` makes the flush due.
fn flush_after_load(shared: &Shared, chunk: &[u8]) {
    const LOAD: &[u8] = b"$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n";
    match shared.flush_after_load.load(Ordering::SeqCst) {
        FLUSH_DUE => {
            let mut side = TcpStream::connect(shared.target).unwrap();
            side.write_all(b"*2\r\n$6\r\nSCRIPT\r\n$5\r\nFLUSH\r\n")
                .unwrap();
            let mut reply = [0u8; 5];
            side.read_exact(&mut reply).unwrap();
            assert_eq!(&reply, b"+OK\r\n");
            shared.flushes.fetch_add(1, Ordering::SeqCst);
            shared.flush_after_load.store(FLUSH_OFF, Ordering::SeqCst);
        }
        FLUSH_ARMED if chunk.windows(LOAD.len()).any(|w| w == LOAD) => {
            shared.flush_after_load.store(FLUSH_DUE, Ordering::SeqCst);
        }
        _ => {}
    }
}

/// Waits until `deadline`, measured from a chunk's arrival: a sleep for all but the last
/// 100 µs (a sleep overshoots by tens of µs, more on a loaded machine), then a spin, so a
/// delay of a few hundred µs stays close to what was asked.
fn wait_until(deadline: Instant) {
    let spin = Duration::from_micros(100);
    let now = Instant::now();
    if deadline > now + spin {
        std::thread::sleep(deadline - now - spin);
    }
    while Instant::now() < deadline {
        std::hint::spin_loop();
    }
}
