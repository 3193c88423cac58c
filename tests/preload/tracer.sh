#!/usr/bin/env bash
# An unmodified libbpf tracing tool under `bpfjet exec`, its programs run by
# `bpfjet trace --instance` inside the traced command, compared with the
# same tool against the kernel.
#
# examples/control_plane/trace_tool.c (a skeleton application: uprobe and
# uretprobe attached by function name with bpf_program__attach_uprobe_opts,
# syscall tracepoints, a raw sys_enter tracepoint, hash, array and per-CPU
# maps, a ring buffer read with ring_buffer__poll, a perf buffer read with
# libbpf's perf_buffer) watches
# tests/preload/trace_target.c, which makes a known set of calls between
# target_begin and target_end. The tool prints the ring buffer events as
# they arrive and, on SIGINT, its maps; the lines must be the same against
# the kernel and under bpfjet on the interpreter and on the JIT.
#
# Syscalls are recorded only between target_begin and target_end: those of
# the dynamic loader before main run before bpfjet's agent, so only the
# kernel would see them.
#
# Needs root (the kernel side), bpftool, clang-19, libbpf-dev.
# Usage: BPFJET=target/release/bpfjet tests/preload/tracer.sh
set -euo pipefail

BPFJET=${BPFJET:-target/release/bpfjet}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BPFJET=$(realpath "$BPFJET")
for tool in bpftool clang-19 cc; do
    command -v "$tool" >/dev/null || { echo "SKIPPED: $tool not installed" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
done
[ "$(id -u)" = 0 ] || { echo "SKIPPED: the kernel side needs root" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
for lib in libbpfjet.so libbpfjet_trace.so; do
    [ -f "$(dirname "$BPFJET")/$lib" ] || {
        echo "FAIL: $(dirname "$BPFJET")/$lib missing (cargo build --release)"; exit 1; }
done

# The BPF target has no host architecture: bpf_tracing.h's register names
# and the tool's syscall numbers need it spelled out.
case "$(uname -m)" in
    x86_64)  BPF_ARCH=x86;   NR_READ=0;  NR_WRITE=1;  NR_CLOSE=3;  NR_GETPID=39;  NR_OPENAT=257 ;;
    aarch64) BPF_ARCH=arm64; NR_READ=63; NR_WRITE=64; NR_CLOSE=57; NR_GETPID=172; NR_OPENAT=56 ;;
    *) echo "SKIPPED: tracer: no syscall numbers for $(uname -m)" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0 ;;
esac

WORK=$(mktemp -d)
INST=tracer$$
export BPFJET_RUN_DIR=$WORK/run
TOOL_PID=
cleanup() {
    # Only the tool this script started, if a failure left it running.
    if [ -n "$TOOL_PID" ]; then kill -INT "$TOOL_PID" 2>/dev/null || true; wait "$TOOL_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
    rm -f /dev/shm/bpfjet.$INST.*
}
trap cleanup EXIT

# The tool, built as a user of libbpf builds one; the target as any
# dynamically linked program. The target's file name is its comm, the
# tool's filter.
SRC=$ROOT/examples/control_plane
clang-19 -O2 -g -target bpf -D__TARGET_ARCH_$BPF_ARCH -I "/usr/include/$(uname -m)-linux-gnu" \
    -c "$SRC/trace_tool.bpf.c" -o "$WORK/trace_tool.bpf.o"
bpftool gen skeleton "$WORK/trace_tool.bpf.o" name trace_tool > "$WORK/trace_tool.skel.h"
cc -O2 -Wall -I "$WORK" -o "$WORK/trace_tool" "$SRC/trace_tool.c" -lbpf
cc -O1 -g -o "$WORK/trace_target" "$ROOT/tests/preload/trace_target.c"
TARGET=$WORK/trace_target
COMM=trace_target
FILE=$WORK/somefile
echo "read by trace_target" > "$FILE"

fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# Until the tool (pid $1) printed "ready" in $2: up to 20 s, and not if it
# has exited (an attach error).
wait_ready() {
    for _ in $(seq 200); do
        grep -qx ready "$2" 2>/dev/null && return 0
        kill -0 "$1" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# Stop the tool: SIGINT, then its exit status (0: it drained and printed).
stop_tool() {
    local rc=0
    kill -INT "$TOOL_PID"
    wait "$TOOL_PID" || rc=$?
    TOOL_PID=
    return $rc
}

# What the target's known behaviour makes the tool print, file descriptors
# written as FD (see normalize): the path as the 64-byte record holds it.
P=${FILE:0:63}
expected() {
    printf '%s\n' "enter $P" "exit $P ret=FD" \
        "enter /nonexistent/bpfjet-trace" "exit /nonexistent/bpfjet-trace ret=-2" \
        "enter $P" "exit $P ret=FD" \
        "step 0 4" "step 1 4" "step 2 4" "step 3 4" "step 4 4" \
        "ret_sum 80" "hits 20" "cookie 0 0x7" "cookie 1 0x5eed"
    printf '%s\n' "sys $NR_READ 2" "sys $NR_WRITE 1" "sys $NR_CLOSE 2" \
        "sys $NR_GETPID 7" "sys $NR_OPENAT 3" | sort -k2,2n
    echo "guarded 20"
    for i in $(seq 0 19); do echo "usdt $i $((i % 5))"; done
    printf '%s\n' "perf_ret 0 4" "perf_ret 2 4" "perf_ret 4 4" "perf_ret 6 4" "perf_ret 8 4" \
        "perf_lost 0"
}
# Output without the "ready" line, descriptors of successful opens as FD.
normalize() { grep -vx ready "$1" | sed -E 's/^(exit .* ret=)[0-9]+$/\1FD/'; }
body() { grep -vx ready "$1" || true; }

# ---- the kernel -----------------------------------------------------------
KERNEL_OK=0
"$WORK/trace_tool" "$TARGET" "$COMM" > "$WORK/kernel.out" 2> "$WORK/kernel.err" &
TOOL_PID=$!
if wait_ready "$TOOL_PID" "$WORK/kernel.out"; then
    "$TARGET" "$FILE" > /dev/null
    sleep 0.5
    if stop_tool; then
        KERNEL_OK=1
    else
        fail "kernel: trace_tool exited with status $?"; sed 's/^/  /' "$WORK/kernel.err"
    fi
else
    kill -INT "$TOOL_PID" 2>/dev/null || true; wait "$TOOL_PID" 2>/dev/null || true; TOOL_PID=
    echo "SKIPPED: tracer: KERNEL COMPARISON NOT RUN, trace_tool did not attach in the kernel:" \
        "$(tr '\n' ' ' < "$WORK/kernel.err")" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"
    echo "  (the bpfjet side is checked against the target's known behaviour only)"
fi

if [ $KERNEL_OK = 1 ]; then
    echo "kernel:"; body "$WORK/kernel.out" | sed 's/^/  /'
    # A comparison of two empty outputs would assert nothing.
    for what in step enter sys; do
        grep -q "^$what " "$WORK/kernel.out" || fail "kernel: no '$what' line"
    done
    if [ "$(normalize "$WORK/kernel.out")" == "$(expected)" ]; then
        echo "PASS: kernel output is the target's known behaviour"
    else
        fail "kernel output is not the target's known behaviour (descriptors as FD):"
        diff -u <(expected) <(normalize "$WORK/kernel.out") | sed 's/^/  /' || true
    fi
fi

# ---- bpfjet, on each engine -----------------------------------------------
for ENGINE in interp jit; do
    OUT=$WORK/bpfjet.$ENGINE.out
    "$BPFJET" exec --instance "$INST" -- "$WORK/trace_tool" "$TARGET" "$COMM" > "$OUT" 2> "$WORK/bpfjet.$ENGINE.err" &
    TOOL_PID=$!
    if ! wait_ready "$TOOL_PID" "$OUT"; then
        fail "$ENGINE: trace_tool under bpfjet exec did not attach"
        sed 's/^/  /' "$WORK/bpfjet.$ENGINE.err"
        kill -INT "$TOOL_PID" 2>/dev/null || true; wait "$TOOL_PID" 2>/dev/null || true; TOOL_PID=
        continue
    fi
    # bpftool sees the tool's links as the kernel's: eight perf_event links
    # (four uprobes, two USDT probes, two tracepoints) and the raw tracepoint
    # by name.
    if command -v bpftool >/dev/null; then
        timeout 20 "$BPFJET" exec --instance "$INST" -- bpftool link show > "$WORK/links.$ENGINE" 2>&1 || true
        if [ "$(grep -c ': perf_event ' "$WORK/links.$ENGINE")" != 8 ] \
            || ! grep -q "tp 'sys_enter'" "$WORK/links.$ENGINE"; then
            fail "$ENGINE: bpftool link show under bpfjet exec:"; sed 's/^/  /' "$WORK/links.$ENGINE"
        fi
    fi
    # trace's stdout has its own report of the maps: not what is compared.
    rc=0
    "$BPFJET" trace --instance "$INST" --engine "$ENGINE" -- "$TARGET" "$FILE" \
        > /dev/null 2> "$WORK/trace.$ENGINE.err" || rc=$?
    [ $rc = 0 ] || { fail "$ENGINE: bpfjet trace exited with status $rc"; sed 's/^/  /' "$WORK/trace.$ENGINE.err"; }
    sleep 0.5
    rc=0
    stop_tool || rc=$?
    [ $rc = 0 ] || { fail "$ENGINE: trace_tool under bpfjet exec exited with status $rc"; sed 's/^/  /' "$WORK/bpfjet.$ENGINE.err"; }

    if [ $KERNEL_OK = 1 ]; then
        if [ "$(body "$WORK/kernel.out")" == "$(body "$OUT")" ]; then
            echo "PASS: $ENGINE: the tool's output under bpfjet is the kernel's ($(body "$OUT" | wc -l) lines)"
        else
            fail "$ENGINE: the tool's output under bpfjet differs from the kernel's:"
            echo "  kernel:"; body "$WORK/kernel.out" | sed 's/^/    /'
            echo "  bpfjet ($ENGINE):"; body "$OUT" | sed 's/^/    /'
            echo "  diff kernel bpfjet:"
            diff -u <(body "$WORK/kernel.out") <(body "$OUT") | sed 's/^/    /' || true
        fi
    else
        if [ "$(normalize "$OUT")" == "$(expected)" ]; then
            echo "PASS: $ENGINE: the tool's output under bpfjet is the target's known behaviour"
        else
            fail "$ENGINE: the tool's output under bpfjet is not the target's known behaviour (descriptors as FD):"
            diff -u <(expected) <(normalize "$OUT") | sed 's/^/  /' || true
        fi
    fi
done

# The command's tree: a shell that runs the target twice. Each image loads
# the links when it starts (the shell maps no trace_target: its uprobes
# and semaphores wait), so both runs are traced, as on the kernel: every
# count doubles.
OUT=$WORK/tree.out
"$BPFJET" exec --instance "$INST" -- "$WORK/trace_tool" "$TARGET" "$COMM" > "$OUT" 2> "$WORK/tree.err" &
TOOL_PID=$!
if wait_ready "$TOOL_PID" "$OUT"; then
    "$BPFJET" trace --instance "$INST" --engine jit -- sh -c "'$TARGET' '$FILE'; '$TARGET' '$FILE'" \
        > /dev/null 2> "$WORK/tree.trace.err" || fail "tree: bpfjet trace: $(cat "$WORK/tree.trace.err")"
    sleep 0.5
    stop_tool || fail "tree: trace_tool exited with status $?"
    missing=
    for want in "step 0 8" "step 4 8" "hits 40" "guarded 40" "sys $NR_GETPID 14" "sys $NR_OPENAT 6" "usdt 19 4" "perf_ret 8 8"; do
        grep -qx "$want" "$OUT" || missing="$missing [$want]"
    done
    if [ -z "$missing" ]; then
        echo "PASS: tree: both runs of the target under sh -c were traced (every count doubled)"
    else
        fail "tree: missing lines$missing:"; sed 's/^/  /' "$OUT"
    fi
else
    fail "tree: trace_tool under bpfjet exec did not attach"; sed 's/^/  /' "$WORK/tree.err"
fi

if [ $fails -ne 0 ]; then
    echo "tracer: $fails check(s) failed"; exit 1
fi
echo "tracer: all checks passed"
