#!/usr/bin/env bash
# The whole test suite: unit, integration (each test binary starts its own redis-server
# processes on free loopback ports; `cluster` and `redisson_cluster` start a local 3 + 3
# Redis Cluster once per binary with redis-cli), the Redisson interop suite (builds the Java peer
# with Maven for each Redisson version), the examples (each checks its own result),
# doctests, and a quick benchmark run through `redmutex bench` that must produce valid
# JSON.
#
# --all-features: the `redmutex` binary and the tests that start it need the `cli`
# feature, which is off by default to keep clap and friends out of library builds.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo test --all-features
out="$(mktemp -d)/bench.json"
cargo run --release --quiet --all-features --bin redmutex -- bench --quick --json "$out"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["uncontended_1t_cycles_per_sec"] > 0, d' "$out"
echo "benchmark quick run wrote valid JSON: $out"
