#!/usr/bin/env bash
# The whole test suite: unit, integration (each test binary starts its own redis-server
# processes on free loopback ports), the Redisson interop suite (builds the Java peer
# with Maven for each Redisson version), doctests, and a quick benchmark run that must
# produce valid JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo test
out="$(mktemp -d)/bench.json"
cargo bench --bench lock -- --quick --json "$out"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["uncontended_1t_cycles_per_sec"] > 0, d' "$out"
echo "benchmark quick run wrote valid JSON: $out"
