#!/usr/bin/env bash
# The suite on a loaded machine: starts one busy loop per core (they compete with the
# tests' own redis-servers, JVMs and threads, as other work on a shared CI host does),
# runs the tests N times in a row (default 3), and reports each attempt's result, its
# time and the tests that failed in it. The busy loops stop when the script exits,
# however it exits.
#
#   scripts/stress-ci.sh [N]
#
# Environment:
#   STRESS_CARGO_ARGS  run `cargo test --all-features --no-fail-fast $STRESS_CARGO_ARGS`
#                      instead of the whole scripts/test.sh, e.g.
#                      STRESS_CARGO_ARGS='--test cluster --test sentinel --test redisson'
#                      (scripts/setup.sh still runs once first). Anything cargo test
#                      takes goes: targets, a name filter after `--`, `--test-threads`.
#   STRESS_LOAD        how many busy loops (default: one per core, `nproc`; 0: none).
#   STRESS_LOG_DIR     where each attempt's full output goes (default target/stress-ci).
#
# Exit status: 0 when every attempt passed, else 1. The last lines list, per attempt,
# each failed test as `<test binary>: <test name>`.
set -uo pipefail
cd "$(dirname "$0")/.."

attempts="${1:-3}"
case "$attempts" in
    '' | *[!0-9]* | 0)
        echo "usage: $0 [attempts (a positive number, default 3)]" >&2
        exit 2
        ;;
esac
load="${STRESS_LOAD:-$(nproc)}"
log_dir="${STRESS_LOG_DIR:-target/stress-ci}"
mkdir -p "$log_dir"

busy=()
stop_load() {
    # Only the loops this script started, by their ids.
    if ((${#busy[@]})); then
        kill "${busy[@]}" 2>/dev/null
        wait "${busy[@]}" 2>/dev/null
        busy=()
    fi
}
trap stop_load EXIT
trap 'stop_load; exit 130' INT
trap 'stop_load; exit 143' TERM

if [[ -n "${STRESS_CARGO_ARGS:-}" ]]; then
    scripts/setup.sh || exit 1
    # shellcheck disable=SC2206 # word splitting is the point: several cargo arguments
    cargo_args=($STRESS_CARGO_ARGS)
    run_attempt() { cargo test --all-features --no-fail-fast "${cargo_args[@]}"; }
    what="cargo test --all-features --no-fail-fast $STRESS_CARGO_ARGS"
else
    run_attempt() { scripts/test.sh; }
    what="scripts/test.sh"
fi

for ((i = 0; i < load; i++)); do
    # A shell busy loop: pure CPU, no I/O, killed by its id in stop_load.
    (while :; do :; done) &
    busy+=($!)
done
echo "stress-ci: $load busy loop(s) on $(nproc) core(s); $attempts attempt(s) of: $what"

# The failed tests of one attempt's log, as `<binary>: <test>`: cargo prints
# `Running <target> (<path>)` before each binary's tests, and `test <name> ... FAILED`.
failed_tests() {
    awk '
        /^ *Running / { bin = $0; sub(/^ *Running /, "", bin); sub(/ \(.*$/, "", bin) }
        /^ *Doc-tests / { bin = $0; sub(/^ */, "", bin) }
        /^test .* \.\.\. FAILED$/ { sub(/^test /, ""); sub(/ \.\.\. FAILED$/, ""); print bin ": " $0 }
    ' "$1"
}

summary=()
failures=0
for ((n = 1; n <= attempts; n++)); do
    log="$log_dir/attempt-$n.log"
    started=$(date +%s)
    echo "stress-ci: attempt $n/$attempts (log: $log), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    run_attempt >"$log" 2>&1
    rc=$?
    took=$(($(date +%s) - started))
    if ((rc == 0)); then
        line="attempt $n: passed in ${took}s"
    else
        failures=$((failures + 1))
        tests=$(failed_tests "$log")
        line="attempt $n: FAILED (exit $rc) in ${took}s"
        if [[ -n "$tests" ]]; then
            line+=$'\n'"$(sed 's/^/    failed: /' <<<"$tests")"
        else
            # Not a test's failure: setup, a build, the examples or the benchmark step.
            line+=$'\n'"    no failed test named; the log ends with:"
            line+=$'\n'"$(tail -n 5 "$log" | sed 's/^/    | /')"
        fi
    fi
    echo "stress-ci: $line"
    summary+=("$line")
done

stop_load
echo
echo "stress-ci summary ($what, $load busy loop(s), $attempts attempt(s)):"
printf '%s\n' "${summary[@]}"
if ((failures)); then
    echo "stress-ci: $failures of $attempts attempt(s) failed"
    exit 1
fi
echo "stress-ci: all $attempts attempt(s) passed"
