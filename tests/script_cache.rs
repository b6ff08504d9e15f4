//! A flushed script cache is survived silently, even under load.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use support::{TestServer, unique};

#[test]
fn script_flush_under_load_surfaces_no_error() {
    let server = TestServer::start();
    let client = server.client();
    let name = unique("flush");
    let stop = AtomicBool::new(false);
    let mut raw = server.conn();
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    let lock = client.get_lock(name.clone());
                    let mut done = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let g = lock.lock().unwrap();
                        g.unlock().unwrap();
                        done += 1;
                    }
                    done
                })
            })
            .collect();
        for _ in 0..20 {
            let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut raw).unwrap();
            std::thread::sleep(Duration::from_millis(50));
        }
        stop.store(true, Ordering::Relaxed);
        let total: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
        assert!(total > 0);
    });
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut raw)
        .unwrap();
    let evalsha = stats
        .lines()
        .find(|l| l.starts_with("cmdstat_evalsha:"))
        .unwrap();
    assert!(
        evalsha.contains("failed_calls=") && !evalsha.contains("failed_calls=0"),
        "flushes happened: {evalsha}"
    );
}
