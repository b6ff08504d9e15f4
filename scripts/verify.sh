#!/usr/bin/env bash
# The history-checked verification harness (docs/verify.md): runs the matrix of
# topology x nemesis x workload, records every operation of every worker as JSON lines,
# checks the whole history (exclusion, loss honesty, fencing) and writes
#   target/verify/<run>/history/*.jsonl, report.json, report.md
# Exits non-zero on any violation (or if the run itself failed).
#
#   scripts/verify.sh [--quick] [--topology single|sentinel|cluster|all] [--nemesis LIST]
#                     [--workloads LIST] [--cells LIST] [--seconds N] [--seed S] [--java]
#
# --quick: the CI-sized run, a chosen subset of all three topologies (every nemesis at
#   least once; the list is QUICK in tests/harness/src/verify_run.rs), 5 s per
#   single-server cell and 8 s per Sentinel or Cluster cell; about 3 minutes on 2 cores.
#   With --topology or --nemesis it shortens their cells instead.
# --topology: one, a comma-separated list, or all (default single).
# --nemesis: comma-separated, `default` (each topology's own: single sigstop,proxy;
#   sentinel failover,kill_master; cluster failover,kill_master,migrate) or `all`:
#   none; sigstop (SIGSTOP the lock's holder past its lease); proxy (the fault proxy's
#   delay / reset / blackhole / freeze; single); slow (every reply delayed by half the
#   lease; single); restart (SIGKILL and restart the server, which fsyncs every write;
#   single); restart_volatile (the same without persistence: reports violations by
#   design; single); failover (SENTINEL FAILOVER, or CLUSTER FAILOVER on the replica of the
#   lock's master); kill_master (SIGKILL the lock's master; the sentinels or the cluster
#   promote a replica; the old one comes back as a replica); migrate (move the lock's
#   slot to another master; cluster); kill_worker (SIGKILL a worker process, start a
#   fresh one); pubsub_kill (CLIENT KILL TYPE pubsub on every data node); pause (CLIENT
#   PAUSE WRITE on the lock's master); script_flush (SCRIPT FLUSH on every data node);
#   starve (two busy threads per core); freeze_replicas (SIGSTOP the lock master's
#   replicas for 0.3-1.5 s: every WAIT times out; sentinel, cluster). A nemesis that does not apply to a topology is
#   skipped there.
# --workloads: comma-separated <kind>-<mode>: kinds lock, fenced, fair, rw, token with
#   modes lease, watchdog, handoff; semaphore-plain, semaphore-lease, latch-plain,
#   latch-shared
#   (docs/verify.md). --cells: explicit topology/nemesis/workload triples instead.
# --java: Redisson 4.7.0 and 3.23.5 history workers beside the Rust ones in every cell
#   but latch-plain, on every topology (needs Java 17 and Maven; builds the peers with
#   tests/interop/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
topology=single nemesis=default seconds=20 seed=$RANDOM quick=() java=() cells=()
workloads=lock-lease,lock-watchdog,fenced-lease
chosen=
while [ $# -gt 0 ]; do
    case "$1" in
        --topology) topology="$2"; chosen=1; shift 2 ;;
        --nemesis) nemesis="$2"; chosen=1; shift 2 ;;
        --seconds) seconds="$2"; shift 2 ;;
        --seed) seed="$2"; shift 2 ;;
        --workloads) workloads="$2"; shift 2 ;;
        --cells) cells=(--cells "$2"); shift 2 ;;
        --quick) quick=(--quick); shift ;;
        --java) java=(--java); shift ;;
        -h|--help) sed -n '2,/^set -euo/{/^#/p}' "$0"; exit 0 ;;
        *) echo "verify.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
if [ ${#quick[@]} -gt 0 ] && [ -z "$chosen" ] && [ ${#cells[@]} -eq 0 ]; then
    cells=(--cells quick)
fi
# The same build as the test suite's (--all-features), so no second compile; the
# seeded-bug features it includes stay inert without REDMUTEX_VERIFY_BROKEN.
cargo build --quiet --all-features -p redmutex -p redmutex-harness \
    --bin redmutex --bin redmutex-verify-run
target="${CARGO_TARGET_DIR:-target}"
if [ ${#java[@]} -gt 0 ]; then
    peers=()
    for v in 4.7.0 3.23.5; do
        tests/interop/build.sh "$v" "$target/interop/$v"
        peers+=("$v=$target/interop/$v/classpath.txt")
    done
    java=(--java "$(IFS=,; echo "${peers[*]}")")
fi
# The token-lease cells of the single topology get a go-redsync and a redis-py history
# worker when their toolchains are here (the builds are no-ops once done).
token=()
if [[ "$workloads ${cells[*]} ${quick[*]}" == *token* || ${#quick[@]} -gt 0 ]]; then
    peers=()
    if command -v go >/dev/null 2>&1 &&
        tests/interop/go/build.sh "$target/interop/go" >&2; then
        peers+=("go=$target/interop/go/redsyncpeer")
    else
        echo "verify: no go-redsync worker (no usable go); token-lease runs Rust only" >&2
    fi
    if command -v python3 >/dev/null 2>&1 &&
        tests/interop/python/build.sh "$target/interop/python" >&2; then
        peers+=("python=$target/interop/python/peer")
    else
        echo "verify: no redis-py worker (no usable python3); token-lease runs without it" >&2
    fi
    if [ ${#peers[@]} -gt 0 ]; then
        token=(--token-peers "$(IFS=,; echo "${peers[*]}")")
    fi
fi
run="target/verify/$(date -u +%Y%m%dT%H%M%SZ)-seed$seed"
echo "verify: $run (topology $topology, nemesis $nemesis, workloads $workloads, seed $seed)"
"$target/debug/redmutex-verify-run" --out "$run" --topology "$topology" \
    --nemesis "$nemesis" --workloads "$workloads" --seconds "$seconds" --seed "$seed" \
    --redmutex "$target/debug/redmutex" "${quick[@]}" "${cells[@]}" "${java[@]}" \
    "${token[@]}"
