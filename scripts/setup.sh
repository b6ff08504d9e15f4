#!/usr/bin/env bash
# Installs what the demo and the tests need when it is missing (Debian packages, with
# apt-get; as root or through sudo), or says exactly what to install.
#
#   scripts/setup.sh          what scripts/test.sh and CI need: the core below, and the
#                             interop peers' tools (the `interop` feature's tests)
#   scripts/setup.sh --core   what the demo and plain `cargo test` need: redis-server,
#                             redis-cli, openssl (the TLS tests' certificates), kill
#
# The interop peers: Java 17 + Maven (the Redisson peer), a `go` (the go-redsync peer:
# go.mod asks for Go 1.25, which tests/interop/go/toolchain.sh fetches from the Go module
# proxy when the `go` here is older, as Debian 12's 1.19 is) and python3 3.10+ with venv
# (the redis-py peer; its build pins redis-py from PyPI). Their first builds need Maven
# Central, the Go module proxy and PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."

interop=1
case "${1:-}" in
  "") ;;
  --core) interop=0 ;;
  *) echo "usage: $0 [--core]" >&2; exit 2 ;;
esac

command -v cargo >/dev/null 2>&1 || { echo "setup: cargo is missing; install Rust (rustup) first" >&2; exit 1; }

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
# redis-cli creates the local clusters of tests/cluster, tests/redisson and the
# bench's cluster rows (`redis-cli --cluster create`); Debian ships it in redis-tools.
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
# The tests signal their child processes with the kill program (not the shell builtin).
[ -x /usr/bin/kill ] || [ -x /bin/kill ] || need+=(procps)
if [ "$interop" -eq 1 ]; then
  # The peer compiles with --release 17: a JDK (javac), 17 or newer.
  javac_major="$(javac -version 2>&1 | sed -n 's/^javac \([0-9]*\).*/\1/p')"
  if [ -z "$javac_major" ] || [ "$javac_major" -lt 17 ]; then
    need+=(openjdk-17-jdk-headless)
  fi
  command -v mvn >/dev/null 2>&1 || need+=(maven)
  # Any Go release: toolchain.sh below brings go.mod's.
  command -v go >/dev/null 2>&1 || need+=(golang-go)
  if ! command -v python3 >/dev/null 2>&1; then
    need+=(python3 python3-venv)
  elif ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    # Debian's python3 has no ensurepip without python3-venv, so `python3 -m venv` fails.
    need+=(python3-venv)
  fi
fi

if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null 2>&1; then
    echo "setup: please install these Debian packages: ${need[*]}" >&2
    exit 1
  fi
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "setup: installing ${need[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
# The Debian package starts a system redis on 6379; the tests never use it.

if [ "$interop" -eq 1 ]; then
  if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    echo "setup: the redis-py peer needs Python 3.10+, but python3 is $(python3 --version 2>&1)" >&2
    exit 1
  fi
  # Fetches Go 1.25 once when the `go` here is older; says why when it cannot.
  tests/interop/go/toolchain.sh >/dev/null
fi
