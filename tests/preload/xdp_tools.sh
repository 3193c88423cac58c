#!/usr/bin/env bash
# Debian's unmodified xdp-tools under `bpfjet exec`: attach = deploy.
#
# In a veth pair between two network namespaces: `xdp-loader load -m skb`
# of an XDP program compiled here (tests/preload/udp_verdicts.bpf.c),
# `xdp-loader status`, UDP traffic from the peer namespace, the program's
# map read with bpftool, `xdp-loader unload` — first against the kernel,
# then under `bpfjet exec`, where the attach starts a bpfjet AF_XDP data
# plane that outlives xdp-loader. The verdict counts must be the same.
#
# libxdp runs its single-program fallback here: `ip netns exec` gives the
# namespace a fresh /sys without bpffs, and libxdp's dispatcher needs one.
# The last part mounts one: libxdp then loads through its dispatcher
# (BPF_PROG_TYPE_EXT, freplace), which bpfjet serves and this kernel
# refuses (tests/preload/xdp_multiprog.sh).
#
# Needs root, xdp-tools, bpftool, clang-19, iproute2.
# Usage: BPFJET=target/release/bpfjet tests/preload/xdp_tools.sh
set -euo pipefail

BPFJET=${BPFJET:-target/release/bpfjet}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BPFJET=$(realpath "$BPFJET")
for tool in xdp-loader bpftool clang-19 ip python3; do
    command -v "$tool" >/dev/null || { echo "SKIPPED: $tool not installed" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
done
[ "$(id -u)" = 0 ] || { echo "SKIPPED: network namespaces and the kernel side need root" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
[ -f "$(dirname "$BPFJET")/libbpfjet.so" ] || {
    echo "FAIL: $(dirname "$BPFJET")/libbpfjet.so missing (cargo build -p bpfjet-preload)"; exit 1; }
KERN=$(dirname "$BPFJET")/../../build/examples/xdp_kern/xsk_redirect.o
if [ -z "${BPFJET_XSK_KERN:-}" ] && [ ! -f "$KERN" ]; then
    make -s -C "$ROOT/examples" ../build/examples/xdp_kern/xsk_redirect.o
fi

WORK=$(mktemp -d)
INST=xdptools$$
export BPFJET_RUN_DIR=$WORK/run
A=bjxa$$; B=bjxb$$; VA=bjxv0; VB=bjxv1
cleanup() {
    ip netns exec "$A" "$BPFJET" exec --instance "$INST" -- xdp-loader unload "$VA" --all >/dev/null 2>&1 || true
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
    rm -rf "$WORK"
    rm -f /dev/shm/bpfjet.$INST.*
}
trap cleanup EXIT

fails=0
. "$(dirname "$0")/lib.sh"
inA() { ip netns exec "$A" "$@"; }
jx() { inA "$BPFJET" exec --instance "$INST" -- "$@"; }

clang-19 -O2 -g -target bpf -I "/usr/include/$(uname -m)-linux-gnu" \
    -c "$ROOT/tests/preload/udp_verdicts.bpf.c" -o "$WORK/udp_verdicts.o"

ip netns add "$A"; ip netns add "$B"
ip link add "$VA" netns "$A" type veth peer name "$VB" netns "$B"
ip -n "$A" addr add 10.201.0.1/24 dev "$VA"; ip -n "$B" addr add 10.201.0.2/24 dev "$VB"
ip -n "$A" link set "$VA" up; ip -n "$B" link set "$VB" up
MAC=$(ip -n "$A" -j link show "$VA" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["address"])')

send() { # n_dropped n_passed
    ip netns exec "$B" python3 "$ROOT/tests/preload/send_udp.py" "$VB" "$MAC" 10.201.0.2 10.201.0.1 "$1" "$2"
}
# What the stack of namespace A receives: "port-8888 port-9999" datagrams.
listen() { # seconds
    ip netns exec "$A" python3 "$ROOT/tests/preload/recv_udp.py" "$1"
}
# Sends while listening: what the stack received.
deliver() { # n_dropped n_passed
    listen 2.5 > "$WORK/delivered" &
    local l=$!
    sleep 0.8
    send "$1" "$2"
    wait $l
    cat "$WORK/delivered"
}
# "dropped passed" from a bpftool -j map dump of `verdicts`.
counts() { python3 -c '
import json, sys
d = {e["formatted"]["key"]: e["formatted"]["value"] for e in json.load(sys.stdin)}
print(d.get(0), d.get(1))'; }
# "name mode" of the interface's program in `xdp-loader status`.
status_row() { awk -v i="$VA" '$1 == i { print $2, $3 }'; }
wait_counts() { # runner... ; waits up to 5 s for the expected counts
    local want=$1; shift
    for _ in $(seq 50); do
        got=$("$@" bpftool -j map dump name verdicts | counts)
        [ "$got" = "$want" ] && break
        sleep 0.1
    done
    echo "$got"
}

# ---- the kernel --------------------------------------------------------------
inA xdp-loader load -m skb "$VA" "$WORK/udp_verdicts.o"
k_status=$(inA xdp-loader status "$VA" | status_row)
k_delivered=$(deliver 40 25)
k_counts=$(wait_counts "40 25" inA)
inA xdp-loader unload "$VA" --all
echo "kernel: status '$k_status', verdicts '$k_counts', delivered '$k_delivered'"

# ---- bpfjet ------------------------------------------------------------------
jx xdp-loader load -m skb "$VA" "$WORK/udp_verdicts.o"
check "xdp-loader status (name, mode)" "$k_status" "$(jx xdp-loader status "$VA" | status_row)"
# The loader has exited; the program runs on in bpfjet's data plane.
dp=$("$BPFJET" status --instance "$INST" --json)
check "bpfjet status: data plane running udp_verdicts" "running udp_verdicts skb" "$(echo "$dp" | python3 -c '
import json, sys
a = json.load(sys.stdin)[0]
print(a["data_plane"]["state"], a["data_plane"]["prog_name"], a["mode"])')"
pid=$(echo "$dp" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["data_plane"]["pid"])')
check "the kernel's view: a (steering) program attached in skb mode" "generic" \
    "$(ip -n "$A" -j -d link show "$VA" | python3 -c '
import json, sys
x = json.load(sys.stdin)[0].get("xdp", {})
print({1: "native", 2: "generic"}.get(x.get("mode"), "none"))')"
check "ip link under exec shows bpfjet's program id" \
    "$(jx bpftool -j prog show name udp_verdicts | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')" \
    "$(jx ip -j -d link show "$VA" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["xdp"]["prog"]["id"])')"
check "datagrams the stack received (passed via the TAP, dropped never)" "$k_delivered" "$(deliver 40 25)"
check "verdicts map (dropped, passed) as the kernel's" "$k_counts" "$(wait_counts "$k_counts" jx)"
sleep 0.5
check "data plane counters: drop >= 40, pass >= 25" "yes" "$("$BPFJET" status --instance "$INST" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)[0]["data_plane"]
print("yes" if d["drop"] >= 40 and d["pass"] >= 25 else d)')"
# Re-attach through iproute2 (RTM_NEWLINK, a dup'd program fd): a hot
# replace in the running data plane. The new object has maps of its own, so
# the data plane's counters tell the verdicts apart: no more drops.
before=$("$BPFJET" status --instance "$INST" --json)
jx ip -force link set dev "$VA" xdpgeneric obj "$WORK/udp_verdicts.o" program udp_count_only
after=$("$BPFJET" status --instance "$INST" --json)
check "ip link set xdpgeneric: hot replace, same data plane" "udp_count_only 1 $pid" "$(echo "$after" | python3 -c '
import json, sys
d = json.load(sys.stdin)[0]["data_plane"]
print(d["prog_name"], d["replaces"], d["pid"])')"
send 10 5
sleep 0.5
# (>= 15: the peer's own IPv6/ARP frames pass too.)
check "after the replace: 15 more passed, no more dropped" "yes 0" "$(echo "$before" "$("$BPFJET" status --instance "$INST" --json)" | python3 -c '
import json, sys
a, b = sys.stdin.read().split("] [")
a, b = json.loads(a + "]")[0]["data_plane"], json.loads("[" + b)[0]["data_plane"]
print("yes" if b["pass"] - a["pass"] >= 15 else b["pass"] - a["pass"], b["drop"] - a["drop"])')"
jx xdp-loader unload "$VA" --all
check "xdp-loader status after unload" "<No XDP" "$(jx xdp-loader status "$VA" | awk -v i="$VA" '$1 == i { print $2, $3 }')"
check "bpfjet status after unload" "no attachments" "$("$BPFJET" status --instance "$INST")"
kill -0 "$pid" 2>/dev/null && alive=yes || alive=no
check "data plane process stopped" "no" "$alive"
check "kernel steering program detached" "none" "$(ip -n "$A" -j -d link show "$VA" | python3 -c '
import json, sys
x = json.load(sys.stdin)[0].get("xdp", {})
print({1: "native", 2: "generic"}.get(x.get("mode"), "none"))')"
check "program freed with its attachment (as the kernel frees it)" "0" \
    "$(jx bpftool -j prog show | python3 -c 'import json,sys; print(sum(p.get("name") == "udp_verdicts" for p in json.load(sys.stdin)))')"

# ---- an XDP bpf_link (libbpf), the same binary on both sides ----------------
cc -O2 -Wall -o "$WORK/xdp_link" "$ROOT/tests/preload/xdp_link.c" -lbpf
link_session() { # side runner...
    local side=$1; shift
    { sleep 0.5; send 10 5; sleep 0.5; echo counts; echo info
      # (The kernel's link list is the whole machine's: tracing links of
      # other processes are left out.)
      inA "$@" bpftool -j link show | python3 -c '
import json, sys; print([l["type"] for l in json.load(sys.stdin) if l["type"] not in ("perf_event", "tracing", "kprobe_multi", "uprobe_multi", "raw_tracepoint")])' > "$WORK/$side.links"
      inA "$@" bpftool net show dev "$VA" | awk -v i="$VA" 'index($1, i "(") == 1 { print $2 }' > "$WORK/$side.net"
      echo "update udp_count_only"; sleep 0.3; send 10 5; sleep 0.5; echo counts; echo info
      echo detach; sleep 0.3; send 10 5; sleep 0.5; echo counts; echo quit
    } | inA "$@" "$WORK/xdp_link" "$WORK/udp_verdicts.o" "$VA"
}
k_link=$(link_session kernel)
j_link=$(link_session bpfjet "$BPFJET" exec --instance "$INST" --)
echo "kernel link session: $(echo $k_link)"
check "bpf_link create/update/detach/info session as the kernel's" "$k_link" "$j_link"
check "bpftool -j link show during the session (kernel)" "['xdp']" "$(cat "$WORK/kernel.links")"
check "bpftool -j link show during the session" "$(cat "$WORK/kernel.links")" "$(cat "$WORK/bpfjet.links")"
[ -s "$WORK/kernel.net" ] || { echo "FAIL bpftool net show printed no xdp line on the kernel"; fails=$((fails + 1)); }
check "bpftool net show: the link's mode" "$(cat "$WORK/kernel.net")" "$(cat "$WORK/bpfjet.net")"
check "the link's end detached its data plane" "no attachments" "$("$BPFJET" status --instance "$INST")"

# ---- libxdp with a bpffs: its dispatcher (freplace) ---------------------------
# With one program, libxdp's dispatcher has the program replace its entry
# function (an EXT program linked to `xdp_dispatcher`); tests/preload/
# xdp_multiprog.sh covers two programs.
out=$(inA sh -c "mount -t bpf bpf /sys/fs/bpf && \
    '$BPFJET' exec --instance $INST -- xdp-loader load -v -m skb $VA '$WORK/udp_verdicts.o' 2>&1 && \
    '$BPFJET' exec --instance $INST -- xdp-loader status $VA && \
    '$BPFJET' exec --instance $INST -- xdp-loader unload $VA --all" 2>&1) || true
check "with bpffs: libxdp's dispatcher check passes under bpfjet" "no" \
    "$(echo "$out" | grep 'Compatibility check for dispatcher program failed' > /dev/null && echo yes || echo no)"
check "with bpffs: the dispatcher attached, udp_verdicts in it" "xdp_dispatcher skb; udp_verdicts" \
    "$(echo "$out" | status_row); $(echo "$out" | awk '$1 == "=>" { print $3 }')"
check "with bpffs: unloaded" "no attachments" "$("$BPFJET" status --instance "$INST")"

# ---- xdp-filter: a control plane that finds its programs by listing bpffs ----
# xdp-filter pins its program under /sys/fs/bpf/xdp-filter/programs/IFNAME/
# and later lists that directory to know where it is loaded (`status`,
# `unload`): bpfjet's pins must be files there, as the kernel's are. One
# shell per side, each with a fresh bpffs; the transcript keeps what does
# not depend on the peer's background frames (IPv6 neighbour discovery
# passes too): the interfaces block, the filter hit counters, the drops,
# what the stack received, the pin directory, and unload.
filter_session() { # runner...
    R="$*" inA bash -c '
        mount -t bpf bpf /sys/fs/bpf
        $R xdp-filter load -m skb '"$VA"' || echo "load failed"
        $R xdp-filter port 9999
        $R xdp-filter ip 10.201.0.9
        echo "pins: $(ls /sys/fs/bpf/xdp-filter/programs/'"$VA"')"
        python3 '"$ROOT"'/tests/preload/recv_udp.py 2.5 > /tmp/xdpfilter.$$ &
        sleep 0.8
        ip netns exec '"$B"' python3 '"$ROOT"'/tests/preload/send_udp.py '"$VB $MAC"' 10.201.0.2 10.201.0.1 5 7
        wait
        echo "received: $(cat /tmp/xdpfilter.$$)"; rm -f /tmp/xdpfilter.$$
        $R xdp-filter status | awk "
            /^Loaded on interfaces/ { show = 1 } /^Filtered MAC/ { show = 0 }
            show && NF || /XDP_DROP/ { print }"
        $R xdp-filter unload '"$VA"' 2>&1 || echo "unload failed"
        echo "pins after unload: $(ls /sys/fs/bpf/xdp-filter/programs 2>&1)"
        $R xdp-filter status 2>&1 | head -1' 2>&1
}
if command -v xdp-filter >/dev/null; then
    k_filter=$(filter_session)
    j_filter=$(filter_session "$BPFJET" exec --instance "$INST" --)
    echo "kernel xdp-filter session:"; echo "$k_filter" | sed 's/^/  /'
    check "xdp-filter (kernel): the port filter dropped the 5" "yes" \
        "$(echo "$k_filter" | grep -q '9999 .* 5$' && echo yes || echo no)"
    check "xdp-filter load/port/ip/status/unload session as the kernel's" "$k_filter" "$j_filter"
    check "xdp-filter unloaded" "no attachments" "$("$BPFJET" status --instance "$INST")"
else
    echo "SKIPPED: xdp-filter not installed" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"
fi

# ---- the device goes away under an attached program -------------------------
# The kernel detaches a device's XDP program when the device is deleted; the
# data plane serving it must stop too, not spin on sockets of a dead device.
ip -n "$A" link add bjxd0 type veth peer name bjxd1
ip -n "$A" link set bjxd0 up; ip -n "$A" link set bjxd1 up
jx xdp-loader load -m skb bjxd0 "$WORK/udp_verdicts.o"
dp_pid=$("$BPFJET" status --instance "$INST" --json | python3 -c '
import json, sys; print(" ".join(str(a["data_plane"]["pid"]) for a in json.load(sys.stdin) if a.get("data_plane")))')
# A pid to watch, or the checks below would pass with no data plane at all.
check "device attached: one data plane running" "running" \
    "$([ -n "$dp_pid" ] && kill -0 $dp_pid 2>/dev/null && echo running || echo "none ($dp_pid)")"
ip -n "$A" link del bjxd0
for _ in $(seq 50); do
    [ "$("$BPFJET" status --instance "$INST")" = "no attachments" ] && ! kill -0 $dp_pid 2>/dev/null && break
    sleep 0.1
done
check "device deleted: the attachment went with it" "no attachments" "$("$BPFJET" status --instance "$INST")"
check "device deleted: its data plane ($dp_pid) stopped" "stopped" "$(kill -0 $dp_pid 2>/dev/null && echo running || echo stopped)"

if [ $fails -ne 0 ]; then
    echo "xdp_tools: $fails check(s) failed"; exit 1
fi
echo "xdp_tools: all checks passed"
