#!/usr/bin/env bash
# The XDP tracepoints (xdp_exception, xdp_redirect, xdp_redirect_err) as
# BPF_PROG_TYPE_TRACING tp_btf programs see them: the kernel's generic XDP
# path against bpfjet's XDP data plane.
#
# One libbpf control plane (tests/preload/xdp_events.c, built here) loads
# tests/preload/xdp_events.bpf.c with the XDP verdict chosen in .rodata,
# attaches its three tp_btf programs and the XDP program (skb mode,
# netlink) to a veth in namespace A, and prints what the tracepoint
# programs counted once UDP frames from namespace B went through: the
# events' device, action, redirect error, target, map type and id, the
# program's type. The same binary runs against the kernel and under
# `bpfjet exec`, where the attach starts a bpfjet AF_XDP data plane that
# fires the events; the lines must be the kernel's. Cases:
#
#   aborted           XDP_ABORTED                     xdp_exception act 0
#   invalid-action    return 7                        xdp_exception act 7
#   redirect          bpf_redirect(VC), VC up         xdp_redirect err 0
#   redirect-missing  bpf_redirect(999), no device    xdp_redirect_err -EINVAL
#   redirect-down     bpf_redirect(VE), VE down       xdp_redirect_err -ENETDOWN
#   pass              XDP_PASS                        none
#   devmap            bpf_redirect_map(DEVMAP[0]=VC)  xdp_redirect map type 14, key 0
#
# The kernel's answers are recorded below (expected_kernel) and checked
# first, so that neither side can pass on nothing. The neighbours are
# static and IPv6 is off on the veths: the counts are the test's frames
# only. The kernel's tracepoints are the machine's; the tracepoint programs
# count the events of this test's device (by name) only.
#
# Then unmodified bpftrace's tracepoint:xdp:* probes (the events' tracefs
# records) over the same cases, on the kernel and under `bpfjet exec`.
#
# Then xdp-monitor (xdp-tools), if installed, with the `aborted` program
# attached: first on the kernel, then under `bpfjet exec`. xdp-tools 1.3.1
# cannot load on kernels without the xdp_redirect_map(_err) tracepoints
# (6.18 has none): libbpf finds no BTF type for them, before any bpf()
# call; bpfjet must fail the same way then.
#
# XDP_EVENTS_ONLY=kernel runs the kernel side only (no bpfjet needed);
# XDP_EVENTS_ONLY=bpfjet compares bpfjet with the recorded kernel answers
# (xdp-monitor still runs on the kernel first: it is the oracle).
#
# Needs root, clang-19, cc, libbpf-dev, iproute2, python3.
# Usage: BPFJET=target/release/bpfjet tests/preload/xdp_events.sh
set -euo pipefail
. "$(dirname "$0")/lib.sh"

