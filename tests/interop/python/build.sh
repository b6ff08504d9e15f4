#!/usr/bin/env bash
# Build the redis-py interop peer: a venv with the pinned redis-py release.
#
#   tests/interop/python/build.sh <outdir>
#
# Creates <outdir>/venv (python3 -m venv; pip install --require-hashes -r requirements.txt)
# and <outdir>/peer, a launcher that runs this directory's peer.py with the venv's Python:
#   <outdir>/peer redis://127.0.0.1:6379/
# Re-running is cheap: nothing is done while <outdir>/peer is newer than requirements.txt
# and this script. Prints nothing on success; pip's output goes to stderr on failure.
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 <outdir>" >&2
    exit 2
fi
mkdir -p "$1"
outdir="$(cd "$1" && pwd)"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
launcher="$outdir/peer"
venv="$outdir/venv"

up_to_date() {
    [[ -x "$launcher" && -x "$venv/bin/python" ]] || return 1
    [[ -z "$(find "$here/requirements.txt" "$here/build.sh" -newer "$launcher" -print -quit)" ]]
}

up_to_date && exit 0

# Serialize concurrent builds into the same outdir (e.g. parallel test processes).
exec 9>"$outdir/.build.lock"
flock 9
up_to_date && exit 0

if ! command -v python3 >/dev/null 2>&1; then
    echo "build.sh: python3 (3.10+, with the venv module) is not on PATH" >&2
    exit 1
fi

rm -f "$launcher"
log="$outdir/pip.log"
status=0
{
    rm -rf "$venv" &&
        python3 -m venv "$venv" &&
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
            --require-hashes -r "$here/requirements.txt"
} >"$log" 2>&1 || status=$?
if [[ $status -ne 0 ]]; then
    cat "$log" >&2
    echo "build.sh: creating the redis-py venv failed (exit $status)" >&2
    exit "$status"
fi

tmp="$launcher.tmp.$$"
printf '#!/bin/sh\nexec "%s" -u "%s" "$@"\n' "$venv/bin/python" "$here/peer.py" >"$tmp"
chmod +x "$tmp"
mv "$tmp" "$launcher"
