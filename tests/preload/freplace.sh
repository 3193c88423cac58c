#!/usr/bin/env bash
# BPF_PROG_TYPE_EXT (freplace) under `bpfjet exec`, driven by an unmodified
# libbpf program (tests/preload/freplace_run.c, built here): fr_ext.o's
# ext_slot replaces fr_target.o's global function `slot` through
# bpf_program__attach_freplace; test runs of the target then run the
# extension inside it (bpfjet's interpreter), and the original again once
# the link is gone. Refusals: a signature that does not match, a static
# target function, a second extension of the same function, a second
# attach to the load-time target.
#
# The oracle: this kernel refuses EXT loads (EPERM), so it runs the
# extension's code as a plain XDP program (ext_as_xdp: the same verdict
# function) and the target unextended; the verdicts through bpfjet's
# extended target must be the extension's, around the target's own code.
#
# Needs root, clang-19, libbpf-dev.
# Usage: BPFJET=target/release/bpfjet tests/preload/freplace.sh
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
INST=freplace$$
export BPFJET_RUN_DIR=$WORK/run
cleanup() { rm -rf "$WORK"; rm -f /dev/shm/bpfjet.$INST.*; }
trap cleanup EXIT

fails=0
. "$(dirname "$0")/lib.sh"
for p in fr_target fr_ext; do
    clang-19 -O2 -g -target bpf -I "/usr/include/$(uname -m)-linux-gnu" \
        -c "$ROOT/tests/preload/$p.bpf.c" -o "$WORK/$p.o"
done
cc -O2 -Wall -o "$WORK/freplace_run" "$ROOT/tests/preload/freplace_run.c" -lbpf

oracle=$("$WORK/freplace_run" oracle "$WORK")
kernel=$("$WORK/freplace_run" ext "$WORK" || true)
echo "kernel: $(echo "$kernel" | grep -m1 '^load ext_slot' || echo 'loads EXT programs')"
jet=$("$BPFJET" exec --instance "$INST" -- "$WORK/freplace_run" ext "$WORK")
line() { echo "$1" | grep -m1 "^$2" || true; }

check "the target unextended, as the kernel runs it" "$(line "$kernel" original)" "$(line "$jet" original)"
check "verdicts through the extended target: the extension's (kernel, as XDP)" \
    "$(line "$oracle" 'with ext')" "$(line "$jet" 'with ext')"
check "the extension's own map: one call per packet" "$(line "$oracle" 'ext calls')" "$(line "$jet" 'ext calls')"
check "the target's code around the call counted the extension's drops" \
    "target drops $(line "$oracle" 'with ext' | tr ' ' '\n' | grep -cx 1)" "$(line "$jet" 'target drops')"
check "link info: tracing link into the target, EXT program" \
    "link: type 2, target is the target program: yes, prog type of ext: 28" "$(line "$jet" 'link:')"
check "a signature that differs: EINVAL with the kernel's log line" \
    "load bad_args for slot: Invalid argument (bad_args() has 2 args while slot() has 1 args)" \
    "$(line "$jet" 'load bad_args')"
check "a static target function: EINVAL" \
    "load ext_slot for helper: Invalid argument (helper() is not a global function)" \
    "$(line "$jet" 'load ext_slot for helper')"
check "a second extension of the same function: EBUSY" \
    "second link into slot: Device or resource busy" "$(line "$jet" 'second link')"
check "the load-time target taken: EINVAL" \
    "raw_tracepoint_open after the load-time target was taken: Invalid argument" "$(line "$jet" 'raw_tracepoint_open')"
check "LINK_DETACH: the original function runs again" \
    "$(line "$kernel" original | sed 's/^original/link detached/')" "$(line "$jet" 'link detached')"
check "LINK_DETACH twice: ENOLINK" "detach again: Link has been severed" "$(line "$jet" 'detach again')"
check "link gone: the original function runs again" \
    "$(line "$kernel" original | sed 's/^original/link gone/')" "$(line "$jet" 'link gone')"
check "nothing left behind" "0 0" "$(ls "$WORK/run/$INST/progs" | wc -l) $(ls "$WORK/run/$INST/links" | wc -l)"

if [ $fails -ne 0 ]; then
    echo "freplace: $fails check(s) failed"; exit 1
fi
echo "freplace: all checks passed"
