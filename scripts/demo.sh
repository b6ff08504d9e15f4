#!/usr/bin/env bash
# The contention demo on a throwaway redis-server (or on REDIS_URL when set). The binary
# needs the `cli` feature (off by default, so library users never build clap).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --core
if [ -n "${REDIS_URL:-}" ]; then
  exec cargo run --release --quiet --features cli --bin redmutex -- demo --url "$REDIS_URL" "$@"
fi
exec cargo run --release --quiet --features cli --bin redmutex -- demo "$@"
