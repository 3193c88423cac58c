#!/usr/bin/env bash
# PROG_ARRAY values as program fds under `bpfjet exec`, against the kernel.
#
#  1. tests/preload/tail_calls.c (libbpf, built here), the same binary
#     against the kernel and under `bpfjet exec`: fills the PROG_ARRAY of
#     tc_progs.bpf.c with program fds, test-runs the entry (tail calls into
#     the programs put there), reads the slots back (program ids), deletes,
#     replaces, tries a frags program (the kernel's owner rule: EINVAL) and
#     a non-fd (EBADF). The outputs must be equal line by line.
#  2. Attached: Debian's bpftool loads the object, attaches the entry to a
#     veth (netlink: bpfjet's data plane, JIT) and fills slots while traffic
#     runs; verdict counts and what the stack receives as the kernel's.
#
# Needs root, bpftool, clang-19, libbpf-dev, iproute2.
# Usage: BPFJET=target/release/bpfjet tests/preload/tail_calls.sh
set -euo pipefail

BPFJET=${BPFJET:-target/release/bpfjet}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BPFJET=$(realpath "$BPFJET")
for tool in bpftool clang-19 cc ip python3; do
    command -v "$tool" >/dev/null || { echo "SKIPPED: $tool not installed" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
done
[ "$(id -u)" = 0 ] || { echo "SKIPPED: the kernel side needs root" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
[ -f "$(dirname "$BPFJET")/libbpfjet.so" ] || {
    echo "FAIL: $(dirname "$BPFJET")/libbpfjet.so missing (cargo build -p bpfjet-preload)"; exit 1; }
KERN=$(dirname "$BPFJET")/../../build/examples/xdp_kern/xsk_redirect.o
if [ -z "${BPFJET_XSK_KERN:-}" ] && [ ! -f "$KERN" ]; then
    make -s -C "$ROOT/examples" ../build/examples/xdp_kern/xsk_redirect.o
fi

# (libbpf turns dots of map pin paths into underscores: no dot in WORK.)
WORK=$(mktemp -d /tmp/bjtcXXXXXX)
INST=tailcalls$$
export BPFJET_RUN_DIR=$WORK/run
A=bjta$$; B=bjtb$$; VA=bjtv0; VB=bjtv1
mkdir -p "$WORK/kbpffs" "$WORK/jbpffs"
mount -t bpf bpf "$WORK/kbpffs"
mount -t bpf bpf "$WORK/jbpffs"
cleanup() {
    ip netns exec "$A" "$BPFJET" exec --instance "$INST" -- ip link set dev "$VA" xdpgeneric off >/dev/null 2>&1 || true
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
    umount "$WORK/kbpffs" "$WORK/jbpffs" 2>/dev/null || true
    rm -rf "$WORK"
    rm -f /dev/shm/bpfjet.$INST.*
}
trap cleanup EXIT

fails=0
. "$(dirname "$0")/lib.sh"
CHECK_LABELS="kernel bpfjet"
clang-19 -O2 -g -target bpf -I "/usr/include/$(uname -m)-linux-gnu" \
    -c "$ROOT/tests/preload/tc_progs.bpf.c" -o "$WORK/tc_progs.o"
cc -O2 -Wall -o "$WORK/tail_calls" "$ROOT/tests/preload/tail_calls.c" -lbpf

# ---- 1. libbpf's tail-call setup and test runs -----------------------------------
k=$("$WORK/tail_calls" "$WORK/tc_progs.o")
j=$("$BPFJET" exec --instance "$INST" -- "$WORK/tail_calls" "$WORK/tc_progs.o" 2>&1)
echo "$k" | sed 's/^/kernel: /'
n=0
while IFS= read -r line; do
    n=$((n + 1))
    check "${line%%:*}" "$line" "$(echo "$j" | sed -n "${n}p")"
done <<< "$k"
check "nothing more under exec (no stderr lines)" "$(echo "$k" | wc -l)" "$(echo "$j" | wc -l)"

# ---- 2. attached, slots filled while traffic runs ------------------------------
ip netns add "$A"; ip netns add "$B"
ip link add "$VA" netns "$A" type veth peer name "$VB" netns "$B"
ip -n "$A" addr add 10.203.0.1/24 dev "$VA"; ip -n "$B" addr add 10.203.0.2/24 dev "$VB"
ip -n "$A" link set "$VA" up; ip -n "$B" link set "$VB" up
MAC=$(ip -n "$A" -j link show "$VA" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["address"])')
send() { # n_9999 n_8888
    ip netns exec "$B" python3 "$ROOT/tests/preload/send_udp.py" "$VB" "$MAC" 10.203.0.2 10.203.0.1 "$1" "$2"
}
listen() {
    ip netns exec "$A" python3 "$ROOT/tests/preload/recv_udp.py" "$1"
}
deliver() { # n_9999 n_8888
    listen 2.5 > "$WORK/delivered" &
    local l=$!
    sleep 0.8
    send "$1" "$2"
    wait $l
    cat "$WORK/delivered"
}
hits() { "$@" bpftool -j map dump pinned "$PINS/m/hits" | python3 -c '
import json, sys
print(" ".join(str(e["formatted"]["value"]) for e in sorted(json.load(sys.stdin), key=lambda e: e["formatted"]["key"])))'; }
session() { # pins runner...
    PINS=$1; shift
    local r=("$@")
    ip netns exec "$A" "${r[@]}" bpftool prog loadall "$WORK/tc_progs.o" "$PINS/p" pinmaps "$PINS/m"
    ip netns exec "$A" "${r[@]}" ip link set dev "$VA" xdpgeneric pinned "$PINS/p/tc_entry"
    echo "empty: $(deliver 20 10)"
    ip netns exec "$A" "${r[@]}" bpftool map update pinned "$PINS/m/jumps" key 0 0 0 0 value pinned "$PINS/p/tc_drop"
    echo "slot 0 filled: $(deliver 20 10)"
    ip netns exec "$A" "${r[@]}" bpftool map update pinned "$PINS/m/jumps" key 2 0 0 0 value pinned "$PINS/p/tc_abort"
    echo "slot 2 filled: $(deliver 20 10)"
    ip netns exec "$A" "${r[@]}" bpftool map delete pinned "$PINS/m/jumps" key 0 0 0 0
    echo "slot 0 emptied: $(deliver 20 10)"
    sleep 0.5
    echo "hits: $(hits ip netns exec "$A" "${r[@]}")"
    ip netns exec "$A" "${r[@]}" ip link set dev "$VA" xdpgeneric off
}
ks=$(session "$WORK/kbpffs")
[ "$(echo "$ks" | grep -c ': ')" = 5 ] || { echo "FAIL the kernel session did not run: $ks"; exit 1; }
js=$(session "$WORK/jbpffs" "$BPFJET" exec --instance "$INST" --)
echo "$ks" | sed 's/^/kernel: /'
while IFS= read -r line; do
    key=${line%%:*}
    check "attached: $key" "$line" "$(echo "$js" | grep -m1 -F "$key:" || echo "(missing)")"
done <<< "$ks"

if [ $fails -ne 0 ]; then
    echo "tail_calls: $fails check(s) failed"; exit 1
fi
echo "tail_calls: all checks passed"
