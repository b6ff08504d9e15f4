#!/usr/bin/env bash
# Build the Redisson interop peer for one Redisson release, or (with --shedlock) the
# ShedLock peer in shedlock/ for one ShedLock release.
#
#   tests/interop/build.sh <redisson-version> <outdir>
#   tests/interop/build.sh --shedlock <provider>-<shedlock-version> <outdir>
#
# where <provider> is spring (shedlock-provider-redis-spring on Lettuce) or jedis
# (shedlock-provider-redis-jedis4), e.g. spring-7.10.1 or jedis-5.12.0.
#
# Compiles into <outdir>/build (so several versions can coexist) and writes
# <outdir>/classpath.txt, a complete absolute java classpath:
#   java -cp "$(cat <outdir>/classpath.txt)" dev.redmutex.interop.Peer redis://127.0.0.1:6379 30000
# Re-running is cheap: nothing is done while classpath.txt is newer than the
# sources, the pom and this script and was built for the same version.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
project="$here"
property=redisson.version
extra=()
if [[ "${1:-}" == "--shedlock" ]]; then
    shift
    project="$here/shedlock"
    property=shedlock.version
    extra=(-Dshedlock.provider="${1%%-*}")
    set -- "${1#*-}" "${@:2}"
fi
if [[ $# -ne 2 ]]; then
    echo "usage: $0 [--shedlock] <version> <outdir>" >&2
    exit 2
fi
version="$1"
mkdir -p "$2"
outdir="$(cd "$2" && pwd)"

cp_file="$outdir/classpath.txt"
stamp="$outdir/redisson.version"

up_to_date() {
    [[ -f "$cp_file" && -f "$stamp" && "$(cat "$stamp")" == "$property=$version ${extra[*]}" ]] || return 1
    [[ -z "$(find "$project/pom.xml" "$here/build.sh" "$project/src" -newer "$cp_file" -print -quit)" ]]
}

up_to_date && exit 0

# Serialize concurrent builds into the same outdir (e.g. parallel test processes).
exec 9>"$outdir/.build.lock"
flock 9
up_to_date && exit 0

rm -f "$cp_file"
build="$outdir/build"
deps="$build/dependency-classpath.txt"

mkdir -p "$build"
log="$build/mvn.log"
# Debian's maven emits stray ANSI resets even with -B; strip them and
# send whatever quiet output remains (warnings, errors) to stderr.
status=0
mvn -B -q -f "$project/pom.xml" \
    -D"$property"="$version" "${extra[@]}" \
    -DbuildDirectory="$build" \
    -DclasspathFile="$deps" \
    process-classes >"$log" 2>&1 || status=$?
sed -e 's/\x1b\[[0-9;]*m//g' "$log" | grep -v '^[[:space:]]*$' >&2 || true
if [[ $status -ne 0 ]]; then
    echo "build.sh: maven failed (exit $status) for $property $version" >&2
    exit "$status"
fi

if [[ ! -d "$build/classes" || ! -s "$deps" ]]; then
    echo "build.sh: maven finished but $build/classes or $deps is missing" >&2
    exit 1
fi

printf '%s' "$property=$version ${extra[*]}" > "$stamp"
tmp="$cp_file.tmp.$$"
printf '%s:%s\n' "$build/classes" "$(tr -d '\n' < "$deps")" > "$tmp"
mv "$tmp" "$cp_file"
