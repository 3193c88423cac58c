#!/usr/bin/env bash
# Debian's libbpf-tools (package libbpf-tools: bcc's tools, built by Debian
# with libbpf inside, nothing of them written here) as unmodified control
# planes: each tool runs under `bpfjet exec --instance`, a workload with a
# known set of calls runs under `bpfjet trace --instance` (or is attached
# with `--pid`), and what the tool prints is compared with the same tool
# against the kernel on the same workload.
#
#   gethostlatency   uprobe + uretprobe pairs on libc's resolver functions
#   opensnoop        sys_enter/sys_exit_open{,at} pairs, -n name filter
#   killsnoop        sys_enter/sys_exit_kill pairs (sigsnoop -k): signal,
#                    target and result, a failed kill included
#   execsnoop        sys_enter/sys_exit_execve (the exit in the new image), -x -l
#   bashreadline     uretprobe on bash's readline, in an interactive bash
#   funclatency      uprobe + uretprobe on a function of PROGRAM, and with
#                    -p PID on a process already running (trace --pid)
#   syscount         raw_syscalls sys_enter/sys_exit, -p PID (trace --pid)
#   mountsnoop       mount/umount enter+exit pairs in a new mount namespace
#   bpftool perf     the uprobes gethostlatency attached (BPF_TASK_FD_QUERY)
#   exitsnoop        a kernel tracepoint: refused with a reason, the tool
#                    exits with its error
#
# Lines of the workload only are compared (the tools run system-wide on the
# kernel): its comm, its marker file names, its own function.
#
# Needs root (the kernel side) and the libbpf-tools package (scripts/setup.sh).
# Usage: BPFJET=target/release/bpfjet tests/preload/libbpf_tools.sh
set -euo pipefail

