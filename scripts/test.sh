#!/usr/bin/env bash
# The whole test suite: unit, integration (each test binary starts its own redis-server
# processes on free loopback ports; `cluster` and `redisson` start a local 3 + 3
# Redis Cluster once per binary with redis-cli), the cross-language suites (the Redisson
# peer built with Maven for each Redisson version, the go-redsync and redis-py peers), the
# examples (each checks its own result), doctests, a quick benchmark run through
# `redmutex bench` that must produce valid JSON, and the quick verification matrix.
#
# --all-features: the `redmutex` binary and the tests that start it need the `cli`
# feature, off by default to keep clap and friends out of library builds; the
# cross-language suites need the `interop` feature, off by default so that plain
# `cargo test` needs nothing but redis-server and redis-cli. scripts/setup.sh installs
# what both need.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo test --all-features
out="$(mktemp -d)/bench.json"
cargo run --release --quiet --all-features --bin redmutex -- bench --quick --json "$out"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["uncontended_1t_cycles_per_sec"] > 0, d' "$out"
echo "benchmark quick run wrote valid JSON: $out"
# The history-checked verification matrix, CI-sized: every nemesis on the three
# topologies, each history judged by every checker (docs/verify.md). It holds the
# Sentinel and Cluster failover cells that tests/process/verify.rs leaves to it.
scripts/verify.sh --quick
