#!/usr/bin/env bash
# A libbpf skeleton application, the same binary against the kernel and
# under `bpfjet exec` (issue 12's third acceptance test).
#
# examples/control_plane/skel_app.c: globals set through the skeleton
# (.rodata before load, .bss read through its mmap while the program runs),
# a hash map (the block list) updated while traffic runs, drop events
# consumed with ring_buffer__poll, XDP attached through a bpf_link. UDP
# traffic comes from the peer namespace of a veth pair. Everything the
# application prints, and what the stack of its namespace receives, must be
# the same on both sides.
#
# Needs root, bpftool, clang-19, libbpf-dev, iproute2, python3.
# Usage: BPFJET=target/release/bpfjet tests/preload/skeleton.sh
set -euo pipefail

BPFJET=${BPFJET:-target/release/bpfjet}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BPFJET=$(realpath "$BPFJET")
for tool in bpftool clang-19 cc ip python3; do
    command -v "$tool" >/dev/null || { echo "SKIPPED: $tool not installed" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
done
[ "$(id -u)" = 0 ] || { echo "SKIPPED: network namespaces and the kernel side need root" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
[ -f "$(dirname "$BPFJET")/libbpfjet.so" ] || {
    echo "FAIL: $(dirname "$BPFJET")/libbpfjet.so missing (cargo build -p bpfjet-preload)"; exit 1; }

WORK=$(mktemp -d)
INST=skel$$
export BPFJET_RUN_DIR=$WORK/run
A=bjsa$$; B=bjsb$$; VA=bjsv0; VB=bjsv1
cleanup() {
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
    rm -rf "$WORK"
    rm -f /dev/shm/bpfjet.$INST.*
}
trap cleanup EXIT

# The application, built as a user of libbpf builds one.
SRC=$ROOT/examples/control_plane
clang-19 -O2 -g -target bpf -I "/usr/include/$(uname -m)-linux-gnu" \
    -c "$SRC/skel_app.bpf.c" -o "$WORK/skel_app.bpf.o"
bpftool gen skeleton "$WORK/skel_app.bpf.o" name skel_app > "$WORK/skel_app.skel.h"
cc -O2 -Wall -I "$WORK" -o "$WORK/skel_app" "$SRC/skel_app.c" -lbpf

ip netns add "$A"; ip netns add "$B"
ip link add "$VA" netns "$A" type veth peer name "$VB" netns "$B"
ip -n "$A" addr add 10.202.0.1/24 dev "$VA"; ip -n "$B" addr add 10.202.0.2/24 dev "$VB"
ip -n "$A" link set "$VA" up; ip -n "$B" link set "$VB" up
MAC=$(ip -n "$A" -j link show "$VA" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["address"])')

send() { # n_to_9999 n_to_8888
    ip netns exec "$B" python3 "$ROOT/tests/preload/send_udp.py" "$VB" "$MAC" 10.202.0.2 10.202.0.1 "$1" "$2"
}
# N datagrams to port 8888 from a UDP socket of the peer: the veth leaves
# their checksums to offload (CHECKSUM_PARTIAL), which AF_XDP copies do
# not finish; bpfjet completes them before passing them to the stack.
sock_send() {
    ip netns exec "$B" python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(int(sys.argv[1])):
    s.sendto(b"from a socket", ("10.202.0.1", 8888))' "$1"
}
# Datagrams the stack of namespace A receives during SECONDS, "8888 9999".
listen() {
    ip netns exec "$A" python3 "$ROOT/tests/preload/recv_udp.py" "$1"
}

# One session: three phases of traffic (10 datagrams to the watched port
# 9999, 5 to 8888): before the block, with the peer blocked, after it.
session() { # side runner...
    local side=$1; shift
    listen 9 > "$WORK/$side.delivered" &
    local l=$!
    { sleep 1.5
      send 10 5; sleep 0.7; echo "wait 10"
      echo "block 10.202.0.2"; echo "block 10.202.0.9"; echo "block 10.202.0.2"; sleep 0.5
      send 10 5; sleep 0.7; echo "wait 20"; echo "poll 10"; echo list
      echo "unblock 10.202.0.2"; echo "unblock 10.202.0.2"; sleep 0.5
      send 10 5; sleep 0.7; echo "wait 30"; echo "poll 0"; echo list
      sock_send 5; sleep 0.7
      echo quit
    } | ip netns exec "$A" "$@" "$WORK/skel_app" "$VA" 9999 > "$WORK/$side.out"
    wait $l
}

fails=0
. "$(dirname "$0")/lib.sh"

session kernel
echo "kernel session:"; sed 's/^/  /' "$WORK/kernel.out"
echo "  delivered (8888 9999): $(cat "$WORK/kernel.delivered")"
check "kernel: the session ran to its end" "yes" \
    "$(grep -q '^watched 30 blocked_drops 10$' "$WORK/kernel.out" && echo yes || echo no)"

session bpfjet "$BPFJET" exec --instance "$INST" --
check "skeleton session output as the kernel's" "$(cat "$WORK/kernel.out")" "$(cat "$WORK/bpfjet.out")"
check "datagrams the stack received (8888 9999) as the kernel's" \
    "$(cat "$WORK/kernel.delivered")" "$(cat "$WORK/bpfjet.delivered")"
check "the link closed with the application: no attachment left" "no attachments" \
    "$("$BPFJET" status --instance "$INST")"

# ---- a control plane that is killed ------------------------------------------
# SIGKILL while attached: no atexit runs. The kernel drops the process's
# fds, so the link detaches and the maps and program only it held are freed;
# bpfjet sees the same through the locks on its fds (a sweep in the data
# plane, in `bpfjet status` and before ids are listed; objects younger than
# 2 s are left for their creator).
killed() { # side runner...
    local side=$1; shift
    { sleep 3.5; } | ip netns exec "$A" "$@" "$WORK/skel_app" "$VA" 9999 > "$WORK/$side.killed" &
    sleep 3
    pkill -KILL -f "$WORK/skel_app" || true
    wait 2>/dev/null || true
    sleep 3
}
xdp_mode() { ip -n "$A" -j -d link show "$VA" | python3 -c '
import json, sys
x = json.load(sys.stdin)[0].get("xdp", {})
print({1: "native", 2: "generic", 3: "hw"}.get(x.get("mode"), "none"))'; }
# Names of the maps and programs that are left: "maps | progs".
left() { # runner...
    local m p
    m=$("$@" bpftool -j map show | python3 -c '
import json, sys; print(" ".join(sorted(x.get("name", "") for x in json.load(sys.stdin) if x.get("name", "") in ("blocklist", "drops", "skel_app.bss", "skel_app.rodata"))))')
    p=$("$@" bpftool -j prog show | python3 -c '
import json, sys; print(" ".join(sorted(x.get("name", "") for x in json.load(sys.stdin) if x.get("name", "") == "skel_xdp")))')
    echo "$m | $p"
}
killed kernel
k_left="$(xdp_mode) / $(left)"
echo "kernel after SIGKILL: $k_left"
check "kernel: the killed application left nothing attached" "none /  | " "$k_left"
killed bpfjet "$BPFJET" exec --instance "$INST" --
check "the killed application was attached under exec" "attached port 9999" "$(head -1 "$WORK/bpfjet.killed")"
check "after SIGKILL under exec: nothing attached, nothing left (as the kernel)" "$k_left" \
    "$(xdp_mode) / $(left ip netns exec "$A" "$BPFJET" exec --instance "$INST" --)"
check "after SIGKILL: bpfjet status" "no attachments" "$("$BPFJET" status --instance "$INST")"

if [ $fails -ne 0 ]; then
    echo "skeleton: $fails check(s) failed"; exit 1
fi
echo "skeleton: all checks passed"