BPFJET=${BPFJET:-target/release/bpfjet}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BPFJET=$(realpath "$BPFJET")
skip() { echo "SKIPPED: libbpf-tools: $*" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
[ "$(id -u)" = 0 ] || skip "the kernel side needs root"
TOOLS=/usr/sbin
for t in gethostlatency opensnoop killsnoop execsnoop bashreadline funclatency syscount exitsnoop; do
    [ -x "$TOOLS/$t" ] || skip "$TOOLS/$t missing (apt-get install libbpf-tools; scripts/setup.sh does)"
done
for t in stdbuf script cc; do
    command -v "$t" >/dev/null || skip "$t not installed"
done
for lib in libbpfjet.so libbpfjet_trace.so; do
    [ -f "$(dirname "$BPFJET")/$lib" ] || {
        echo "FAIL: $(dirname "$BPFJET")/$lib missing (cargo build --release)"; exit 1; }
done

WORK=$(mktemp -d)
INST=lbt$$
export BPFJET_RUN_DIR=$WORK/run
TOOL_PID=
TARGET_PID=
cleanup() {
    if [ -n "$TOOL_PID" ]; then kill -INT "$TOOL_PID" 2>/dev/null || true; wait "$TOOL_PID" 2>/dev/null || true; fi
    if [ -n "$TARGET_PID" ]; then kill "$TARGET_PID" 2>/dev/null || true; wait "$TARGET_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
    rm -f /dev/shm/bpfjet.$INST.*
}
trap cleanup EXIT

# The target's file name is its comm (15 characters at most).
TARGET=$WORK/lbt_target
COMM=lbt_target
cc -O1 -g -o "$TARGET" "$ROOT/tests/preload/libbpf_tools_target.c"
mkdir -p "$WORK/files"
for i in 0 1 2; do echo "$i" > "$WORK/files/marker.$i"; done

fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# start_tool SIDE OUT READY TOOL ARGS...: the tool, line-buffered, against
# the kernel (SIDE kernel) or under bpfjet exec (SIDE bpfjet); waits until
# its stdout has a line matching READY (the tools print their header once
# attached). Returns 1 if the tool exits first or does not get there in 20 s.
start_tool() {
    local side=$1 out=$2 ready=$3
    shift 3
    if [ "$side" = kernel ]; then
        stdbuf -oL "$@" > "$out" 2> "$out.err" &
    else
        "$BPFJET" exec --instance "$INST" -- stdbuf -oL "$@" > "$out" 2> "$out.err" &
    fi
    TOOL_PID=$!
    for _ in $(seq 200); do
        grep -qE "$ready" "$out" 2>/dev/null && return 0
        kill -0 "$TOOL_PID" 2>/dev/null || { wait "$TOOL_PID" 2>/dev/null || true; TOOL_PID=; return 1; }
        sleep 0.1
    done
    return 1
}

# Stops the tool with SIGINT (it prints its summary) and waits for it.
stop_tool() {
    local rc=0
    sleep 0.5
    kill -INT "$TOOL_PID"
    wait "$TOOL_PID" || rc=$?
    TOOL_PID=
    return $rc
}

# workload SIDE ENGINE ARGS...: the target, traced on bpfjet's ENGINE.
workload() {
    local side=$1 engine=$2
    shift 2
    if [ "$side" = kernel ]; then
        "$TARGET" "$@" > /dev/null
    else
        "$BPFJET" trace --instance "$INST" --engine "$engine" -- "$TARGET" "$@" > /dev/null 2> "$WORK/trace.err" \
            || { fail "bpfjet trace -- $TARGET $*:"; sed 's/^/  /' "$WORK/trace.err"; }
    fi
}

# compare NAME EXPECTED KERNEL BPFJET: the filtered outputs.
compare() {
    local name=$1 expected=$2 kernel=$3 ours=$4
    if [ -z "$kernel" ]; then
        fail "$name: no workload line in the kernel's output (a comparison of nothing)"
    elif [ "$kernel" != "$expected" ]; then
        fail "$name: the kernel's output is not the workload's known behaviour:"
        diff -u <(echo "$expected") <(echo "$kernel") | sed 's/^/  /' || true
    fi
    if [ "$ours" == "$kernel" ]; then
        echo "PASS: $name: under bpfjet == kernel ($(echo "$ours" | wc -l) lines)"
    else
        fail "$name: under bpfjet differs from the kernel:"
        diff -u <(echo "$kernel") <(echo "$ours") | sed 's/^/  /' || true
    fi
}

# run_case NAME ENGINE READY FILTER WORKLOAD_ARGS -- TOOL ARGS...: the tool
# on each side around the workload; prints each side's filtered output to
# $WORK/NAME.{kernel,bpfjet}.
run_case() {
    local name=$1 engine=$2 ready=$3 filter=$4
    shift 4
    local args=()
    while [ "$1" != -- ]; do args+=("$1"); shift; done
    shift
    for side in kernel bpfjet; do
        local out=$WORK/$name.$side.out
        if ! start_tool "$side" "$out" "$ready" "$@"; then
            fail "$name: $side: $* did not attach:"; sed 's/^/  /' "$out.err"
            kill -INT "$TOOL_PID" 2>/dev/null || true; wait "$TOOL_PID" 2>/dev/null || true; TOOL_PID=
            : > "$WORK/$name.$side"
            continue
        fi
        workload "$side" "$engine" "${args[@]}"
        stop_tool || { fail "$name: $side: the tool exited with status $?:"; sed 's/^/  /' "$out.err"; }
        eval "$filter" < "$out" > "$WORK/$name.$side" || true
    done
}

# The sum of a funclatency / histogram's counts.
hist_sum() { awk -F'[:|]' '/->/ { s += $2 } END { print s + 0 }'; }

# ---- gethostlatency: uprobe/uretprobe pairs in libc ------------------------
for engine in interp jit; do
    run_case gethostlatency.$engine "$engine" '^TIME' "awk '\$3 == \"$COMM\" { print \$3, \$5 }'" \
        resolve -- "$TOOLS/gethostlatency"
    compare "gethostlatency ($engine)" "$(for _ in 1 2 3 4 5 6; do echo "$COMM localhost"; done)" \
        "$(cat "$WORK/gethostlatency.$engine.kernel")" "$(cat "$WORK/gethostlatency.$engine.bpfjet")"
done

# ---- bpftool perf (BPF_TASK_FD_QUERY of every process's fds) --------------
# What gethostlatency attached, as bpftool lists it: kind, file, offset
# (the pids, fds and program ids differ between the two sides).
for side in kernel bpfjet; do
    out=$WORK/perf.$side.out
    if start_tool "$side" "$out" '^TIME' "$TOOLS/gethostlatency"; then
        if [ "$side" = kernel ]; then
            bpftool perf > "$WORK/perf.$side.list" 2>&1 || true
        else
            timeout 20 "$BPFJET" exec --instance "$INST" -- bpftool perf > "$WORK/perf.$side.list" 2>&1 || true
        fi
        stop_tool || true
    else
        fail "bpftool perf: $side: gethostlatency did not attach:"; sed 's/^/  /' "$out.err"
    fi
    # "pid P  fd F: prog_id N  uprobe  filename PATH  offset O"
    awk '/ uprobe | uretprobe / { print $7, $9, $11 }' "$WORK/perf.$side.list" | sort > "$WORK/perf.$side" || true
done
compare "bpftool perf (gethostlatency's uprobes)" "$(cat "$WORK/perf.kernel")" \
    "$(cat "$WORK/perf.kernel")" "$(cat "$WORK/perf.bpfjet")"
[ "$(wc -l < "$WORK/perf.kernel")" -ge 4 ] || fail "bpftool perf: the kernel listed $(wc -l < "$WORK/perf.kernel") probes"

# ---- opensnoop: open/openat enter+exit pairs, by name ----------------------
run_case opensnoop jit '^PID' "awk '\$5 ~ /marker/ { print \$2, \$3, \$4, \$5 }'" \
    open "$WORK/files" -- "$TOOLS/opensnoop" -n "$COMM"
compare opensnoop "$(for i in 0 1 2; do echo "$COMM 3 0 $WORK/files/marker.$i"; done
    echo "$COMM -1 2 $WORK/files/marker.missing")" \
    "$(cat "$WORK/opensnoop.kernel")" "$(cat "$WORK/opensnoop.bpfjet")"

