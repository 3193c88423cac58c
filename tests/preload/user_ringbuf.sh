#!/usr/bin/env bash
# libbpf's user ring buffer producer under `bpfjet exec`, compared with the
# kernel: tests/preload/user_ringbuf.c (built here) pushes samples of
# varying sizes with user_ring_buffer__reserve/submit/discard (some
# discarded, rounds that wrap the ring, a reservation left BUSY), has the
# XDP program of user_ringbuf.bpf.c drain them with bpf_user_ringbuf_drain
# (BPF_PROG_TEST_RUN; its callback reads each sample through the dynptr and
# stops early on request; a second build only counts) and prints the drain results and what the
# callback recorded in an ARRAY; a user_ring_buffer__reserve_blocking on a
# full ring times out, then is freed by a drain from another thread (epoll
# on the map fd); then the kernel's rules for element commands, mmap and
# BPF_MAP_CREATE of a USER_RINGBUF. The same binary must print the same
# lines against the kernel and under `bpfjet exec`.
#
# Needs root (the kernel side), clang-19, libbpf-dev.
# Usage: BPFJET=target/release/bpfjet tests/preload/user_ringbuf.sh
set -euo pipefail

BPFJET=${BPFJET:-target/release/bpfjet}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BPFJET=$(realpath "$BPFJET")
for tool in clang-19 cc; do
    command -v "$tool" >/dev/null || { echo "SKIPPED: $tool not installed" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
done
[ "$(id -u)" = 0 ] || { echo "SKIPPED: the kernel side needs root" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
[ -f "$(dirname "$BPFJET")/libbpfjet.so" ] || {
    echo "FAIL: $(dirname "$BPFJET")/libbpfjet.so missing (cargo build -p bpfjet-preload)"; exit 1; }

WORK=$(mktemp -d)
INST=urbtest$$
export BPFJET_RUN_DIR=$WORK/run
cleanup() {
    rm -rf "$WORK"
    rm -f /dev/shm/bpfjet.$INST.*
}
trap cleanup EXIT

cc -O2 -Wall -o "$WORK/user_ringbuf" "$ROOT/tests/preload/user_ringbuf.c" -lbpf -lpthread

# compare NAME [CFLAGS]: build the program, run the control plane on the
# kernel and under bpfjet exec, require the same output.
compare() {
    local name=$1; shift
    clang-19 -O2 -g -target bpf -I "/usr/include/$(uname -m)-linux-gnu" "$@" \
        -c "$ROOT/tests/preload/user_ringbuf.bpf.c" -o "$WORK/$name.o"
    "$WORK/user_ringbuf" "$WORK/$name.o" > "$WORK/$name.kernel.out"
    for want in "reserve_blocking on a full ring: ok, woken by the drain: yes" \
                "reserve_blocking 100 ms on a full ring: ENOSPC after >= 100 ms: yes" \
                "9 samples, 2 discarded: retval=2 drain=7 calls=7" \
                "busy second: retval=2 drain=1 calls=1"; do
        grep -qF "$want" "$WORK/$name.kernel.out" || {
            echo "FAIL $name: the kernel run lacks '$want' (the test no longer tests what it should)"
            cat "$WORK/$name.kernel.out"; exit 1; }
    done
    if ! "$BPFJET" exec --instance "$INST" -- "$WORK/user_ringbuf" "$WORK/$name.o" \
            > "$WORK/$name.bpfjet.out" 2> "$WORK/$name.bpfjet.err"; then
        # The dynptr helpers the callback reads samples with come with
        # bpfjet's dynptr runtime; until then only the plumbing is compared.
        if grep -q "calls helper 20[0-3] (bpf_dynptr_[a-z_]*) which bpfjet does not support" "$WORK/$name.bpfjet.err"; then
            echo "SKIPPED: user_ringbuf $name: $(grep -o 'helper 20[0-3] (bpf_dynptr_[a-z_]*)' "$WORK/$name.bpfjet.err" | head -1) not in bpfjet's runtime yet" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"
            return 0
        fi
        echo "FAIL user_ringbuf $name under bpfjet exec exited with an error"
        cat "$WORK/$name.bpfjet.out" "$WORK/$name.bpfjet.err"; exit 1
    fi
    if diff -u "$WORK/$name.kernel.out" "$WORK/$name.bpfjet.out"; then
        echo "ok   user_ringbuf $name (user_ring_buffer__reserve/submit/discard/reserve_blocking, bpf_user_ringbuf_drain, epoll, mmap and create rules) prints the same $(wc -l < "$WORK/$name.kernel.out") lines against the kernel and under bpfjet exec"
    else
        echo "FAIL user_ringbuf $name differs"; cat "$WORK/$name.bpfjet.err"; exit 1
    fi
}

# The callback counting only, then reading every sample through its dynptr.
compare count_only -DCOUNT_ONLY
compare dynptr_reads
