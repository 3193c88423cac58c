#!/usr/bin/env bash
# Uprobe-multi links (BPF_LINK_CREATE with BPF_TRACE_UPROBE_MULTI, what
# libbpf 1.3+ makes for `uprobe.multi` sections and bpftrace for wildcard
# uprobes) made by a libbpf control plane under `bpfjet exec --instance`,
# run by `bpfjet trace --instance` inside the traced command, against the
# same loader on the kernel.
#
# The loader (crates/cli/tests/trace/multi_loader.c) resolves each
# `uprobe.multi/PATH:PATTERN` section to file offsets as libbpf does and
# makes one link per program; it prints each link's info as
# BPF_OBJ_GET_INFO_BY_FD reports it (type, count, flags, path, offsets) and
# at the end the maps its programs filled. The target
# (crates/cli/tests/trace/multi_target.c) makes a known set of calls.
# Checked, the kernel's lines against bpfjet's:
#   - for every process (pid 0), with a cookie per offset: maps (the
#     cookies bpf_get_attach_cookie gave included) and link info;
#   - for another process (a pid that is not the target's): the link
#     info names it, and the target runs untraced (every count 0), as the
#     kernel's pid filter does;
#   - a stripped target (crates/cli/tests/trace/strip_target.c) whose
#     functions only its detached debug file names, one a tail-call `jmp`
#     stub, with a .gnu_debuglink (bpfjet names them) and without (raw
#     offsets, int3 probes): the kernel's counts;
#   - bad input (flags, missing path/offsets/count, a count over the
#     kernel's bound, a missing file, a directory, no such process, a
#     negative pid or offset, unreadable arrays): the kernel's errno each.
#
# Needs root (the kernel side), clang-19, cc, libbpf-dev, libelf-dev.
# Usage: BPFJET=target/release/bpfjet tests/preload/uprobe_multi.sh
set -euo pipefail