ONLY=${XDP_EVENTS_ONLY:-}
case "$ONLY" in "" | kernel | bpfjet) ;; *) echo "XDP_EVENTS_ONLY: kernel or bpfjet"; exit 2 ;; esac
BPFJET=${BPFJET:-target/release/bpfjet}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
for tool in clang-19 cc ip python3; do
    command -v "$tool" >/dev/null || { echo "SKIPPED: $tool not installed" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
done
[ "$(id -u)" = 0 ] || { echo "SKIPPED: network namespaces and the kernel side need root" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
[ -f /usr/include/bpf/libbpf.h ] && [ -f /usr/include/bpf/bpf_tracing.h ] || {
    echo "SKIPPED: libbpf headers missing (libbpf-dev, scripts/setup.sh)" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
[ -f /sys/kernel/btf/vmlinux ] || {
    echo "SKIPPED: no kernel BTF (/sys/kernel/btf/vmlinux): tp_btf programs need it" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
if [ "$ONLY" != kernel ]; then
    [ -x "$BPFJET" ] || { echo "FAIL: $BPFJET missing (cargo build --release)"; exit 1; }
    BPFJET=$(realpath "$BPFJET")
    [ -f "$(dirname "$BPFJET")/libbpfjet.so" ] || {
        echo "FAIL: $(dirname "$BPFJET")/libbpfjet.so missing (cargo build -p bpfjet-preload)"; exit 1; }
fi

WORK=$(mktemp -d)
INST=xdpevents$$
export BPFJET_RUN_DIR=$WORK/run
# Device names unique on the machine: the kernel's tracepoint programs
# filter on them.
A=bjea$$; B=bjeb$$; VA=bje$$a; VB=bje$$b; VC=bje$$c; VD=bje$$d; VE=bje$$e; VF=bje$$f
LOADER_PID=
cleanup() {
    [ -n "$LOADER_PID" ] && kill "$LOADER_PID" 2>/dev/null || true
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
    rm -rf "$WORK"
    rm -f /dev/shm/bpfjet.$INST.*
}
trap cleanup EXIT

fails=0
inA() { ip netns exec "$A" "$@"; }

clang-19 -O2 -g -target bpf -I "/usr/include/$(uname -m)-linux-gnu" \
    -c "$ROOT/tests/preload/xdp_events.bpf.c" -o "$WORK/xdp_events.o"
cc -O2 -Wall -o "$WORK/xdp_events" "$ROOT/tests/preload/xdp_events.c" -lbpf

# A: VA (XDP), VC (redirect target, up, its peer VD in B), VE (down, its
# peer VF in A, down too). B: VB (the sender), VD.
ip netns add "$A"; ip netns add "$B"
# VA's ifindex, unusual on the machine: bpftrace's records carry the
# ifindex only, and the kernel's tracepoints are the machine's.
UIDX=$((20000 + $$ % 20000))
ip link add "$VA" index "$UIDX" netns "$A" type veth peer name "$VB" netns "$B"
ip link add "$VC" netns "$A" type veth peer name "$VD" netns "$B"
ip -n "$A" link add "$VE" type veth peer name "$VF"
for d in "$A $VA" "$A $VC" "$A $VE" "$A $VF" "$B $VB" "$B $VD"; do
    set -- $d
    ip netns exec "$1" sysctl -qw "net.ipv6.conf.$2.disable_ipv6=1"
done
ip -n "$A" addr add 10.202.0.1/24 dev "$VA"; ip -n "$B" addr add 10.202.0.2/24 dev "$VB"
ip -n "$A" link set "$VA" up; ip -n "$A" link set "$VC" up
ip -n "$B" link set "$VB" up; ip -n "$B" link set "$VD" up
field() { # netns dev json-field
    ip -n "$1" -j link show "$2" | python3 -c "import json,sys; print(json.load(sys.stdin)[0]['$3'])"
}
MAC_A=$(field "$A" "$VA" address); MAC_B=$(field "$B" "$VB" address)
# No ARP through the program: both neighbours static (send_udp.py writes
# whole frames; A's stack answers the passed ones with ICMP).
ip -n "$A" neigh replace 10.202.0.2 lladdr "$MAC_B" dev "$VA" nud permanent
ip -n "$B" neigh replace 10.202.0.1 lladdr "$MAC_A" dev "$VB" nud permanent
# Ifindexes as namespace A numbers them (the loader runs there).
IA=$(field "$A" "$VA" ifindex); IC=$(field "$A" "$VC" ifindex); IE=$(field "$A" "$VE" ifindex)
MISSING=999
ip -n "$A" -j link show | python3 -c "
import json, sys
assert $MISSING not in [l['ifindex'] for l in json.load(sys.stdin)], 'ifindex $MISSING exists in A'"

N=5
send() { # n
    ip netns exec "$B" python3 "$ROOT/tests/preload/send_udp.py" "$VB" "$MAC_A" 10.202.0.2 10.202.0.1 0 "$1"
}
# Frames sent while the loader runs: the default, N frames.
during_default() { send "$N"; }

# One run of the loader: waits for "ready", lets the attach settle, runs
# $DURING (default: N frames), lets the events drain, asks for the
# counts. Output: the loader's lines after "ready", then "exit RC" if it
# failed.
session() { # mode target settle drain runner...
    local mode=$1 tgt=$2 settle=$3 drain=$4 rc=0; shift 4
    rm -f "$WORK/fifo" "$WORK/session.out" "$WORK/session.err"
    mkfifo "$WORK/fifo"
    inA "$@" "$WORK/xdp_events" "$WORK/xdp_events.o" "$VA" "$mode" "$tgt" \
        < "$WORK/fifo" > "$WORK/session.out" 2> "$WORK/session.err" &
    LOADER_PID=$!
    exec 4> "$WORK/fifo"
    for _ in $(seq 100); do
        grep -q '^ready$' "$WORK/session.out" 2>/dev/null && break
        kill -0 "$LOADER_PID" 2>/dev/null || break
        sleep 0.1
    done
    if grep -q '^ready$' "$WORK/session.out"; then
        sleep "$settle"
        ${DURING:-during_default}
        sleep "$drain"
    fi
    # (A loader that died: EPIPE, not SIGPIPE for this shell.)
    (trap '' PIPE; echo dump >&4) 2>/dev/null || true
    exec 4>&-
    wait "$LOADER_PID" || rc=$?
    LOADER_PID=
    grep -v '^ready$' "$WORK/session.out" || true
    [ "$rc" = 0 ] || { echo "exit $rc"; sed 's/^/  stderr: /' "$WORK/session.err"; }
}

# case -> "mode target"
CASES="aborted invalid-action redirect redirect-missing redirect-down pass devmap"
args() {
    case "$1" in
    aborted) echo "0 0" ;;
    invalid-action) echo "1 0" ;;
    redirect) echo "2 $IC" ;;
    redirect-missing) echo "2 $MISSING" ;;
    redirect-down) echo "2 $IE" ;;
    pass) echo "3 0" ;;
    devmap) echo "4 $IC" ;;
    esac
}
# What kernel 6.18's generic XDP path gives (do_xdp_generic): invalid
# actions are traced as exceptions with the action returned; bpf_redirect
# is traced with map type UNSPEC (0), map id INT_MAX, tgt NULL and the
# target ifindex as index; a missing target -EINVAL, a down one -ENETDOWN,
# both on xdp_redirect_err. prog_type 6: BPF_PROG_TYPE_XDP.
R="map_type=0 map_id=2147483647 tgt=null prog_type=6 count=$N"
expected_kernel() {
    case "$1" in
    aborted) printf '%s\n' "exception ifindex=$IA act=0 prog_type=6 count=$N" "seen mode=0 count=$N" ;;
    invalid-action) printf '%s\n' "exception ifindex=$IA act=7 prog_type=6 count=$N" "seen mode=1 count=$N" ;;
    redirect) printf '%s\n' "redirect tp=xdp_redirect ifindex=$IA err=0 index=$IC $R" "seen mode=2 count=$N" ;;
    redirect-missing) printf '%s\n' "redirect tp=xdp_redirect_err ifindex=$IA err=-22 index=$MISSING $R" "seen mode=2 count=$N" ;;
    redirect-down) printf '%s\n' "redirect tp=xdp_redirect_err ifindex=$IA err=-100 index=$IE $R" "seen mode=2 count=$N" ;;
    pass) printf '%s\n' "seen mode=3 count=$N" ;;
    devmap) printf '%s\n' "redirect tp=xdp_redirect ifindex=$IA err=0 index=0 map_type=14 map_id=tx_ports tgt=set prog_type=6 count=$N" "seen mode=4 count=$N" ;;
    esac
}

