# Shared by the tests/preload scripts (sourced): the bpfjet binary and its
# preload library, the tools a script needs, root, and a scratch directory
# and private instance that go away at exit; when bpftrace has attached;
# one comparison of a check.

# skip WHY: the check cannot run here; said on stdout and in make test's
# list of skips, and the script ends successfully.
skip() {
    echo "SKIPPED: $*" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"
    exit 0
}

# preload_setup PREFIX TOOL...: sets BPFJET (absolute), ROOT, WORK (a
# scratch directory), INST (PREFIX and the pid) and BPFJET_RUN_DIR; skips
# without one of the tools or without root (the kernel side); fails
# without libbpfjet.so next to the binary.
preload_setup() {
    local prefix=$1 tool
    shift
    BPFJET=$(realpath "${BPFJET:-target/release/bpfjet}")
    ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    for tool in "$@"; do
        command -v "$tool" >/dev/null || skip "$tool not installed"
    done
    [ "$(id -u)" = 0 ] || skip "the kernel side needs root"
    [ -f "$(dirname "$BPFJET")/libbpfjet.so" ] || {
        echo "FAIL: $(dirname "$BPFJET")/libbpfjet.so missing (cargo build -p bpfjet-preload)"
        exit 1
    }
    WORK=$(mktemp -d)
    INST=$prefix$$
    export BPFJET_RUN_DIR=$WORK/run
    trap preload_cleanup EXIT
}

# The scratch directory and the instance's shared-memory objects.
preload_cleanup() {
    rm -rf "$WORK"
    rm -f /dev/shm/bpfjet."$INST".*
}

# Whether bpftrace (pid $1, or a child of it: `timeout` runs it) waits in
# its poll loop: epoll_wait(..., 100 ms), syscall 232 with timeout 0x64.
# It gets there once every probe is attached.
bt_polling() {
    local p
    for p in "$1" $(pgrep -P "$1" 2>/dev/null); do
        case "$(cat /proc/"$p"/syscall 2>/dev/null)" in "232 "*" 0x64 "*) return 0 ;; esac
    done
    return 1
}

# check NAME EXPECTED ACTUAL: "ok" or "FAIL" with both sides, counted in
# $fails. CHECK_LABELS names the sides ("kernel bpfjet" where the
# expectation is the kernel's run; default "expected got").
check() {
    if [ "$2" == "$3" ]; then
        echo "ok   $1"
    else
        local labels=(${CHECK_LABELS:-expected got})
        echo "FAIL $1"
        echo "  ${labels[0]}: $2"
        echo "  ${labels[1]}: $3"
        fails=$((fails + 1))
    fi
}

# interrupt_bpftrace PID: SIGINT, as a user's Ctrl-C, until bpftrace (pid
# PID) exits, for up to 30 s. bpftrace 0.17 sometimes loses a SIGINT (on
# the kernel too: session 32 reproduced it without bpfjet), and a user
# would press Ctrl-C again: so a signal is sent again every 5 s, with a
# NOTE saying so. Fails (returns 1) if bpftrace is still running after
# 30 s.
interrupt_bpftrace() {
    local b=$1 i
    kill -INT "$b" 2>/dev/null || true
    for i in $(seq 300); do
        kill -0 "$b" 2>/dev/null || return 0
        if [ $((i % 50)) -eq 0 ]; then
            echo "NOTE: bpftrace (pid $b) still running $((i / 10)) s after SIGINT; sending it again"
            kill -INT "$b" 2>/dev/null || true
        fi
        sleep 0.1
    done
    ! kill -0 "$b" 2>/dev/null
}
