//! Take a lock, do some work, release it. Reads REDIS_URL (default redis://127.0.0.1/).

use std::time::Duration;

fn main() -> redmutex::Result<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1/".into());
    let client = redmutex::Client::open(&url)?;
    let lock = client.get_lock("example:basic");

    let guard = lock.lock()?;
    println!(
        "holding {} (hold count {})",
        lock.name(),
        lock.hold_count()?
    );
    guard.unlock()?;

    match lock.try_lock_with_lease(Duration::from_millis(500), Duration::from_secs(5))? {
        Some(guard) => {
            println!("got it again, for at most 5 s");
            drop(guard);
        }
        None => println!("someone else holds it"),
    }
    client.shutdown();
    Ok(())
}
