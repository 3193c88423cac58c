#!/usr/bin/env bash
# End-to-end test of `bpfjet run --iface` (AF_XDP) in network namespaces.
#
#   tests/netns/afxdp_e2e.sh            # BPFJET=path/to/bpfjet to pick the binary
#
# Two namespaces joined by two veth pairs; bpfjet serves vB (namespace B) with
# tests/netns/netns_nf.c, whose action a second process switches through the
# `mode` map while traffic flows:
#   PASS      ping 10.77.0.2 (on the TAP pass-vB) is answered by B's kernel
#   TX        UDP frames come back MAC-swapped
#   DROP      nothing comes back
#   REDIRECT  frames sent to vB leave on vB2 and are seen on vA2
#   REPLACE   `bpfjet replace` swaps in an always-TX build while in DROP
#             mode: echoes come back, the kept `mode` map still says DROP
# Then SIGINT: exit 0, summary JSON, no XDP program left on vB, shared memory
# unlinked, TAP gone. Bad input: a missing interface, a queue that does not
# exist. Needs root, network namespaces, veth and AF_XDP; prints `SKIPPED:`
# and exits 0 when one is missing. Once they are there, any failure exits 1.
# Every wait is bounded; the namespaces, bpfjet and temporaries are removed
# on every exit path, including SIGINT/SIGTERM (e.g. from `timeout`).
set -euo pipefail

