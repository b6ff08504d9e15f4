#!/usr/bin/env bash
# The history-checked verification harness (docs/verify.md): runs the matrix of
# topology x nemesis x workload, records every operation of every worker as JSON lines,
# checks the whole history (exclusion, loss honesty, fencing) and writes
#   target/verify/<run>/history/*.jsonl, report.json, report.md
# Exits non-zero on any violation (or if the run itself failed).
#
#   scripts/verify.sh [--topology single|sentinel|cluster|all] [--nemesis LIST]
#                     [--seconds N] [--seed S] [--quick] [--workloads LIST] [--java]
#
# --nemesis: comma-separated, from none, sigstop (SIGSTOP the lock's holder past its
# lease, then SIGCONT), proxy (the fault proxy's delay / reset / blackhole / freeze),
# slow (every reply delayed by half the lease).
# --workloads: comma-separated <kind>-<mode>: kinds lock, fenced, fair, rw with modes
# lease, watchdog, handoff; and semaphore-plain (docs/verify.md). --quick: 5 s per cell. --java: Redisson 4.7.0 and 3.23.5 history
# workers beside the Rust ones on the lock workloads (needs Java 17 and Maven; builds the
# peers with tests/interop/build.sh). Only the single topology is built so far.
set -euo pipefail
cd "$(dirname "$0")/.."
topology=single nemesis=sigstop,proxy seconds=20 seed=$RANDOM quick=() java=()
workloads=lock-lease,lock-watchdog,fenced-lease
while [ $# -gt 0 ]; do
    case "$1" in
        --topology) topology="$2"; shift 2 ;;
        --nemesis) nemesis="$2"; shift 2 ;;
        --seconds) seconds="$2"; shift 2 ;;
        --seed) seed="$2"; shift 2 ;;
        --workloads) workloads="$2"; shift 2 ;;
        --quick) quick=(--quick); shift ;;
        --java) java=(--java); shift ;;
        -h|--help) sed -n '2,/^set -euo/{/^#/p}' "$0"; exit 0 ;;
        *) echo "verify.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
# The same build as the test suite's (--all-features), so no second compile; the
# seeded-bug feature it includes stays inert without REDMUTEX_VERIFY_BROKEN.
cargo build --quiet --all-features --bin redmutex
target="${CARGO_TARGET_DIR:-target}"
bin="$target/debug/redmutex"
if [ ${#java[@]} -gt 0 ]; then
    peers=()
    for v in 4.7.0 3.23.5; do
        tests/interop/build.sh "$v" "$target/interop/$v"
        peers+=("$v=$target/interop/$v/classpath.txt")
    done
    java=(--java "$(IFS=,; echo "${peers[*]}")")
fi
run="target/verify/$(date -u +%Y%m%dT%H%M%SZ)-seed$seed"
echo "verify: $run (topology $topology, nemesis $nemesis, workloads $workloads, seed $seed)"
"$bin" verify-run --out "$run" --topology "$topology" --nemesis "$nemesis" \
    --workloads "$workloads" --seconds "$seconds" --seed "$seed" "${quick[@]}" "${java[@]}"