# ---- the kernel --------------------------------------------------------------
if [ "$ONLY" != bpfjet ]; then
    for c in $CASES; do
        set -- $(args "$c")
        session "$1" "$2" 0.3 1 > "$WORK/kernel.$c"
        echo "kernel $c:"; sed 's/^/  /' "$WORK/kernel.$c"
        check "kernel $c: as recorded" "$(expected_kernel "$c")" "$(cat "$WORK/kernel.$c")"
    done
fi

# ---- bpfjet ------------------------------------------------------------------
if [ "$ONLY" != kernel ]; then
    for c in $CASES; do
        set -- $(args "$c")
        # The data plane starts with the attach: time to open its sockets,
        # and for the events to reach the maps.
        session "$1" "$2" 1.5 1.5 "$BPFJET" exec --instance "$INST" -- > "$WORK/bpfjet.$c"
        if [ -f "$WORK/kernel.$c" ]; then want=$(cat "$WORK/kernel.$c"); else want=$(expected_kernel "$c"); fi
        check "bpfjet $c: the kernel's events" "$want" "$(cat "$WORK/bpfjet.$c")"
    done
    check "bpfjet: the data planes stopped with their loaders" "no attachments" "$("$BPFJET" status --instance "$INST")"
fi

# ---- bpftrace: tracepoint:xdp:* (perf tracepoints, tracefs records) ---------
# Unmodified bpftrace counts the events of VA by their tracefs records
# while a case runs: on the kernel, then under `bpfjet exec` in the
# loader's instance, where the data plane runs bpftrace's programs too.
# nsenter keeps the host's /sys (tracefs), which `ip netns exec` does not.
BT_RUNNER=()
BT_PROG="tracepoint:xdp:xdp_exception /args->ifindex == $UIDX/ { @exception[args->act] = count(); }
tracepoint:xdp:xdp_redirect* /args->ifindex == $UIDX/ { @redirect[args->err, args->to_ifindex, args->map_id, args->map_index] = count(); }"
during_bpftrace() {
    nsenter --net="/run/netns/$A" "${BT_RUNNER[@]}" bpftrace -e "$BT_PROG" > "$WORK/bt.out" 2>&1 &
    local b=$!
    for _ in $(seq 100); do
        grep -q '^Attaching' "$WORK/bt.out" 2>/dev/null && break
        sleep 0.1
    done
    # bpftrace prints "Attaching" before it attaches, and a SIGINT during
    # its attach is lost (bpftrace 0.17 on the kernel too): frames and the
    # signal go once its main thread waits in its poll loop (lib.sh).
    for _ in $(seq 300); do
        bt_polling "$b" && break
        sleep 0.1
    done
    sleep 0.5
    send "$N"
    sleep 1.5
    # bpftrace prints its maps and exits on SIGINT; one that does not within
    # 30 s (SIGINT repeated, lib.sh) is a failure with its threads' state,
    # not a CI timeout.
    if ! interrupt_bpftrace "$b" >&2; then
        echo "FAIL: bpftrace (${BT_RUNNER[*]:-kernel}) still running 30 s after SIGINT; its processes:" >&2
        for p in $(pgrep -f 'bpftrace -e' || true); do
            for t in /proc/"$p"/task/*; do
                echo "  $p/${t##*/} $(cat "$t"/comm 2>/dev/null) wchan=$(cat "$t"/wchan 2>/dev/null) $(tr '\n' ' ' < "$t"/stat 2>/dev/null | cut -d' ' -f3)" >&2
            done
        done
        sed 's/^/  bt.out: /' "$WORK/bt.out" >&2 || true
        pkill -KILL -f 'bpftrace -e' || true
    fi
    wait "$b" || true
}
bpftrace_case() { # side case runner...
    local side=$1 c=$2; shift 2
    BT_RUNNER=("$@")
    set -- $(args "$c")
    DURING=during_bpftrace session "$1" "$2" 1.5 0.5 "${BT_RUNNER[@]}" > /dev/null
    # A devmap's id is the kernel's or bpfjet's: not compared.
    if [ "$c" = devmap ]; then
        grep '^@' "$WORK/bt.out" | sed -E 's/^(@redirect\[0, [0-9]+, )[0-9]+(, 0\]: [0-9]+)$/\1MAP\2/' | sort || true
    else
        grep '^@' "$WORK/bt.out" | sort || true
    fi
}
if ! command -v bpftrace >/dev/null || ! command -v nsenter >/dev/null; then
    echo "SKIPPED: bpftrace or nsenter not installed" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"
