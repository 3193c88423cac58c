#!/usr/bin/env bash
# Multi-buffer frames over AF_XDP: `bpfjet run --iface` with an xdp.frags
# program (tests/netns/mb_echo.c) on a veth whose MTU is 9000. The kernel
# hands the socket (XDP_USE_SG) each jumbo frame as a chain of descriptors
# (XDP_PKT_CONTD); bpfjet runs the program on the whole frame as a
# multi-buffer frame and sends the echo back as a chain. The peer checks that
# 8000-byte echoes come back whole: MACs swapped, the last byte (in the last
# fragment) marked, everything else intact. A program without frags is
# refused on that interface, as the kernel refuses it.
#
#   tests/netns/afxdp_multibuf.sh       # BPFJET=path/to/bpfjet to pick the binary
#
# Needs root, network namespaces, veth and AF_XDP with XDP_USE_SG (Linux
# 6.6+); prints `SKIPPED:` and exits 0 when one is missing.
set -euo pipefail

skip() { echo "SKIPPED: $*" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
if [ "$(id -u)" != 0 ]; then
    skip "the AF_XDP multi-buffer test needs root"
fi
for tool in ip python3 timeout; do
    command -v "$tool" >/dev/null || skip "$tool is not installed"
done
python3 -c 'import socket; socket.socket(44, socket.SOCK_RAW).close()' 2>/dev/null ||
    skip "this kernel has no AF_XDP sockets (socket(AF_XDP) failed)"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$ROOT/tests/netns"
BPFJET=${BPFJET:-$ROOT/target/release/bpfjet}
[ -x "$BPFJET" ] || skip "no bpfjet binary at $BPFJET (cargo build --release -p bpfjet-cli, or set BPFJET)"
CLANG=${CLANG:-clang-19}
TMP=$(mktemp -d)
A=bjm-a-$$
B=bjm-b-$$
INST=bjm-$$
PID=
fail() { echo "FAIL: $*"; [ -f "$TMP/err.log" ] && sed 's/^/  bpfjet: /' "$TMP/err.log" | tail -20; exit 1; }
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

ip netns add "$A" 2>/dev/null || skip "cannot create network namespaces (ip netns add failed)"
ip netns add "$B"
ip link add vA netns "$A" type veth peer name vB netns "$B" 2>/dev/null ||
    skip "cannot create veth pairs (no veth support)"
ip -n "$A" link set vA mtu 9000
ip -n "$B" link set vB mtu 9000
for l in lo vA; do ip -n "$A" link set "$l" up; done
for l in lo vB; do ip -n "$B" link set "$l" up; done
MAC_B=$(ip netns exec "$B" cat /sys/class/net/vB/address)

make -s -C "$ROOT/examples" kern
ARCH_INC=/usr/include/$(uname -m)-linux-gnu
"$CLANG" -O2 -g -target bpf -mcpu=v3 -Wall -I "$ARCH_INC" -c "$HERE/mb_echo.c" -o "$TMP/mb_echo.o"
"$CLANG" -O2 -g -target bpf -mcpu=v3 -Wall -I "$ARCH_INC" -DPLAIN -c "$HERE/mb_echo.c" \
    -o "$TMP/mb_plain.o"

# A program without frags: the kernel will not attach the redirect program
# to an interface whose MTU needs multi-buffer frames.
if ip netns exec "$B" timeout 60 "$BPFJET" run "$TMP/mb_plain.o" --iface vB --name "$INST" \
    --duration 5 2>"$TMP/plain.log" >/dev/null; then
    fail "a program without frags ran on a 9000-byte-MTU interface"
fi
grep -q "xdp.frags" "$TMP/plain.log" || fail "non-frags refusal message: $(cat "$TMP/plain.log")"
echo "ok - a program without frags is refused: $(tail -1 "$TMP/plain.log")"

ip netns exec "$B" "$BPFJET" run "$TMP/mb_echo.o" --iface vB --name "$INST" \
    --duration 120 --json >"$TMP/out.json" 2>"$TMP/err.log" &
PID=$!
for _ in $(seq 100); do
    [ -e /dev/shm/bpfjet."$INST".registry ] && ip -n "$B" link show pass-vB >/dev/null 2>&1 && break
    sleep 0.1
done
ip -n "$B" link show pass-vB >/dev/null 2>&1 || fail "bpfjet did not start"
sleep 0.5
if grep -q "XDP_USE_SG\|Operation not supported\|Invalid argument" "$TMP/err.log"; then
    skip "AF_XDP multi-buffer (XDP_USE_SG) is not available: $(cat "$TMP/err.log")"
fi

got=$(ip netns exec "$A" env PKT_DEBUG=${PKT_DEBUG:-} timeout 60 python3 "$HERE/pkt.py" jumbo vA "$MAC_B" 50 8000)
[ "$got" -ge 45 ] || fail "jumbo echo: $got of 50 8000-byte frames came back whole"
echo "ok - jumbo echo: $got/50 8000-byte frames came back whole (MACs swapped, last byte marked)"
got=$(ip netns exec "$A" timeout 60 python3 "$HERE/pkt.py" jumbo vA "$MAC_B" 50 1000)
[ "$got" -ge 45 ] || fail "small echo: $got of 50 1000-byte frames came back"
echo "ok - single-buffer frames still echo: $got/50"

kill -INT "$PID"
rc=0
wait "$PID" || rc=$?
PID=
[ "$rc" -eq 0 ] || fail "bpfjet exited $rc after SIGINT"
python3 - "$TMP/out.json" <<'PY' || fail "summary JSON: $(cat "$TMP/out.json")"
import json, sys
s = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
a = s["actions"]
assert a["TX"] >= 90 and a["ABORTED"] == 0, a
print("ok - summary: packets %d actions %s" % (s["packets"], a))
PY
echo "PASSED: afxdp_multibuf"
