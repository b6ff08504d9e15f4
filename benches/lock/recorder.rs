//! What a metrics recorder costs: the uncontended lock+unlock cycle with a Prometheus
//! recorder in place against the same cycle without one, interleaved.

use metrics_exporter_prometheus::PrometheusBuilder;
use redmutex::Client;

use crate::family::{interleaved, mean_rate, median_time_ratio};
use crate::figures::Figures;
use crate::settings::Settings;

const PLAIN: usize = 0;
const RECORDED: usize = 1;

/// `metrics_recorder_cycle_ratio`: a cycle recorded by `metrics-exporter-prometheus`'s
/// recorder ÷ a cycle with no recorder (the facade's no-op), one thread, one key.
///
/// The recorder is the thread's local one (`with_local_recorder`), so both sides run in
/// one process and the rest of the benchmark stays unrecorded. Upkeep (draining the
/// histogram buffers, which a scrape would do) runs every 4,096 recorded cycles, inside
/// the measurement.
pub(crate) fn recorder_cost(client: &Client, settings: &Settings, fig: &mut Figures) {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let lock = client.get_lock("bench:metrics");
    let cycle = || lock.lock().unwrap().unlock().unwrap();
    let mut plain = cycle;
    let mut n = 0u32;
    let mut recorded = || {
        metrics::with_local_recorder(&recorder, cycle);
        n = n.wrapping_add(1);
        if n.is_multiple_of(4096) {
            handle.run_upkeep();
        }
    };
    let rows = interleaved(settings.span(), &mut [&mut plain, &mut recorded]);
    fig.set("metrics_plain_cycles_per_sec", mean_rate(&rows, PLAIN));
    fig.set(
        "metrics_recorded_cycles_per_sec",
        mean_rate(&rows, RECORDED),
    );
    fig.set(
        "metrics_recorder_cycle_ratio",
        median_time_ratio(&rows, RECORDED, PLAIN),
    );
    // The recorder saw every recorded cycle: the measurement measured what it says.
    let text = handle.render();
    assert!(
        text.contains("redmutex_lock_acquire_duration"),
        "the recorder saw no cycle"
    );
}
