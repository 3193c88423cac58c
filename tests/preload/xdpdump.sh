#!/usr/bin/env bash
# Debian's unmodified xdpdump on an interface whose XDP program bpfjet runs.
#
# xdpdump finds the program attached to the interface (netlink), loads
# fentry/fexit programs whose target is that program (attach_prog_fd, its
# entry function's BTF id), attaches them, and reads the frames they
# output with bpf_xdp_output through a perf buffer (PERF_SAMPLE_RAW and
# PERF_SAMPLE_TIME). Under `bpfjet exec` the data plane runs them around
# the program: each frame at entry and at exit with the action.
#
# In a veth pair between two network namespaces, tests/preload/
# udp_verdicts.bpf.c (drops UDP to port 9999, passes the rest) is attached
# with xdp-loader (skb mode), xdpdump -x captures at entry and exit while
# N_DROP datagrams to 9999 and N_PASS to 8888 arrive, and its lines
# (timestamps and program ids left out) must be: per frame, in order, an
# entry line and an exit line with DROP or PASS, the frame's size, the
# interface and queue, and the frame's bytes as sent (send_udp.py's
# frame()). On the kernel first: where the kernel refuses
# fentry programs on XDP programs (this machine's 6.18 does, EPERM at
# load), that side is skipped loudly and bpfjet is checked against the
# frames sent alone; otherwise the two outputs must be equal. Each side
# must also have captured 2 * (N_DROP + N_PASS) frames and said so on
# SIGINT (xdpdump 1.3.1 has no packet count option), so that neither passes
# on an empty capture.
#
# XDPDUMP_ONLY=kernel runs the kernel side alone (no bpfjet binary needed),
# XDPDUMP_ONLY=bpfjet the bpfjet side alone.
#
# Needs root, xdp-tools, clang-19, iproute2, python3.
# Usage: BPFJET=target/release/bpfjet tests/preload/xdpdump.sh
set -euo pipefail