# ---- killsnoop (sigsnoop -k): kill enter+exit pairs -------------------------
# Signal, target (the process itself or another pid) and result: 0, 0, and
# -ESRCH (-3) for a process that does not exist.
run_case killsnoop jit '^TIME' \
    "awk '\$3 == \"$COMM\" { print \$3, \$4, (\$5 == \$2 ? \"self\" : \$5), \$6 }'" \
    kill -- "$TOOLS/killsnoop"
compare killsnoop "$(echo "$COMM 0 self 0"; echo "$COMM 17 self 0"; echo "$COMM 15 1073741808 -3")" \
    "$(cat "$WORK/killsnoop.kernel")" "$(cat "$WORK/killsnoop.bpfjet")"

# ---- execsnoop: execve enter in the old image, exit in the new -------------
# The workload is a shell running two programs and failing to run a third:
# the lines holding the marker, but not the shell's own exec (made by
# `bpfjet trace` itself, which runs untraced; the kernel sees it).
MARK=lbtmark$$
for side in kernel bpfjet; do
    out=$WORK/execsnoop.$side.out
    if start_tool "$side" "$out" '^PCOMM' "$TOOLS/execsnoop" -x; then
        script_cmd="/bin/true $MARK-a; /bin/echo $MARK-b > /dev/null; /nonexistent/$MARK-c 2>/dev/null; exit 0"
        if [ "$side" = kernel ]; then
            sh -c "$script_cmd"
        else
            "$BPFJET" trace --instance "$INST" -- sh -c "$script_cmd" > /dev/null 2> "$WORK/trace.err" \
                || { fail "execsnoop: bpfjet trace:"; sed 's/^/  /' "$WORK/trace.err"; }
        fi
        stop_tool || fail "execsnoop: $side: exit status $?"
    else
        fail "execsnoop: $side: did not attach:"; sed 's/^/  /' "$out.err"
    fi
    # PCOMM, RET and ARGS (not the pids).
    awk '/'"$MARK"'/ && $5 !~ /bin\/sh$/ { $2 = ""; $3 = ""; print }' "$out" > "$WORK/execsnoop.$side" || true