else
    for c in aborted invalid-action redirect redirect-down devmap; do
        case "$c" in
        aborted) want="@exception[0]: $N" ;;
        invalid-action) want="@exception[7]: $N" ;;
        redirect) want="@redirect[0, $IC, 2147483647, 0]: $N" ;;
        redirect-down) want="@redirect[-100, $IE, 2147483647, 0]: $N" ;;
        devmap) want="@redirect[0, $IC, MAP, 0]: $N" ;;
        esac
        if [ "$ONLY" != bpfjet ]; then
            check "kernel bpftrace $c: as recorded" "$want" "$(bpftrace_case kernel "$c")"
        fi
        if [ "$ONLY" != kernel ]; then
            check "bpfjet bpftrace $c: the kernel's records" "$want" \
                "$(bpftrace_case bpfjet "$c" "$BPFJET" exec --instance "$INST" --)"
        fi
    done
fi

# ---- xdp-monitor -------------------------------------------------------------
# xdp-monitor -s -i 1 for 4 s while the `aborted` program runs and frames
# arrive every 0.5 s. Output: "rc RC", then its lines.
MON_RUNNER=()
during_monitor() {
    timeout 4 ip netns exec "$A" "${MON_RUNNER[@]}" xdp-monitor -s -i 1 > "$WORK/monitor.out" 2>&1 &
    local m=$! rc=0
    for _ in 1 2 3 4 5 6 7; do sleep 0.5; send "$N"; done
    wait "$m" || rc=$?
    echo "rc $rc" > "$WORK/monitor.rc"
}
monitor() { # side settle runner...
    local side=$1 settle=$2; shift 2
    MON_RUNNER=("$@")
    DURING=during_monitor session 0 0 "$settle" 0.5 "$@" > "$WORK/monitor.$side.loader"
    cat "$WORK/monitor.rc" "$WORK/monitor.out"
}
# The kinds of lines (numbers left out) and whether an exception line
# counts some.
monitor_shape() {
    sed -E 's/[0-9][0-9,.]*/N/g; s/ +/ /g' | sort -u
}
monitor_aborted() {
    grep -iE 'exception|aborted' | grep -qE '[1-9]' && echo "exceptions counted" || echo "no exceptions counted"
}
if ! command -v xdp-monitor >/dev/null; then
    echo "SKIPPED: xdp-monitor (xdp-tools) not installed" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"