BPFJET=${BPFJET:-target/release/bpfjet}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BPFJET=$(realpath "$BPFJET")
skip() { echo "SKIPPED: uprobe_multi: $*" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
for tool in clang-19 cc; do
    command -v "$tool" >/dev/null || skip "$tool not installed"
done
[ "$(id -u)" = 0 ] || skip "the kernel side needs root"
for lib in libbpfjet.so libbpfjet_trace.so; do
    [ -f "$(dirname "$BPFJET")/$lib" ] || {
        echo "FAIL: $(dirname "$BPFJET")/$lib missing (cargo build --release)"; exit 1; }
done

WORK=$(mktemp -d)
INST=umulti$$
export BPFJET_RUN_DIR=$WORK/run
LOADER_PID=
cleanup() {
    if [ -n "$LOADER_PID" ]; then kill "$LOADER_PID" 2>/dev/null || true; wait "$LOADER_PID" 2>/dev/null || true; fi
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
    rm -f /dev/shm/bpfjet.$INST.*
}
trap cleanup EXIT

SRC=$ROOT/crates/cli/tests/trace
TARGET=$WORK/multi_target
cc -O1 -g -no-pie -fno-pie -o "$TARGET" "$SRC/multi_target.c"
cc -O1 -o "$WORK/multi_loader" "$SRC/multi_loader.c" -lbpf -lelf
clang-19 -O2 -g -target bpf -D__TARGET_ARCH_x86 -I "/usr/include/$(uname -m)-linux-gnu" \
    -DTARGET_EXE="\"$TARGET\"" -c "$SRC/multi.bpf.c" -o "$WORK/multi.o"

# Cookies per offset (the loader's MULTI_COOKIES): bpf_get_attach_cookie
# at each function, summed in counts slot 2.
export MULTI_COOKIES=1

fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# The kernel: the loader forks the target and links for its pid.
if ! "$WORK/multi_loader" "$WORK/multi.o" "$TARGET" > "$WORK/kernel.out" 2> "$WORK/kernel.err"; then
    cat "$WORK/kernel.err"
    skip "the kernel refused uprobe-multi links (Linux 6.6+ needed)"
fi
grep -q '^exit 7$' "$WORK/kernel.err" || fail "kernel: the target did not exit 7: $(cat "$WORK/kernel.err")"
# Sorted: a hash map's entries come in no fixed order.
grep -v '^pid ' "$WORK/kernel.out" | sort > "$WORK/kernel.lines"

# bpfjet_side PID OBJ EXE OUT: the loader under bpfjet exec linking OBJ's
# programs for PID, the target EXE under bpfjet trace --instance, then the
# loader's maps in OUT. The target must exit 7 (its own result, traced or
# not).
bpfjet_side() {
    local pid=$1 obj=$2 exe=$3 out=$4
    local go=$out.go
    mkfifo "$go"
    "$BPFJET" exec --instance "$INST" -- "$WORK/multi_loader" --wait "$pid" "$obj" \
        < "$go" > "$out" 2> "$out.err" &
    LOADER_PID=$!
    exec 9> "$go"
    for _ in $(seq 200); do
        grep -q '^attached$' "$out" 2>/dev/null && break
        kill -0 "$LOADER_PID" 2>/dev/null || break
        sleep 0.05
    done
    if ! grep -q '^attached$' "$out"; then
        exec 9>&-
        wait "$LOADER_PID" || true
        LOADER_PID=
        fail "bpfjet ($(basename "$out")): the loader did not attach: $(cat "$out" "$out.err")"
        return
    fi
    local rc=0
    "$BPFJET" trace --instance "$INST" --engine jit -- "$exe" > /dev/null 2> "$out.trace.err" || rc=$?
    [ "$rc" = 7 ] || fail "bpfjet ($(basename "$out")): the target exited $rc: $(cat "$out.trace.err")"
    echo go >&9
    exec 9>&-
    wait "$LOADER_PID" || fail "bpfjet ($(basename "$out")): the loader failed: $(cat "$out.err")"
    LOADER_PID=
}

# Every process.
bpfjet_side 0 "$WORK/multi.o" "$TARGET" "$WORK/all.out"
grep -v -e '^pid ' -e '^attached$' "$WORK/all.out" | sort > "$WORK/all.lines" || true
if diff "$WORK/kernel.lines" "$WORK/all.lines" > "$WORK/all.diff"; then
    echo "ok: links for every process: $(grep -c '^link ' "$WORK/all.lines") links' info and $(grep -vc '^link ' "$WORK/all.lines") map entries equal to the kernel's"
else
    fail "links for every process: bpfjet's lines differ from the kernel's:"; cat "$WORK/all.diff"
fi
grep -q '^pid 0$' "$WORK/all.out" || fail "link info of a link for every process: pid is not 0"
grep -q '^counts 0 700$' "$WORK/all.lines" || fail "links for every process: mf_* entries are not 700"

# Another process: the target is not traced.
sleep 30 & OTHER=$!
bpfjet_side "$OTHER" "$WORK/multi.o" "$TARGET" "$WORK/other.out"
kill "$OTHER" 2>/dev/null || true
wait "$OTHER" 2>/dev/null || true
grep -q "^pid $OTHER\$" "$WORK/other.out" || fail "link info of a link for pid $OTHER: $(grep '^pid' "$WORK/other.out")"
if grep -E '^(counts|by_ip) ' "$WORK/other.out" | grep -v ' 0$' > "$WORK/other.hits"; [ -s "$WORK/other.hits" ]; then
    fail "links for pid $OTHER ran in the target: $(cat "$WORK/other.hits")"
else
    echo "ok: links for another process: the target ran untraced"
fi
grep -q 'has no probe links' "$WORK/other.out.trace.err" \
    || fail "links for another process: bpfjet trace did not say the target runs untraced: $(cat "$WORK/other.out.trace.err")"

# A stripped target whose functions only its detached debug file names
# (as bcc and bpftrace name a stripped library's functions from its debug
# package), one of them a 5-byte tail-call `jmp`: the loader links by file
# offset (naming them from NAME.debug); bpfjet names the offsets from the
# debug file its .gnu_debuglink names and patches the `jmp` stub (the
# file's own bytes, not an earlier patch). Without the debuglink bpfjet
# cannot name them: the offsets are raw points, each an int3 (entry and
# return), as the kernel probes any offset.
# stripped_case NAME LINK(yes|no)
stripped_case() {
    local name=$1 link=$2
    local exe=$WORK/$name
    cc -O2 -g -o "$exe" "$SRC/strip_target.c"
    objcopy --only-keep-debug "$exe" "$exe.debug"
    strip --strip-all "$exe"
    [ "$link" = yes ] && objcopy --add-gnu-debuglink="$exe.debug" "$exe"
    clang-19 -O2 -g -target bpf -D__TARGET_ARCH_x86 -I "/usr/include/$(uname -m)-linux-gnu" \
        -DTARGET_EXE="\"$exe\"" -c "$SRC/strip.bpf.c" -o "$WORK/$name.o"
    "$WORK/multi_loader" "$WORK/$name.o" "$exe" 2> "$WORK/$name.kerr" | grep '^counts' > "$WORK/$name.klines" \
        || fail "kernel: $name: $(cat "$WORK/$name.kerr")"
    printf 'counts %s\n' "0 50" "1 1225" "2 50" "3 2450" "4 0" "5 0" "6 0" "7 0" > "$WORK/$name.expected"
    diff "$WORK/$name.expected" "$WORK/$name.klines" > /dev/null \
        || fail "kernel: $name: not its known calls: $(cat "$WORK/$name.klines")"
    bpfjet_side 0 "$WORK/$name.o" "$exe" "$WORK/$name.out"
    if grep '^counts' "$WORK/$name.out" | diff "$WORK/$name.klines" - > "$WORK/$name.diff"; then
        echo "ok: $name: the kernel's counts"
    else
        fail "$name: bpfjet's counts differ from the kernel's:"; cat "$WORK/$name.diff"
    fi
}
stripped_case strip_named yes
stripped_case strip_raw no

# Bad input, one field wrong at a time: the kernel's errno for each.
"$WORK/multi_loader" --bad "$WORK/multi.o" > "$WORK/kbad.out" 2>&1 || fail "kernel: bad-input run: $(cat "$WORK/kbad.out")"
"$BPFJET" exec --instance "$INST" -- "$WORK/multi_loader" --bad "$WORK/multi.o" > "$WORK/bbad.out" 2>&1 \
    || fail "bpfjet: bad-input run: $(cat "$WORK/bbad.out")"
if diff "$WORK/kbad.out" "$WORK/bbad.out" > "$WORK/bad.diff"; then
    echo "ok: bad input: $(grep -c '^bad ' "$WORK/bbad.out") cases with the kernel's errno"
else
    fail "bad input: bpfjet's errnos differ from the kernel's:"; cat "$WORK/bad.diff"
fi

[ "$fails" = 0 ] || { echo "uprobe_multi: $fails failure(s)"; exit 1; }
echo "uprobe_multi: all checks passed"
