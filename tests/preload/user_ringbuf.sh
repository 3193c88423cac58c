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

. "$(dirname "$0")/lib.sh"
preload_setup urbtest clang-19 cc

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