done
compare execsnoop "$(printf '%s\n' "true   0 /bin/true $MARK-a" "echo   0 /bin/echo $MARK-b" \
    "sh   -2 /nonexistent/$MARK-c")" \
    "$(cat "$WORK/execsnoop.kernel")" "$(cat "$WORK/execsnoop.bpfjet")"

# ---- mountsnoop: mount/umount enter+exit pairs, the task's mount namespace --
# A private mount namespace (unshare -m) mounts and unmounts a tmpfs; the
# lines of unshare, mount and umount (COMM and CALL; not the pids, nor the
# namespace's number, which a new namespace may not reuse).
mkdir -p "$WORK/mnt"
MOUNTS="mount -t tmpfs -o size=1m $MARK $WORK/mnt && umount $WORK/mnt"
for side in kernel bpfjet; do
    out=$WORK/mountsnoop.$side.out
    if start_tool "$side" "$out" '^COMM' "$TOOLS/mountsnoop"; then
        if [ "$side" = kernel ]; then
            unshare -m sh -c "$MOUNTS"
        else
            "$BPFJET" trace --instance "$INST" -- unshare -m sh -c "$MOUNTS" > /dev/null 2> "$WORK/trace.err" \
                || { fail "mountsnoop: bpfjet trace:"; sed 's/^/  /' "$WORK/trace.err"; }
        fi
        stop_tool || fail "mountsnoop: $side: exit status $?"
    else
        fail "mountsnoop: $side: did not attach:"; sed 's/^/  /' "$out.err"
    fi
    awk 'NR > 1 && ($1 == "unshare" || /'"$MARK"'|'"${WORK//\//\\/}"'\/mnt/) { $2 = ""; $3 = ""; $4 = ""; print }' "$out" \
        > "$WORK/mountsnoop.$side" || true
done
compare mountsnoop "$(printf '%s\n' 'unshare    mount("none", "/", "", MS_VERBOSE | MS_PRIVATE, "") = 0' \
    "mount    mount(\"$MARK\", \"$WORK/mnt\", \"tmpfs\", 0x0, \"size=1m\") = 0" \
    "umount    umount(\"$WORK/mnt\", 0x0) = 0")" \
    "$(cat "$WORK/mountsnoop.kernel")" "$(cat "$WORK/mountsnoop.bpfjet")"

# ---- bashreadline: uretprobe on readline in an interactive bash ------------
for side in kernel bpfjet; do
    out=$WORK/bashreadline.$side.out
    if start_tool "$side" "$out" '^TIME' "$TOOLS/bashreadline"; then
        input() { sleep 0.5; printf '%s\n' "echo $MARK-1 > /dev/null" ": $MARK-2" "exit"; }
        if [ "$side" = kernel ]; then
            input | script -qc "bash --norc -i" /dev/null > /dev/null
        else
            input | "$BPFJET" trace --instance "$INST" -- script -qc "bash --norc -i" /dev/null > /dev/null 2> "$WORK/trace.err" \
                || { fail "bashreadline: bpfjet trace:"; sed 's/^/  /' "$WORK/trace.err"; }
        fi
        stop_tool || fail "bashreadline: $side: exit status $?"
    else
        fail "bashreadline: $side: did not attach:"; sed 's/^/  /' "$out.err"
    fi
    awk '/'"$MARK"'/ { $1 = ""; $2 = ""; print }' "$out" > "$WORK/bashreadline.$side" || true
done
compare bashreadline "$(printf '%s\n' "  echo $MARK-1 > /dev/null" "  : $MARK-2")" \
    "$(cat "$WORK/bashreadline.kernel")" "$(cat "$WORK/bashreadline.bpfjet")"

# ---- funclatency PROGRAM:FUNCTION: every process running PROGRAM -----------
N=1000
run_case funclatency jit '^Tracing' hist_sum calls $N -- "$TOOLS/funclatency" "$TARGET:work"
compare "funclatency $COMM:work (histogram total)" "$N" \
    "$(cat "$WORK/funclatency.kernel")" "$(cat "$WORK/funclatency.bpfjet")"

