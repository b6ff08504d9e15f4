#!/usr/bin/env bash
# Build the go-redsync interop peer.
#
#   tests/interop/go/build.sh <outdir>
#
# Writes <outdir>/redsyncpeer, a static Go binary built from this module with the versions
# pinned in go.mod/go.sum (-mod=readonly: a build never changes the pins), by the Go
# release go.mod names or a newer one (toolchain.sh). Re-running is
# cheap: nothing is done while the binary is newer than every file here. Prints nothing on
# success; the go tool's output goes to stderr only when the build fails.
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 <outdir>" >&2
    exit 2
fi
mkdir -p "$1"
outdir="$(cd "$1" && pwd)"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="$outdir/redsyncpeer"

up_to_date() {
    [[ -x "$bin" ]] || return 1
    [[ -z "$(find "$here" -newer "$bin" -print -quit)" ]]
}

up_to_date && exit 0

# Serialize concurrent builds into the same outdir (e.g. parallel test processes).
exec 9>"$outdir/.build.lock"
flock 9
up_to_date && exit 0

# A `go` as new as go.mod asks (fetched from the Go module proxy when the one on PATH
# is older, e.g. Debian 12's 1.19); toolchain.sh says what is missing otherwise.
go="$("$here/toolchain.sh")"

log="$outdir/go-build.log"
tmp="$bin.tmp.$$"
status=0
# GOROOT unset: a fetched toolchain finds its own from where it lies; GOTOOLCHAIN=local:
# it is the one to use, whatever a go.env says.
(cd "$here" && env -u GOROOT CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" \
    "$go" build -trimpath -o "$tmp" .) \
    >"$log" 2>&1 || status=$?
if [[ $status -ne 0 ]]; then
    cat "$log" >&2
    rm -f "$tmp"
    echo "build.sh: go build failed (exit $status)" >&2
    exit "$status"
fi
mv "$tmp" "$bin"
