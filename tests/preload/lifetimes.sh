#!/usr/bin/env bash
# Object lifetimes across processes: a map whose creator exits at once
# while a forked child holds the inherited fd and another process holds
# it received over a unix socket (SCM_RIGHTS). The map must be listed while
# any of them holds an fd and be gone when the last one ends — against the
# kernel and under `bpfjet exec`, the same binary (tests/preload/lifetimes.c).
#
# Needs root, bpftool, cc, libbpf-dev.
# Usage: BPFJET=target/release/bpfjet tests/preload/lifetimes.sh
set -euo pipefail

BPFJET=${BPFJET:-target/release/bpfjet}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BPFJET=$(realpath "$BPFJET")
for tool in bpftool cc python3; do
    command -v "$tool" >/dev/null || { echo "SKIPPED: $tool not installed" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
done
[ "$(id -u)" = 0 ] || { echo "SKIPPED: the kernel side needs root" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
[ -f "$(dirname "$BPFJET")/libbpfjet.so" ] || {
    echo "FAIL: $(dirname "$BPFJET")/libbpfjet.so missing (cargo build -p bpfjet-preload)"; exit 1; }

WORK=$(mktemp -d)
INST=lifetimes$$
export BPFJET_RUN_DIR=$WORK/run
trap 'rm -rf "$WORK"; rm -f /dev/shm/bpfjet.$INST.*' EXIT
cc -O2 -Wall -o "$WORK/lifetimes" "$ROOT/tests/preload/lifetimes.c" -lbpf
MAP=lt_$$

# How many maps named $MAP are listed: "0" or "1".
listed() { "$@" bpftool -j map show | python3 -c '
import json, sys; print(sum(m.get("name") == sys.argv[1] for m in json.load(sys.stdin)))' "$MAP"; }

# One run: the creator (which exits at once), the receiver and the
# creator's child; the map is listed at 0.5 s (creator gone, both others
# hold it), at 3.2 s (the child ended, the receiver ended) it is not.
session() { # side runner...
    local sock=$WORK/sock.$1; shift
    "$@" "$WORK/lifetimes" receive "$sock" > "$WORK/recv.out" &
    local r=$!
    "$@" "$WORK/lifetimes" create "$MAP" "$sock"
    sleep 0.5
    echo "listed while held by the child and the receiver: $(listed "$@")"
    wait $r
    cat "$WORK/recv.out"
    echo "listed while held by the child only: $(listed "$@")"
    sleep 1.5
    echo "listed after every holder ended: $(listed "$@")"
}
k=$(session kernel env)
echo "kernel:"; echo "$k" | sed 's/^/  /'
j=$(session bpfjet "$BPFJET" exec --instance "$INST" --)
echo "bpfjet exec:"; echo "$j" | sed 's/^/  /'
if [ "$k" != "$j" ]; then
    echo "FAIL lifetimes: bpfjet's session differs from the kernel's"; exit 1
fi
echo "ok   the same lifetimes as the kernel's (fork, SCM_RIGHTS, creator gone first)"
echo "lifetimes: all passed"
