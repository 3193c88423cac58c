#!/usr/bin/env bash
# Programs in DEVMAP entries and BPF_F_BROADCAST under `bpfjet exec`,
# against the kernel.
#
# tests/preload/devmap_egress.c (libbpf, built here), the same binary
# against the kernel and under `bpfjet exec`, fills the devmaps of
# tests/preload/devmap_egress.bpf.c with interfaces and program fds, reads
# them back, tries the kernel's refusals, and attaches the ingress program
# to VA in namespace A (generic mode), which has two more veths, VA2 and
# VA3. Datagrams from namespace B then take each redirect: through an
# entry with the egress program (which stamps the egress and ingress
# ifindexes into the payload, counts, and drops marked datagrams), an
# entry without one, broadcasts with and without the ingress device, and
# a CPUMAP entry whose program passes (A's stack receives) or drops.
# What the peers B, C and D capture, what A's stack receives, the
# loader's output and the entry programs' counts must be the kernel's.
#
# Needs root, bpftool, clang-19, libbpf-dev, iproute2, python3.
# Usage: BPFJET=target/release/bpfjet tests/preload/devmap_egress.sh
set -euo pipefail

. "$(dirname "$0")/lib.sh"
preload_setup devmap bpftool clang-19 cc ip python3
KERN=$(dirname "$BPFJET")/../../build/examples/xdp_kern/xsk_redirect.o
if [ -z "${BPFJET_XSK_KERN:-}" ] && [ ! -f "$KERN" ]; then
    make -s -C "$ROOT/examples" ../build/examples/xdp_kern/xsk_redirect.o
fi

A=bjda$$; B=bjdb$$; C=bjdc$$; D=bjdd$$
VA=bjdv0; VB=bjdv1; VA2=bjdv2; VC=bjdv3; VA3=bjdv4; VD=bjdv5
cleanup() {
    ip netns exec "$A" "$BPFJET" exec --instance "$INST" -- ip link set dev "$VA" xdpgeneric off >/dev/null 2>&1 || true
    for n in "$A" "$B" "$C" "$D"; do ip netns del "$n" 2>/dev/null || true; done
    preload_cleanup
}
trap cleanup EXIT

fails=0
CHECK_LABELS="kernel bpfjet"
clang-19 -O2 -g -target bpf -I "/usr/include/$(uname -m)-linux-gnu" \
    -c "$ROOT/tests/preload/devmap_egress.bpf.c" -o "$WORK/devmap_egress.o"
cc -O2 -Wall -o "$WORK/devmap_egress" "$ROOT/tests/preload/devmap_egress.c" -lbpf

for n in "$A" "$B" "$C" "$D"; do ip netns add "$n"; done
ip link add "$VA" netns "$A" type veth peer name "$VB" netns "$B"
ip link add "$VA2" netns "$A" type veth peer name "$VC" netns "$C"
ip link add "$VA3" netns "$A" type veth peer name "$VD" netns "$D"
ip -n "$A" addr add 10.202.0.1/24 dev "$VA"; ip -n "$B" addr add 10.202.0.2/24 dev "$VB"
for l in "$A $VA" "$A $VA2" "$A $VA3" "$B $VB" "$C $VC" "$D $VD"; do
    set -- $l; ip -n "$1" link set "$2" up
done
MAC=$(ip -n "$A" -j link show "$VA" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["address"])')

# What B, C and D capture while B sends the test's datagrams.
traffic() {
    ip netns exec "$B" python3 "$ROOT/tests/preload/capture_udp.py" "$VB" 3 > "$WORK/cap_b" &
    local b=$!
    ip netns exec "$C" python3 "$ROOT/tests/preload/capture_udp.py" "$VC" 3 > "$WORK/cap_c" &
    local c=$!
    ip netns exec "$D" python3 "$ROOT/tests/preload/capture_udp.py" "$VD" 3 > "$WORK/cap_d" &
    local d=$!
    # The CPUMAP datagrams reach A's own stack.
    ip netns exec "$A" python3 "$ROOT/tests/preload/recv_payloads.py" 7005 3 > "$WORK/cap_a" &
    local a=$!
    sleep 1
    ip netns exec "$B" python3 "$ROOT/tests/preload/send_devmap.py" "$VB" "$MAC" 10.202.0.2 10.202.0.1
    wait $b $c $d $a
    for x in a b c d; do sed "s/^/$x /" "$WORK/cap_$x"; done
}
# egress_seen as "ifindex count" lines.
seen() { python3 -c '
import json, sys
for e in sorted(json.load(sys.stdin), key=lambda e: e["key"]):
    print(int.from_bytes(bytes(int(x, 16) for x in e["key"]), "little"),
          int.from_bytes(bytes(int(x, 16) for x in e["value"]), "little"))'; }

# ---- the kernel --------------------------------------------------------------
ip netns exec "$A" "$WORK/devmap_egress" "$WORK/devmap_egress.o" "$VA" "$VA2" "$VA3" > "$WORK/k_setup"
k_traffic=$(traffic)
k_seen=$(ip netns exec "$A" bpftool -j map dump name egress_seen | seen)
ip -n "$A" link set dev "$VA" xdpgeneric off
echo "kernel: $(grep -c . <<<"$k_traffic") frames captured ($(grep -c "^a " <<<"$k_traffic") by A's stack); entry program counts: $(echo $k_seen)"
[ -n "$k_traffic" ] || { echo "FAIL: the kernel run captured nothing"; exit 1; }

# ---- bpfjet ------------------------------------------------------------------
jx() { ip netns exec "$A" "$BPFJET" exec --instance "$INST" -- "$@"; }
jx "$WORK/devmap_egress" "$WORK/devmap_egress.o" "$VA" "$VA2" "$VA3" > "$WORK/j_setup"
while read -r k && read -r j <&3; do
    check "loader: ${k%%:*}" "$k" "$j"
done < "$WORK/k_setup" 3< "$WORK/j_setup"
check "loader output lines" "$(wc -l < "$WORK/k_setup")" "$(wc -l < "$WORK/j_setup")"
j_traffic=$(traffic)
check "frames the peers captured (port, stamped payload)" "$k_traffic" "$j_traffic"
check "bpfjet status: the data plane redirected 15 frames" "running 15" "$("$BPFJET" status --instance "$INST" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)[0]["data_plane"]
print(d["state"], d["redirect"])')"
# The loader has exited: the devmap entries hold the egress program (and
# its map), as the kernel's do.
check "egress program counts per egress ifindex" "$k_seen" "$(jx bpftool -j map dump name egress_seen | seen)"
jx ip link set dev "$VA" xdpgeneric off

if [ "$fails" -ne 0 ]; then
    echo "devmap_egress: $fails FAILED"
    exit 1
fi
echo "devmap_egress: all checks passed"
