#!/usr/bin/env bash
# The server matrix: the test binaries run once per server, each with REDMUTEX_SERVER
# set (src/admin/servers.rs), on the one test build (`cargo test --all-features
# --no-run`, a no-op after scripts/test.sh; nothing is compiled twice).
#
#   scripts/matrix.sh                  every test binary on every server (the doctests
#                                      are left out: they start no server of the matrix)
#   scripts/matrix.sh --smoke          the CI subset (SMOKE below) on the three servers
#                                      other than the default, Redisson 4.7.0 only
#   scripts/matrix.sh --servers redis-6.2,valkey-8.1 [--binaries single,cluster]
#
# Servers: redis-7.0 (Debian's, the default), redis-6.2, redis-8.2, valkey-8.1; the last
# three are fetched by scripts/servers.sh (called here). A log per server and binary
# goes to target/matrix/; the closing table gives each one's counts and time, and the
# last line sums them up as "N passed, N failed".
set -euo pipefail

# All of it in one function: bash reads a function whole before it runs it, so editing
# this file during a run cannot change the run.
main() {
  cd "$(dirname "$0")/.."

  # The smoke subset, per test binary: exclusion with an exact counter, wake-ups both
  # ways with Redisson, fair order, semaphore wake-up, watchdog renewal (single server and
  # cluster batches), sharded/plain wake-ups on every shard, one sentinel failover,
  # replica sync (cluster and sentinel).
  SMOKE_single="server::the_spawned_server_is_the_one_redmutex_server_names wait::threads_of_several_clients_never_overlap fair_lock::waiters_acquire_in_arrival_order semaphore::a_waiter_wakes_on_a_release lease::the_watchdog_keeps_a_lock_alive"
  SMOKE_redisson_interop="lock::scenario_1_mixed_mutual_exclusion lock::scenario_2_rust_holds_java_waits lock::scenario_3_java_reentrant_rust_waits"
  SMOKE_cluster="shards::locks_in_every_shard_are_handed_off_by_message shards::a_waiter_wakes_on_spublish_and_on_publish shards::forced_modes_subscribe_and_publish_one_kind lease::the_watchdog_keeps_a_lock_alive replica_sync::every_acquire_waits_on_its_own_master_and_none_when_the_check_is_off"
  SMOKE_redisson="cluster::wake_ups_both_ways_on_every_shard_publish_as_redisson_does cluster::mixed_mutual_exclusion_keeps_an_exact_counter"
  SMOKE_sentinel="failover::sentinel_failover_keeps_or_reports_holds_and_every_waiter_acquires replica_sync::every_acquire_is_followed_by_one_wait_and_none_when_the_check_is_off"
  SMOKE_BINARIES="single redisson_interop cluster redisson sentinel"

  smoke=0
  servers=""
  binaries=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --smoke) smoke=1 ;;
      --servers) servers="${2//,/ }"; shift ;;
      --binaries) binaries="${2//,/ }"; shift ;;
      *) echo "usage: $0 [--smoke] [--servers a,b] [--binaries x,y]" >&2; exit 2 ;;
    esac
    shift
  done
  if [ -z "$servers" ]; then
    if [ "$smoke" -eq 1 ]; then
      servers="redis-6.2 redis-8.2 valkey-8.1"
    else
      servers="redis-7.0 redis-6.2 redis-8.2 valkey-8.1"
    fi
  fi

  scripts/servers.sh $servers >/dev/null

  # The test executables of the build, by target name (unit tests: `lib-<crate>`, `bin-<name>`).
  target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
  logs="$PWD/target/matrix"
  mkdir -p "$logs"
  listing="$logs/executables.txt"
  cargo test --all-features --no-run --message-format=json 2>"$logs/build.log" \
    | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        kind = m["target"]["kind"][0]
        name = m["target"]["name"]
        if kind in ("lib", "bin"):
            name = kind + "-" + name
        print(name, m["executable"], kind)
  ' >"$listing" || { cat "$logs/build.log" >&2; exit 1; }

  if [ -z "$binaries" ]; then
    if [ "$smoke" -eq 1 ]; then
      binaries="$SMOKE_BINARIES"
    else
      binaries="$(awk '{print $1}' "$listing" | tr '\n' ' ')"
    fi
  fi

  if [ "$smoke" -eq 1 ]; then
    # One Redisson version: the smoke is about the servers; the full runs take both.
    export REDMUTEX_REDISSON_VERSIONS="${REDMUTEX_REDISSON_VERSIONS:-4.7.0}"
  fi

  table="$logs/table.txt"
  : >"$table"
  total_pass=0
  total_fail=0
  started_all=$(date +%s)
  status=0
  for server in $servers; do
    for bin in $binaries; do
      exe="$(awk -v b="$bin" '$1 == b {print $2}' "$listing")"
      if [ -z "$exe" ]; then
        echo "matrix: no test binary $bin (see $listing)" >&2
        exit 2
      fi
      kind="$(awk -v b="$bin" '$1 == b {print $3}' "$listing")"
      args=()
      filters=()
      # A harness-less example is a program that checks its own result: no test flags.
      if [ "$kind" != example ]; then
        args=(--show-output)
      fi
      if [ "$smoke" -eq 1 ]; then
        var="SMOKE_$bin"
        # shellcheck disable=SC2206
        filters=(${!var})
        args+=(--exact "${filters[@]}")
      fi
      log="$logs/$server-$bin.log"
      echo "== $server: $bin${filters[*]:+ (${#filters[@]} tests)}"
      t0=$(date +%s)
      rc=0
      # The test binaries run in the crate root (where cargo runs them), with the
      # target dir the peers build under.
      # --show-output: the tests that return early where the server lacks a feature say
      # so on their output ("skipped: ..."), counted below.
      REDMUTEX_SERVER="$server" CARGO_TARGET_DIR="$target_dir" "$exe" "${args[@]}" >"$log" 2>&1 || rc=$?
      secs=$(( $(date +%s) - t0 ))
      line="$(grep -E '^test result:' "$log" | tail -1 || true)"
      pass="$(sed -n 's/.* \([0-9]*\) passed.*/\1/p' <<<"$line")"
      fail="$(sed -n 's/.* \([0-9]*\) failed.*/\1/p' <<<"$line")"
      ignored="$(sed -n 's/.* \([0-9]*\) ignored.*/\1/p' <<<"$line")"
      pass="${pass:-0}"; fail="${fail:-0}"; ignored="${ignored:-0}"
      if [ "$rc" -ne 0 ] && [ "$fail" -eq 0 ]; then
        fail=1 # crashed before its summary
      elif [ "$kind" = example ] && [ "$rc" -eq 0 ]; then
        pass=1 # the example ran to its own check
      fi
      skipped="$(grep -c '^skipped: ' "$log" || true)"
      total_pass=$((total_pass + pass))
      total_fail=$((total_fail + fail))
      printf '%-11s %-18s %4s passed %3s failed %3s ignored %3s skipped (server lacks a feature) %5ss\n' \
        "$server" "$bin" "$pass" "$fail" "$ignored" "$skipped" "$secs" | tee -a "$table"
      if [ "$fail" -ne 0 ]; then
        status=1
        grep -E '^test .* FAILED$' "$log" | sed 's/^/    /' || true
        echo "    log: $log"
      fi
    done
  done
  echo
  echo "== matrix ($( [ "$smoke" -eq 1 ] && echo smoke || echo full )) in $(( $(date +%s) - started_all ))s"
  cat "$table"
  echo "matrix: $total_pass passed, $total_fail failed"
  exit "$status"
}

main "$@"