ONLY=${XDPDUMP_ONLY:-}
case "$ONLY" in "" | kernel | bpfjet) ;; *) echo "XDPDUMP_ONLY: kernel or bpfjet"; exit 2 ;; esac
BPFJET=${BPFJET:-target/release/bpfjet}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
for tool in xdpdump xdp-loader clang-19 ip python3; do
    command -v "$tool" >/dev/null || { echo "SKIPPED: $tool not installed" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
done
[ "$(id -u)" = 0 ] || { echo "SKIPPED: network namespaces need root" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
[ -f /sys/kernel/btf/vmlinux ] || {
    echo "SKIPPED: no kernel BTF: fentry/fexit programs need it" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
if [ "$ONLY" != kernel ]; then
    [ -x "$BPFJET" ] || { echo "FAIL: $BPFJET missing (cargo build --release)"; exit 1; }
    BPFJET=$(realpath "$BPFJET")
    [ -f "$(dirname "$BPFJET")/libbpfjet.so" ] || {
        echo "FAIL: $(dirname "$BPFJET")/libbpfjet.so missing (cargo build -p bpfjet-preload)"; exit 1; }
    KERN=$(dirname "$BPFJET")/../../build/examples/xdp_kern/xsk_redirect.o
    if [ -z "${BPFJET_XSK_KERN:-}" ] && [ ! -f "$KERN" ]; then
        make -s -C "$ROOT/examples" ../build/examples/xdp_kern/xsk_redirect.o
    fi
fi

WORK=$(mktemp -d)
INST=xdpdump$$
export BPFJET_RUN_DIR=$WORK/run
A=bjda$$; B=bjdb$$; VA=bjd$$a; VB=bjd$$b
DUMP_PID=
cleanup() {
    [ -n "$DUMP_PID" ] && kill -INT "$DUMP_PID" 2>/dev/null || true
    if [ "$ONLY" != kernel ]; then
        ip netns exec "$A" "$BPFJET" exec --instance "$INST" -- xdp-loader unload "$VA" --all >/dev/null 2>&1 || true
    fi
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
    rm -rf "$WORK"
    rm -f /dev/shm/bpfjet.$INST.*
}
trap cleanup EXIT

fails=0
. "$(dirname "$0")/lib.sh"

clang-19 -O2 -g -target bpf -I "/usr/include/$(uname -m)-linux-gnu" \
    -c "$ROOT/tests/preload/udp_verdicts.bpf.c" -o "$WORK/udp_verdicts.o"

ip netns add "$A"; ip netns add "$B"
ip link add "$VA" netns "$A" type veth peer name "$VB" netns "$B"
for d in "$A $VA" "$B $VB"; do
    set -- $d
    ip netns exec "$1" sysctl -qw "net.ipv6.conf.$2.disable_ipv6=1"
done
ip -n "$A" addr add 10.203.0.1/24 dev "$VA"; ip -n "$B" addr add 10.203.0.2/24 dev "$VB"
ip -n "$A" link set "$VA" up; ip -n "$B" link set "$VB" up
field() { # netns dev json-field
    ip -n "$1" -j link show "$2" | python3 -c "import json,sys; print(json.load(sys.stdin)[0]['$3'])"
}
MAC_A=$(field "$A" "$VA" address); MAC_B=$(field "$B" "$VB" address)
ip -n "$A" neigh replace 10.203.0.2 lladdr "$MAC_B" dev "$VA" nud permanent
ip -n "$B" neigh replace 10.203.0.1 lladdr "$MAC_A" dev "$VB" nud permanent
IA=$(field "$A" "$VA" ifindex)
N_DROP=3; N_PASS=2; N=$((N_DROP + N_PASS))

# xdpdump's lines, normalised: the timestamp and the program's name kept
# out of the first word; hex lines as they are.
normalise() {
    sed -E 's/^[0-9]+\.[0-9]+: /T: /' | grep -E '^T: |^  0x'
}

# What xdpdump must print for the frames sent: an entry and an exit line
# per frame, and the frame's bytes in its hex layout.
expected() {
    python3 - "$ROOT/tests/preload" "$MAC_B" "$MAC_A" "$IA" "$N_DROP" "$N_PASS" <<'EOF'
import sys
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])
from send_udp import frame as udp_frame
src_mac, dst_mac, ifindex, n_drop, n_pass = sys.argv[2:7]
mac = lambda m: bytes.fromhex(m.replace(":", ""))
def frame(dport):
    return udp_frame(mac(src_mac), mac(dst_mac), "10.203.0.2", "10.203.0.1", dport, b"p" * 32)
def hexdump(b):
    for off in range(0, len(b), 16):
        row = b[off:off + 16]
        hexes = " ".join("%02x" % c for c in row)
        text = "".join(chr(c) if 32 <= c < 127 else "." for c in row)
        print("  0x%04x:  %-47s  %s" % (off, hexes, text))
n = 0
for port, count, action in ((9999, int(n_drop), "DROP"), (8888, int(n_pass), "PASS")):
    for _ in range(count):
        n += 1
        f = frame(port)
        for where in ("entry", "exit[%s]" % action):
            print("T: udp_verdicts()@%s: packet size %d bytes, captured %d bytes on if_index %s, rx queue 0, id %d"
                  % (where, len(f), len(f), ifindex, n))
            hexdump(f)
EOF
}

# One side: attach, capture while the frames arrive, detach. Output:
# xdpdump's normalised lines, or "xdpdump failed: ..." with its last lines;
# xdpdump's whole output stays in $WORK/SIDE.dump.
capture() { # side settle runner...
    local side=$1 settle=$2; shift 2
    ip netns exec "$A" "$@" xdp-loader load -m skb "$VA" "$WORK/udp_verdicts.o" >/dev/null 2>&1
    sleep "$settle"
    ip netns exec "$A" "$@" xdpdump -i "$VA" --rx-capture entry,exit -x > "$WORK/dump.out" 2>&1 &
    local d=$!
    DUMP_PID=$d
    for _ in $(seq 50); do
        grep -q '^listening on' "$WORK/dump.out" 2>/dev/null && break
        kill -0 "$d" 2>/dev/null || break
        sleep 0.1
    done
    # The links reach the data plane within its 200 ms supervision tick.
    sleep 1
    ip netns exec "$B" python3 "$ROOT/tests/preload/send_udp.py" "$VB" "$MAC_A" 10.203.0.2 10.203.0.1 "$N_DROP" "$N_PASS"
    sleep 1.5
    kill -INT "$d" 2>/dev/null || true
    wait "$d" || true
    DUMP_PID=
    cp "$WORK/dump.out" "$WORK/$side.dump"
    ip netns exec "$A" "$@" xdp-loader unload "$VA" --all >/dev/null 2>&1 || true
    if grep -q '^listening on' "$WORK/dump.out"; then
        normalise < "$WORK/dump.out"
    else
        echo "xdpdump failed: $(tail -2 "$WORK/dump.out" | tr '\n' ' ')"
    fi
}

# "entry exit captured": the capture lines of each kind, and the count
# xdpdump gives on SIGINT.
counts() { # side
    echo "$(grep -c '@entry: packet size' "$WORK/$1.dump") $(grep -c '@exit\[' "$WORK/$1.dump")" \
        "$(sed -nE 's/^([0-9]+) packets? captured$/\1/p' "$WORK/$1.dump")"
}

want=$(expected)
kernel=
if [ "$ONLY" != bpfjet ]; then
    k=$(capture kernel 0.3)
    if echo "$k" | grep -q '^xdpdump failed:.*Operation not permitted'; then
        echo "SKIPPED: the kernel refuses fentry/fexit programs on XDP programs here ($k)$([ "$ONLY" = kernel ] || echo "; bpfjet is checked against the frames sent")" \
            | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"
    else
        kernel=$k
        echo "kernel xdpdump -x, normalised:"; echo "$kernel" | grep '^T: ' | sed 's/^/  /'
        check "kernel: $N frames captured at entry, $N at exit, $((2 * N)) counted" "$N $N $((2 * N))" "$(counts kernel)"
        check "kernel: xdpdump's lines are the frames sent" "$want" "$kernel"
    fi
fi
if [ "$ONLY" != kernel ]; then
    jet=$(capture bpfjet 1.5 "$BPFJET" exec --instance "$INST" --)
    [ -n "$kernel" ] || { echo "bpfjet xdpdump -x, normalised:"; echo "$jet" | grep '^T: ' | sed 's/^/  /'; }
    check "bpfjet: $N frames captured at entry, $N at exit, $((2 * N)) counted" "$N $N $((2 * N))" "$(counts bpfjet)"
    if [ -n "$kernel" ]; then
        check "bpfjet: xdpdump's lines as the kernel's" "$kernel" "$jet"
    else
        check "bpfjet: xdpdump's lines are the frames sent, at entry and exit" "$want" "$jet"
    fi
    check "bpfjet: the data plane stopped with the unload" "no attachments" "$("$BPFJET" status --instance "$INST")"
fi

if [ $fails -ne 0 ]; then
    echo "xdpdump: $fails check(s) failed"; exit 1
fi
echo "xdpdump: all checks passed"
