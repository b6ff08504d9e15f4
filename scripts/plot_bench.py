#!/usr/bin/env python3
"""Plot the hand-off latency distributions written by `cargo bench --bench lock`.

    python3 scripts/plot_bench.py SAMPLES.csv OUT.png [TITLE] [FLOOR_RTT_US]

SAMPLES.csv has the header `library,threads,metric,us`: one row per sample, with metric
`handoff` (last releaser's unlock-call start -> acquire return on another thread) or
`takeover` (first unlock-call start after the waiter called lock() -> its acquire return).
The PNG has one CDF panel per metric and thread count, one line per library, on a log
time axis. Needs matplotlib (`pip install matplotlib`).
"""

import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"redmutex": "#d62728", "redisson": "#1f77b4", "redlock": "#7f7f7f"}
LABELS = {
    "redmutex": "redmutex",
    "redisson": "Redisson (Java)",
    "redlock": "redlock crate (polling)",
}
METRICS = [
    ("handoff", "hand-off: last unlock call → another thread holds"),
    ("takeover", "takeover: first unlock while waiting → waiter holds"),
]


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    samples_path, out = sys.argv[1], sys.argv[2]
    title = sys.argv[3] if len(sys.argv) > 3 else "hand-off latency"
    rtt = float(sys.argv[4]) if len(sys.argv) > 4 else None
    if rtt is not None and not rtt > 0:
        rtt = None

    data = defaultdict(list)
    with open(samples_path, newline="") as f:
        for row in csv.DictReader(f):
            data[(row["metric"], int(row["threads"]), row["library"])].append(float(row["us"]))
    threads = sorted({t for (_, t, _) in data})
    libraries = [lib for lib in COLORS if any(k[2] == lib for k in data)]
    if not threads:
        print("no samples", file=sys.stderr)
        return 1

    lo = max(1.0, min(min(v) for v in data.values() if v) / 1.5)
    if rtt:
        lo = min(lo, rtt / 1.5)
    hi = max(max(v) for v in data.values() if v) * 1.5
    fig, axes = plt.subplots(
        len(METRICS), len(threads), figsize=(5.2 * len(threads), 4.2 * len(METRICS)),
        squeeze=False, sharex=True, sharey=True,
    )
    for r, (metric, metric_label) in enumerate(METRICS):
        for c, t in enumerate(threads):
            ax = axes[r][c]
            for lib in libraries:
                v = sorted(data.get((metric, t, lib), []))
                if not v:
                    continue
                n = len(v)
                y = [(i + 1) / n for i in range(n)]
                p50 = v[round((n - 1) * 0.5)]
                ax.step(v, y, where="post", color=COLORS[lib], linewidth=1.6,
                        label=f"{LABELS[lib]}: p50 {fmt(p50)} (n={n})")
            if rtt:
                ax.axvline(rtt, color="black", linestyle=":", linewidth=1)
                ax.axvline(3 * rtt, color="black", linestyle="--", linewidth=0.8)
            ax.axvline(1000, color="#2ca02c", linestyle="--", linewidth=0.8)
            ax.set_xscale("log")
            ax.set_xlim(lo, hi)
            ax.set_ylim(0, 1.0)
            ax.grid(True, which="major", alpha=0.3)
            ax.set_title(f"{metric_label}\n{t} threads", fontsize=9)
            if r == len(METRICS) - 1:
                ax.set_xlabel("latency (µs, log scale)")
            if c == 0:
                ax.set_ylabel("fraction of samples ≤ x (CDF)")
            ax.legend(loc="lower right", fontsize=7.5)
    note = "dotted: 1 floor RTT; black dashed: 3 RTT; green dashed: 1 ms" if rtt else "green dashed: 1 ms"
    fig.suptitle(f"{title}\n{note}", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    return 0


def fmt(us: float) -> str:
    if us >= 1000:
        return f"{us / 1000:.1f} ms"
    return f"{us:.0f} µs"


if __name__ == "__main__":
    sys.exit(main())
