#!/usr/bin/env bash
# Print the path of a `go` command new enough for this module (the `go` line of go.mod).
#
#   tests/interop/go/toolchain.sh
#
# The `go` on PATH when it is new enough. Otherwise the Go release go.mod names, fetched
# as the module golang.org/toolchain from the Go module proxy into the module cache
# (checked against the checksum database, as Go's own GOTOOLCHAIN switch does) by the
# `go` on PATH, whatever its version: Debian 12's Go 1.19 predates GOTOOLCHAIN but can
# download a module. A second run finds it in the cache. Fails, saying why, when there
# is no `go` at all or the download fails.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
want="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$here/go.mod")"
[[ -n "$want" ]] || { echo "toolchain.sh: no go line in $here/go.mod" >&2; exit 1; }

if ! command -v go >/dev/null 2>&1; then
    echo "toolchain.sh: \`go\` is not on PATH (any Go release will do, e.g. Debian's golang-go: it fetches Go $want from the module proxy)" >&2
    exit 1
fi

# `go1.25.0` → 1 25 0, for a numeric comparison.
numbers() { echo "$1" | sed 's/^go//; s/[^0-9.].*//' | awk -F. '{ printf "%d %d %d", $1, $2, $3 }'; }
at_least() {
    local a b
    read -r -a a <<<"$(numbers "$1")"
    read -r -a b <<<"$(numbers "$2")"
    for i in 0 1 2; do
        ((a[i] > b[i])) && return 0
        ((a[i] < b[i])) && return 1
    done
    return 0
}

# GOTOOLCHAIN=local: the version of this very binary, not one it would switch to.
have="$(GOTOOLCHAIN=local go env GOVERSION 2>/dev/null || go version | awk '{ print $3 }')"
if at_least "$have" "$want"; then
    command -v go
    exit 0
fi

case "$(uname -m)" in
    x86_64) arch=amd64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) echo "toolchain.sh: no Go toolchain module for $(uname -m)" >&2; exit 1 ;;
esac
module="golang.org/toolchain@v0.0.1-go$want.linux-$arch"
# Outside any module (go.mod here asks for a newer Go than the one doing the download).
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
if ! dir="$(cd "$scratch" && GO111MODULE=on GOTOOLCHAIN=local \
    go mod download -json "$module" 2>"$scratch/err" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')" ||
    [[ -z "$dir" || ! -f "$dir/bin/go" ]]; then
    cat "$scratch/err" >&2
    echo "toolchain.sh: $have is older than go.mod's $want, and fetching $module from the Go module proxy failed" >&2
    exit 1
fi
# A module zip keeps no execute bits; Go's own switch sets them on first use, so do we.
if [[ ! -x "$dir/bin/go" ]]; then
    find "$dir/bin" "$dir/pkg/tool" -type f -exec chmod a+x {} +
fi
echo "$dir/bin/go"