else
    k_mon=$(monitor kernel 0.3)
    echo "kernel xdp-monitor -s -i 1:"; echo "$k_mon" | sed 's/^/  /'
    check "kernel: the loader counted the frames sent around xdp-monitor" \
        "exception ifindex=$IA act=0 prog_type=6 count=$((7 * N))" "$(grep '^exception' "$WORK/monitor.kernel.loader")"
    k_loads=yes
    if echo "$k_mon" | grep -q 'failed to find kernel BTF type ID'; then
        k_loads=no
        echo "SKIPPED: xdp-monitor's statistics: xdp-tools $(dpkg-query -W -f '${Version}' xdp-tools 2>/dev/null) does not load on kernel $(uname -r) (tracepoints it wants are gone)" \
            | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"
    fi
    if [ "$ONLY" != kernel ]; then
        j_mon=$(monitor bpfjet 1.5 "$BPFJET" exec --instance "$INST" --)
        # The loader's own tp_btf programs, next to xdp-monitor's.
        check "xdp-monitor running: the loader's events as the kernel's" \
            "$(cat "$WORK/monitor.kernel.loader")" "$(cat "$WORK/monitor.bpfjet.loader")"
        if [ "$k_loads" = no ]; then
            # The kernel lacks tracepoints xdp-monitor wants: libbpf stops
            # before any bpf() call, under bpfjet the same.
            check "xdp-monitor: the kernel's load failure" \
                "$(echo "$k_mon" | grep -E '^rc |failed to find kernel BTF|^Failed')" \
                "$(echo "$j_mon" | grep -E '^rc |failed to find kernel BTF|^Failed')"
        else
            check "xdp-monitor (kernel): exceptions counted" "exceptions counted" "$(echo "$k_mon" | monitor_aborted)"
            check "xdp-monitor: exceptions counted as on the kernel" "exceptions counted" "$(echo "$j_mon" | monitor_aborted)"
            check "xdp-monitor: the kernel's kinds of lines" \
                "$(echo "$k_mon" | monitor_shape)" "$(echo "$j_mon" | monitor_shape)"
        fi
    fi
fi

if [ $fails -ne 0 ]; then
    echo "xdp_events: $fails check(s) failed"; exit 1
fi
echo "xdp_events: all checks passed"
