#!/usr/bin/env bash
# libbpf's ring-buffer consumer under `bpfjet exec`, compared with the kernel:
# examples/control_plane/rb_demo.c (built here) runs an XDP program that
# writes ring-buffer records (BPF_PROG_TEST_RUN), consumes them with
# ring_buffer__poll / ring_buffer__consume (mmap of the ring fd with the
# kernel's layout, epoll wake-ups), overflows the ring and checks the mmap
# rules. The same binary must print the same lines against the kernel and
# under `bpfjet exec`.
#
# Needs root (the kernel side), clang-19, libbpf-dev.
# Usage: BPFJET=target/release/bpfjet tests/preload/ringbuf.sh
set -euo pipefail

. "$(dirname "$0")/lib.sh"
preload_setup rbtest clang-19 cc

clang-19 -O2 -g -target bpf -I "/usr/include/$(uname -m)-linux-gnu" \
    -c "$ROOT/examples/control_plane/rb_demo.bpf.c" -o "$WORK/rb_demo.o"
cc -O2 -Wall -o "$WORK/rb_demo" "$ROOT/examples/control_plane/rb_demo.c" -lbpf -lpthread

"$WORK/rb_demo" "$WORK/rb_demo.o" > "$WORK/kernel.out"
"$BPFJET" exec --instance "$INST" -- "$WORK/rb_demo" "$WORK/rb_demo.o" > "$WORK/bpfjet.out" 2> "$WORK/bpfjet.err" || {
    echo "FAIL rb_demo under bpfjet exec exited with $?"; cat "$WORK/bpfjet.err"; exit 1; }
grep -q "stats after 100 runs unconsumed: runs=103 reserve_failed=[1-9]" "$WORK/kernel.out" || {
    echo "FAIL the kernel run did not overflow the ring (the test needs a full ring)"; exit 1; }
if diff -u "$WORK/kernel.out" "$WORK/bpfjet.out"; then
    echo "ok   rb_demo (ring_buffer__poll, overflow, epoll wake-up, mmap rules) prints the same $(wc -l < "$WORK/kernel.out") lines against the kernel and under bpfjet exec"
else
    echo "FAIL rb_demo differs"; cat "$WORK/bpfjet.err"; exit 1
fi