skip() { echo "SKIPPED: $*" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
if [ "$(id -u)" != 0 ]; then
    skip "the AF_XDP netns test needs root (network namespaces, AF_XDP, XDP attach)"
fi
for tool in ip python3 timeout; do
    command -v "$tool" >/dev/null || skip "$tool is not installed"
done
python3 -c 'import socket; socket.socket(44, socket.SOCK_RAW).close()' 2>/dev/null ||
    skip "this kernel has no AF_XDP sockets (socket(AF_XDP) failed)"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$ROOT/tests/netns"
BPFJET=${BPFJET:-$ROOT/target/release/bpfjet}
if [ ! -x "$BPFJET" ]; then
    echo "SKIPPED: no bpfjet binary at $BPFJET (cargo build --release -p bpfjet-cli, or set BPFJET)" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"
    exit 0
fi
CLANG=${CLANG:-clang-19}
TMP=$(mktemp -d)
A=bjt-a-$$
B=bjt-b-$$
INST=bjt-e2e-$$
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
if ! ip link add vA netns "$A" type veth peer name vB netns "$B" 2>/dev/null; then
    skip "cannot create veth pairs (no veth support)"
fi

make -s -C "$ROOT/examples" kern
ARCH_INC=/usr/include/$(uname -m)-linux-gnu
"$CLANG" -O2 -g -target bpf -mcpu=v3 -Wall -I "$ARCH_INC" -c "$HERE/netns_nf.c" -o "$TMP/netns_nf.o"
"$CLANG" -O2 -g -target bpf -mcpu=v3 -Wall -I "$ARCH_INC" -DALWAYS_TX -c "$HERE/netns_nf.c" \
    -o "$TMP/netns_nf_tx.o"

ip link add vA2 netns "$A" type veth peer name vB2 netns "$B"
for l in lo vA vA2; do ip -n "$A" link set "$l" up; done
for l in lo vB vB2; do ip -n "$B" link set "$l" up; done
ip -n "$A" addr add 10.77.0.1/24 dev vA
MAC_B=$(ip netns exec "$B" cat /sys/class/net/vB/address)
IFINDEX_B2=$(ip netns exec "$B" cat /sys/class/net/vB2/ifindex)
inB() { ip netns exec "$B" "$@"; }
# Traffic tools get a generous but bounded time each.
inA() { ip netns exec "$A" timeout 60 "$@"; }
hex32() { printf '%02x%02x%02x%02x' $(($1 & 255)) $((($1 >> 8) & 255)) $((($1 >> 16) & 255)) $((($1 >> 24) & 255)); }
set_mode() { inB "$BPFJET" map update --instance "$INST" mode 00000000 "$(hex32 "$1")"; }

# Bad input first: clear messages, exit 1, nothing left behind.
if inB "$BPFJET" run "$TMP/netns_nf.o" --iface nope0 --name "$INST" 2>"$TMP/bad.log"; then
    fail "a missing interface was accepted"
fi
grep -q "nope0 does not exist" "$TMP/bad.log" || fail "missing-interface message: $(cat "$TMP/bad.log")"
if inB "$BPFJET" run "$TMP/netns_nf.o" --iface vB:4 --name "$INST" 2>"$TMP/bad.log"; then
    fail "a queue count beyond the interface's was accepted"
fi
grep -q "receive queue" "$TMP/bad.log" || fail "queue-mismatch message: $(cat "$TMP/bad.log")"
inB ip link set vB2 down
if inB "$BPFJET" run "$TMP/netns_nf.o" --iface vB2 --name "$INST" 2>"$TMP/bad.log"; then
    fail "an interface that is down was accepted"
fi
grep -q "vB2 is down" "$TMP/bad.log" || fail "interface-down message: $(cat "$TMP/bad.log")"
inB ip link set vB2 up
ls /dev/shm/bpfjet."$INST".* >/dev/null 2>&1 && fail "a failed start left shared memory"
inB ip link show vB | grep -q xdp && fail "a failed start left an XDP program on vB"
echo "ok - bad input: missing interface, interface down, queue mismatch"

echo '{"mode": [{"key": "00000000", "value": "02000000"}]}' >"$TMP/state.json"
# Not through the inB function: $! must be bpfjet itself (ip netns exec
# execs), or the SIGINT below would reach a subshell.
ip netns exec "$B" "$BPFJET" run "$TMP/netns_nf.o" --iface vB --maps "$TMP/state.json" --name "$INST" \
    --duration 120 --json >"$TMP/out.json" 2>"$TMP/err.log" &
PID=$!
for _ in $(seq 100); do
    [ -e /dev/shm/bpfjet."$INST".registry ] && inB ip link show pass-vB >/dev/null 2>&1 && break
    sleep 0.1
done
inB ip link show pass-vB >/dev/null 2>&1 || fail "bpfjet did not start"
inB ip addr add 10.77.0.2/24 dev pass-vB
sleep 0.5

got=$(inA python3 "$HERE/pkt.py" ping 10.77.0.2 5)
[ "$got" -ge 4 ] || fail "PASS: $got of 5 pings answered"
echo "ok - PASS: $got/5 pings answered by the kernel behind bpfjet"

set_mode 3
got=$(inA python3 "$HERE/pkt.py" echo vA "$MAC_B" 200)
[ "$got" -ge 190 ] || fail "TX: $got of 200 echoes"
echo "ok - TX: $got/200 MAC-swapped echoes"

set_mode 1
got=$(inA python3 "$HERE/pkt.py" echo vA "$MAC_B" 200)
[ "$got" -eq 0 ] || fail "DROP: $got frames came back"
echo "ok - DROP: nothing came back (map flipped by a second process)"

inB "$BPFJET" map update --instance "$INST" mode 01000000 "$(hex32 "$IFINDEX_B2")"
set_mode 4
inA python3 "$HERE/pkt.py" sniff vA2 2.5 >"$TMP/sniff" &
SNIFF=$!
sleep 0.5
inA python3 "$HERE/pkt.py" send vA "$MAC_B" 200 >/dev/null
wait "$SNIFF"
got=$(cat "$TMP/sniff")
[ "$got" -ge 190 ] || fail "REDIRECT: $got of 200 frames on vA2"
echo "ok - REDIRECT: $got/200 frames left through vB2"

set_mode 1
inB timeout 120 "$BPFJET" replace --instance "$INST" "$TMP/netns_nf_tx.o" --json >"$TMP/replace.json" ||
    fail "replace: $(cat "$TMP/replace.json")"
python3 - "$TMP/replace.json" <<'PY' || fail "replace reply: $(cat "$TMP/replace.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["ok"] and r["generation"] == 1 and r["maps"]["kept"] == ["mode"], r
PY
got=$(inA python3 "$HERE/pkt.py" echo vA "$MAC_B" 200)
[ "$got" -ge 190 ] || fail "REPLACE: $got of 200 echoes from the replaced program"
inB "$BPFJET" map lookup --instance "$INST" mode 00000000 --json | grep '"value":"01000000"' > /dev/null ||
    fail "REPLACE: the kept mode map lost its contents"
echo "ok - REPLACE: hot-swapped to an always-TX build, $got/200 echoes, mode map kept"

kill -INT "$PID"
rc=0
wait "$PID" || rc=$?
PID=
[ "$rc" -eq 0 ] || fail "bpfjet exited $rc after SIGINT"
python3 - "$TMP/out.json" <<'PY' || fail "summary JSON"
import json, sys
s = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
a = s["actions"]
assert s["stopped_by"] == "SIGINT", s["stopped_by"]
assert a["TX"] >= 190 and a["DROP"] >= 200 and a["REDIRECT"] >= 190 and a["PASS"] >= 4, a
assert s["redirect_targets"], s
assert s["replaces"] == 1 and a["TX"] >= 380, s
print("ok - summary: packets %d actions %s" % (s["packets"], a))
PY
inB ip link show vB | grep -q xdp && fail "an XDP program is still attached to vB"
inB ip link show pass-vB >/dev/null 2>&1 && fail "the TAP device is still there"
ls /dev/shm/bpfjet."$INST".* >/dev/null 2>&1 && fail "shared memory left in /dev/shm"
echo "ok - teardown after SIGINT: XDP detached, TAP removed, shared memory unlinked"
echo "PASSED: afxdp_e2e"
