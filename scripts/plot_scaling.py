#!/usr/bin/env python3
"""Plot the scaling sweep of `cargo bench --bench lock` on log-log axes.

    python3 scripts/plot_scaling.py AFTER.json [BEFORE.json] [OUT_DIR]

AFTER.json (and BEFORE.json, an earlier run to compare with, drawn dashed) are the
bench's `--json` files; only their `scaling_` keys are read. Writes
OUT_DIR/scaling-held.png (per held lock: client heap and RSS, server memory; watchdog
EVALs per period against locks/100; server CPU and tick length per period; acquire time
of the n-th lock) and OUT_DIR/scaling-waiters.png (per waiter: heap and RSS; wake-up
and subscribe latency p50/p99; time until every waiter is subscribed). OUT_DIR defaults
to docs/. Needs matplotlib (`pip install matplotlib`).
"""

import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HELD = [1, 10, 100, 1_000, 10_000, 100_000]
WAITERS = [1, 10, 100, 1_000, 10_000]


def series(fig, kind, steps, what):
    """(steps, values) of `scaling_<kind>_<n>_<what>` that the run has."""
    xs, ys = [], []
    for n in steps:
        v = fig.get(f"scaling_{kind}_{n}_{what}")
        if isinstance(v, (int, float)) and v > 0:
            xs.append(n)
            ys.append(v)
    return xs, ys


def panel(ax, runs, kind, steps, lines, title, unit):
    for label, fig, style in runs:
        for what, name, color in lines:
            xs, ys = series(fig, kind, steps, what)
            if xs:
                ax.plot(xs, ys, style, color=color, marker="o", ms=3,
                        label=f"{name}{label}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_title(title, fontsize=9)
    ax.set_ylabel(unit, fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6)


def main() -> int:
    args = sys.argv[1:]
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    after = json.load(open(args[0]))
    before = json.load(open(args[1])) if len(args) > 1 and args[1].endswith(".json") else None
    out_dir = args[-1] if len(args) > 1 and not args[-1].endswith(".json") else "docs"
    runs = [("", after, "-")]
    if before is not None:
        runs = [(" (after)", after, "-"), (" (before)", before, "--")]

    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    panel(axes[0][0], runs, "held", HELD, [
        ("heap_bytes_per_lock", "client heap", "#d62728"),
        ("rss_bytes_per_lock", "client RSS", "#ff9896"),
        ("server_bytes_per_lock", "server used_memory", "#1f77b4"),
        ("server_key_bytes", "MEMORY USAGE of one key", "#aec7e8"),
    ], "memory per held lock", "bytes")
    panel(axes[0][1], runs, "held", HELD, [
        ("evals_per_period", "watchdog EVALs", "#d62728"),
        ("evals_expected", "locks / 100", "#7f7f7f"),
    ], "renewal script calls per period", "calls")
    panel(axes[1][0], runs, "held", HELD, [
        ("tick_ms", "watchdog tick", "#d62728"),
        ("server_cpu_ms_per_period", "server CPU", "#1f77b4"),
        ("script_ms_per_period", "server script time", "#aec7e8"),
    ], "renewal cost per period", "ms")
    panel(axes[1][1], runs, "held", HELD, [
        ("acquire_us", "acquire n-th (p50 of last 100)", "#d62728"),
        ("acquire_p99_us", "acquire p99 of the step", "#ff9896"),
    ], "time to acquire the n-th lock", "µs")
    for ax in axes[1]:
        ax.set_xlabel("held locks", fontsize=8)
    fig.suptitle("scaling: one client holding n locks (renewal period 1 s)")
    fig.tight_layout()
    os.makedirs(out_dir, exist_ok=True)
    fig.savefig(os.path.join(out_dir, "scaling-held.png"), dpi=110)

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.5))
    panel(axes[0], runs, "waiters", WAITERS, [
        ("wake_p50_us", "wake-up p50", "#d62728"),
        ("wake_p99_us", "wake-up p99", "#ff9896"),
        ("subscribe_p50_us", "subscribe p50", "#1f77b4"),
        ("subscribe_p99_us", "subscribe p99", "#aec7e8"),
    ], "latency with n waiters", "µs")
    panel(axes[1], runs, "waiters", WAITERS, [
        ("subscribe_all_ms", "all n subscribed", "#1f77b4"),
    ], "time until every waiter is subscribed", "ms")
    panel(axes[2], runs, "waiters", WAITERS, [
        ("heap_bytes_per_waiter", "client heap", "#d62728"),
        ("rss_bytes_per_waiter", "client RSS (incl. stack)", "#ff9896"),
    ], "memory per waiting thread", "bytes")
    for ax in axes:
        ax.set_xlabel("waiting threads (distinct names)", fontsize=8)
    fig.suptitle("scaling: n threads of one client waiting, each on its own name")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "scaling-waiters.png"), dpi=110)
    print(f"wrote {out_dir}/scaling-held.png and {out_dir}/scaling-waiters.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