# ---- a running process: funclatency -p and syscount -p, `trace --pid` -----
# The target waits for a file, then makes its N calls; bpfjet attaches to
# it (ptrace) before the file appears and detaches after. funclatency's
# uprobe names the process (perf_event_open's pid): the control plane
# attaches bpfjet there itself, as the kernel attaches the uprobe
# (`pid_case 1`). syscount filters on the pid in its program: its
# tracepoint names no process, and `bpfjet trace --pid` attaches
# (`pid_case 0`).
pid_case() {
    local auto=$1 name=$2 ready=$3 filter=$4
    shift 4
    for side in kernel bpfjet; do
        local out=$WORK/$name.$side.out go=$WORK/$name.$side.go
        "$TARGET" wait "$go" $N &
        TARGET_PID=$!
        local tool=() a
        for a in "$@"; do tool+=("${a//PID/$TARGET_PID}"); done
        if start_tool "$side" "$out" "$ready" "${tool[@]}"; then
            if [ "$side" = kernel ]; then
                touch "$go"
                sleep 1
            elif [ "$auto" = 1 ]; then
                # Its uprobe names the process: the control plane attached
                # bpfjet there by itself (crates/server/src/pid_attach.rs).
                for _ in $(seq 100); do grep -q 'attached to process' "$out.err" && break; sleep 0.1; done
                grep -q "attached to process $TARGET_PID" "$out.err" \
                    || fail "$name: the tool's probe link for process $TARGET_PID did not attach bpfjet there"
                touch "$go"
                sleep 1
            else
                "$BPFJET" trace --instance "$INST" --pid "$TARGET_PID" --duration 3 > /dev/null 2> "$WORK/trace.err" &
                local tr=$!
                for _ in $(seq 100); do grep -q 'attached to process' "$WORK/trace.err" && break; sleep 0.1; done
                touch "$go"
                wait "$tr" || { fail "$name: bpfjet trace --pid:"; sed 's/^/  /' "$WORK/trace.err"; }
            fi
            stop_tool || { fail "$name: $side: exit status $?"; sed 's/^/  /' "$out.err"; }
        else
            fail "$name: $side: did not attach:"; sed 's/^/  /' "$out.err"
        fi
        kill "$TARGET_PID"; wait "$TARGET_PID" 2>/dev/null || true; TARGET_PID=
        eval "$filter" < "$out" > "$WORK/$name.$side" || true
    done
}
pid_case 1 funclatency-p '^Tracing' hist_sum "$TOOLS/funclatency" -p PID :work
compare "funclatency -p PID :work (histogram total)" "$N" \
    "$(cat "$WORK/funclatency-p.kernel")" "$(cat "$WORK/funclatency-p.bpfjet")"
pid_case 0 syscount-p '^Tracing' "awk '\$1 == \"getppid\" { print \$1, \$2 }'" "$TOOLS/syscount" -p PID
compare "syscount -p PID (getppid)" "getppid $N" \
    "$(cat "$WORK/syscount-p.kernel")" "$(cat "$WORK/syscount-p.bpfjet")"

# ---- a kernel event: refused, with the reason, before anything runs --------
rc=0
timeout 20 "$BPFJET" exec --instance "$INST" -- "$TOOLS/exitsnoop" > "$WORK/exitsnoop.out" 2> "$WORK/exitsnoop.err" || rc=$?
if [ $rc != 0 ] && grep -q 'not served by bpfjet' "$WORK/exitsnoop.err" \
    && grep -q 'sched_process_exit' "$WORK/exitsnoop.err"; then
    echo "PASS: exitsnoop (sched/sched_process_exit) is refused with a reason, the tool exits ($rc)"
else
    fail "exitsnoop under bpfjet exec: status $rc, stderr:"; sed 's/^/  /' "$WORK/exitsnoop.err"
fi

[ $fails = 0 ] || { echo "libbpf_tools: $fails failure(s)"; exit 1; }
echo "libbpf_tools: all passed"
