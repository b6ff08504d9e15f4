//! The uncontended, hand-off and takeover rows again behind an emulated network round
//! trip of about 200 µs and 1 ms, for redmutex and Redisson.
//!
//! This kernel has no `sch_netem` (`tc qdisc … netem` answers "Specified qdisc kind is
//! unknown"), so the delay comes from the test harness's fault proxy instead: every chunk
//! waits half the round trip in each direction. A sleep overshoots by tens of µs and the
//! proxy adds its own hop, so nothing is stated in nominal units: every ratio divides by
//! the round trip measured through the same proxy in the same run (`PING`).

use std::process::Command;
use std::time::Duration;

use crate::figures::Figures;
use crate::handoff::redmutex_handoff;
use crate::measure::{percentile, rate};
use crate::redisson::{build_harness, json_number};
use crate::server::Server;
use crate::settings::Settings;
use crate::support::proxy::FaultProxy;

/// The emulated round trips, in µs: what users see on one data centre's network.
pub(crate) const RTTS_US: [u64; 2] = [200, 1_000];

/// Both rows at every emulated round trip; the figures go under `rtt<N>_` keys.
pub(crate) fn rtt(server: &Server, settings: &Settings, fig: &mut Figures) {
    let classpath = if settings.java { build_harness() } else { None };
    for rtt_us in RTTS_US {
        crate::phase(&format!("emulated {rtt_us} µs round trip"));
        let proxy = FaultProxy::start(server.port());
        let half = Duration::from_micros(rtt_us / 2);
        proxy.delay(half, half);
        let prefix = format!("rtt{rtt_us}_");
        let url = proxy.url();
        let client = Server::client_for(&url);
        // PING and the cycle in alternating 100 ms slices, each ratio the median of the
        // per-slice ratios: the machine's load moves the proxy's delay, and a burst then
        // hits both sides of a slice pair alike.
        let mut conn = redis::Client::open(url.as_str())
            .unwrap()
            .get_connection()
            .unwrap();
        let lock = client.get_lock(format!("bench:rtt:{rtt_us}:uncontended"));
        let slice = Duration::from_millis(100);
        let pairs = (settings.span().as_millis() / slice.as_millis()).max(3) as usize;
        let mut pings = Vec::with_capacity(pairs);
        let mut ratios = Vec::with_capacity(pairs);
        for _ in 0..pairs {
            let ping = 1e6
                / rate(slice, || {
                    redis::cmd("PING").query::<String>(&mut conn).unwrap();
                });
            let cycle = 1e6
                / rate(slice, || {
                    lock.lock().unwrap().unlock().unwrap();
                });
            pings.push(ping);
            ratios.push(cycle / ping);
        }
        pings.sort_by(f64::total_cmp);
        ratios.sort_by(f64::total_cmp);
        let measured = percentile(&pings, 0.5);
        fig.set(&format!("{prefix}floor_us"), measured);
        fig.set(&format!("{prefix}cycle_over_rtt"), percentile(&ratios, 0.5));

        let mut lat = redmutex_handoff(&client, 2, settings.span());
        lat.handoff.sort_by(f64::total_cmp);
        lat.takeover.sort_by(f64::total_cmp);
        let p50 = percentile(&lat.handoff, 0.5);
        fig.set(&format!("{prefix}handoff_2t_p50_over_rtt"), p50 / measured);
        let takeover = percentile(&lat.takeover, 0.99);
        fig.set(&format!("{prefix}takeover_2t_p99_us"), takeover);
        drop(client);

        if let Some(cp) = &classpath {
            let ms = settings.java_ms();
            let unc = java(cp, &url, &["uncontended", "1", &ms.to_string(), "1"]);
            let cycles = unc.as_deref().and_then(|l| json_number(l, "ops_per_sec"));
            fig.set_opt(
                &format!("{prefix}redisson_cycle_over_rtt"),
                cycles.map(|c| 1e6 / c / measured),
            );
            let ho = java(cp, &url, &["handoff", "2", &ms.to_string(), "1"]);
            let p50 = ho.as_deref().and_then(|l| json_number(l, "handoff_p50_us"));
            fig.set_opt(
                &format!("{prefix}redisson_handoff_2t_p50_over_rtt"),
                p50.map(|p| p / measured),
            );
            let theirs = ho
                .as_deref()
                .and_then(|l| json_number(l, "takeover_p99_us"));
            fig.set_opt(&format!("{prefix}redisson_takeover_2t_p99_us"), theirs);
            fig.set_opt(
                &format!("{prefix}takeover_2t_p99_over_redisson"),
                theirs.map(|t| takeover / t),
            );
        }
    }
}

/// One run of the Java harness's single-scenario mode on `url`; its JSON line, or
/// `None` (said on stderr) when it failed.
fn java(classpath: &str, url: &str, scenario: &[&str]) -> Option<String> {
    let out = Command::new("java")
        .arg("-cp")
        .arg(classpath)
        .arg("dev.redmutex.interop.Bench")
        .arg(url)
        .args(scenario)
        .output();
    match out {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
            .lines()
            .find(|l| l.starts_with('{'))
            .map(str::to_owned),
        Ok(out) => {
            eprintln!(
                "the Java harness failed on {scenario:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            None
        }
        Err(e) => {
            eprintln!("cannot run java: {e}");
            None
        }
    }
}
