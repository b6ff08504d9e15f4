//! The library's own log lines on stderr, for tests that diagnose a rare failure:
//! `REDMUTEX_TEST_LOG=debug` (or `trace`, `info`) turns it on, off by default so that
//! passing runs stay quiet.

use std::sync::OnceLock;
use std::time::Instant;

struct Stderr {
    start: Instant,
}

impl log::Log for Stderr {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.target().starts_with("redmutex")
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let thread = std::thread::current();
            eprintln!(
                "[{:>10.3} ms {} {}] {}",
                self.start.elapsed().as_secs_f64() * 1000.0,
                record.level(),
                thread.name().unwrap_or("-"),
                record.args()
            );
        }
    }

    fn flush(&self) {}
}

/// Installs the stderr logger once per process when `REDMUTEX_TEST_LOG` names a level;
/// returns the instant its timestamps count from.
pub fn init() -> Option<Instant> {
    static LOGGER: OnceLock<Option<&'static Stderr>> = OnceLock::new();
    let logger = LOGGER.get_or_init(|| {
        let level = std::env::var("REDMUTEX_TEST_LOG")
            .ok()?
            .parse::<log::LevelFilter>()
            .ok()?;
        let logger: &'static Stderr = Box::leak(Box::new(Stderr {
            start: Instant::now(),
        }));
        log::set_logger(logger).ok()?;
        log::set_max_level(level);
        Some(logger)
    });
    logger.map(|l| l.start)
}
