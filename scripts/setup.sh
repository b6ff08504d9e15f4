#!/usr/bin/env bash
# Installs what the demo and the tests need when it is missing: redis-server (the test
# backend), and Java 17 + Maven (the real Redisson client the interop suite runs).
set -euo pipefail

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
# redis-cli creates the local clusters of tests/cluster, tests/redisson_cluster and the
# bench's cluster rows (`redis-cli --cluster create`); Debian ships it in redis-tools.
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || need+=(maven)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v cargo >/dev/null 2>&1 || { echo "setup: cargo is missing; install Rust (rustup) first" >&2; exit 1; }

if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null 2>&1; then
    echo "setup: please install: ${need[*]}" >&2
    exit 1
  fi
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "setup: installing ${need[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
# The Debian package starts a system redis on 6379; the tests never use it.
