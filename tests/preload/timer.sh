#!/usr/bin/env bash
# bpf_timer through libbpf under `bpfjet exec`, compared with the kernel:
# tests/preload/timer.c (built here) loads tests/preload/timer.bpf.c (a
# flow table whose idle flows a per-flow timer deletes, and a periodic
# ticker), drives it with BPF_PROG_TEST_RUN, deletes and updates flows
# from user space while their timers are armed, and prints what the maps
# hold after the timeouts (timer bytes included: user space reads them as
# zeros). The same binary must print the same lines against the kernel and
# under `bpfjet exec`.
#
# Needs root (the kernel side), clang-19, libbpf-dev.
# Usage: BPFJET=target/release/bpfjet tests/preload/timer.sh
set -euo pipefail

. "$(dirname "$0")/lib.sh"
preload_setup timertest clang-19 cc

cc -O2 -Wall -o "$WORK/timer" "$ROOT/tests/preload/timer.c" -lbpf
clang-19 -O2 -g -target bpf -I "/usr/include/$(uname -m)-linux-gnu" \
    -c "$ROOT/tests/preload/timer.bpf.c" -o "$WORK/timer.o"

"$WORK/timer" "$WORK/timer.o" > "$WORK/kernel.out"
for want in "after the idle timeout: [3: 101 pkts 1064 bytes timer 00] (1 flows)" \
            "after the user-space changes: [1: 3 pkts 183 bytes timer 00] [3: 101 pkts 1064 bytes timer 00] [4: 3 pkts 192 bytes timer 00] (3 flows)" \
            "expired 3, added 5" \
            "packet on flow 3 after the update: 1" \
            "ticks after the stop: none, timer bytes 00"; do
    grep -qF "$want" "$WORK/kernel.out" || {
        echo "FAIL timer: the kernel run lacks '$want' (the test no longer tests what it should)"
        cat "$WORK/kernel.out"; exit 1; }
done
if ! "$BPFJET" exec --instance "$INST" -- "$WORK/timer" "$WORK/timer.o" \
        > "$WORK/bpfjet.out" 2> "$WORK/bpfjet.err"; then
    echo "FAIL timer under bpfjet exec exited with an error"
    cat "$WORK/bpfjet.out" "$WORK/bpfjet.err"; exit 1
fi
if diff -u "$WORK/kernel.out" "$WORK/bpfjet.out"; then
    echo "ok   timer (per-flow idle timers deleting flows, user-space delete/update cancelling armed timers, a periodic ticker) prints the same $(wc -l < "$WORK/kernel.out") lines against the kernel and under bpfjet exec"
else
    echo "FAIL timer differs"; cat "$WORK/bpfjet.err"; exit 1
fi
