#!/usr/bin/env bash
# Unmodified control planes under `bpfjet exec`, compared with the kernel.
#
#  1. Debian's bpftool: map create/update/lookup/dump/show, prog load (an
#     XDP object compiled here, verified by bpfjet), prog show, prog run
#     (PROG_TEST_RUN in bpfjet), btf dump; each result compared with the
#     same command against the kernel where the output is comparable.
#  2. examples/control_plane/cp_demo.c (libbpf, built here): the same binary
#     must print the same lines against the kernel and under `bpfjet exec`.
#
# Needs root (the kernel side) and bpftool, clang-19, libbpf-dev.
# Usage: BPFJET=target/release/bpfjet tests/preload/control_planes.sh
set -euo pipefail

BPFJET=${BPFJET:-target/release/bpfjet}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BPFJET=$(realpath "$BPFJET")
for tool in bpftool clang-19 cc python3; do
    command -v "$tool" >/dev/null || { echo "SKIPPED: $tool not installed" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
done
[ "$(id -u)" = 0 ] || { echo "SKIPPED: the kernel side needs root" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"; exit 0; }
[ -f "$(dirname "$BPFJET")/libbpfjet.so" ] || {
    echo "FAIL: $(dirname "$BPFJET")/libbpfjet.so missing (cargo build -p bpfjet-preload)"; exit 1; }

WORK=$(mktemp -d)
INST=cptest$$
export BPFJET_RUN_DIR=$WORK/run
BPFFS=/sys/fs/bpf
KPIN=$BPFFS/bpfjet_cptest_$$
JPIN=$BPFFS/bpfjet_cptest_jet_$$ # bpfjet's pins live in its run dir; the directory is real
mount | grep -q "on $BPFFS type bpf" || mount -t bpf bpf "$BPFFS"
mkdir -p "$KPIN" "$JPIN"
cleanup() {
    rm -rf "$KPIN" "$JPIN" "$WORK"
    rm -f /dev/shm/bpfjet.$INST.*
}
trap cleanup EXIT

fails=0
check() { # name expected actual
    if [ "$2" == "$3" ]; then
        echo "ok   $1"
    else
        echo "FAIL $1"; echo "  kernel: $2"; echo "  bpfjet: $3"; fails=$((fails + 1))
    fi
}
jx() { "$BPFJET" exec --instance "$INST" -- "$@"; }

clang-19 -O2 -g -target bpf -I "/usr/include/$(uname -m)-linux-gnu" \
    -c "$ROOT/examples/control_plane/xdp_count.bpf.c" -o "$WORK/xdp_count.o"
cc -O2 -Wall -o "$WORK/cp_demo" "$ROOT/examples/control_plane/cp_demo.c" -lbpf
cc -O2 -Wall -o "$WORK/unpin" "$ROOT/examples/control_plane/unpin.c"
python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(100)))' > "$WORK/pkt"

# Only the fields both must agree on (ids, times, memlock differ).
pick() { python3 -c '
import json, sys
keys = sys.argv[1].split(",")
d = json.load(sys.stdin)
rows = d if isinstance(d, list) else [d]
print(json.dumps([{k: r.get(k) for k in keys} for r in rows], sort_keys=True))' "$1"; }

# ---- bpftool, kernel then bpfjet -------------------------------------------
for side in kernel bpfjet; do
    if [ $side = kernel ]; then run=(); pin=$KPIN; else run=(jx); pin=$JPIN; fi
    "${run[@]}" bpftool map create "$pin/m" type hash key 4 value 8 entries 16 name cp_m
    "${run[@]}" bpftool map update pinned "$pin/m" key 1 0 0 0 value 7 0 0 0 0 0 0 0
    "${run[@]}" bpftool map update pinned "$pin/m" key 2 0 0 0 value 9 0 0 0 0 0 0 0
    "${run[@]}" bpftool -j map lookup pinned "$pin/m" key 2 0 0 0 > "$WORK/$side.lookup"
    "${run[@]}" bpftool -j map dump pinned "$pin/m" | python3 -c '
import json,sys; print(json.dumps(sorted(json.load(sys.stdin), key=lambda e: e["key"])))' > "$WORK/$side.dump"
    "${run[@]}" bpftool -j map show pinned "$pin/m" | pick type,name,flags,bytes_key,bytes_value,max_entries,frozen > "$WORK/$side.mapshow"
    set +e
    "${run[@]}" bpftool map lookup pinned "$pin/m" key 3 0 0 0 >/dev/null 2>&1; echo $? > "$WORK/$side.missing"
    set -e
    "${run[@]}" bpftool prog load "$WORK/xdp_count.o" "$pin/p" pinmaps "$pin/maps"
    "${run[@]}" bpftool -j prog show pinned "$pin/p" | pick type,name,tag,gpl_compatible > "$WORK/$side.progshow"
    "${run[@]}" bpftool -j prog show pinned "$pin/p" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["map_ids"]))' > "$WORK/$side.nmaps"
    "${run[@]}" bpftool prog dump xlated pinned "$pin/p" | grep -c 'map\[id:' > "$WORK/$side.xlated_maps"
    "${run[@]}" bpftool map update pinned "$pin/maps/limit" key 0 0 0 0 value 80 0 0 0
    : > "$WORK/$side.run"
    for len in 60 100; do
        head -c $len "$WORK/pkt" > "$WORK/pkt$len"
        "${run[@]}" bpftool prog run pinned "$pin/p" data_in "$WORK/pkt$len" data_out "$WORK/$side.out$len" repeat 4 \
            | sed 's/duration.*//' >> "$WORK/$side.run"
        cmp -s "$WORK/pkt$len" "$WORK/$side.out$len" && echo "data_out $len unchanged" >> "$WORK/$side.run"
    done
    "${run[@]}" bpftool -j map dump pinned "$pin/maps/counts" | python3 -c '
import json,sys; print(json.dumps(sorted(json.load(sys.stdin), key=lambda e: str(e["key"]))))' > "$WORK/$side.counts"
    btf_id=$("${run[@]}" bpftool -j map show pinned "$pin/maps/counts" | python3 -c 'import json,sys; print(json.load(sys.stdin)["btf_id"])')
    "${run[@]}" bpftool btf dump id "$btf_id" | grep -E "STRUCT|TYPEDEF|INT|VAR|FUNC " | sort > "$WORK/$side.btf"
done
for f in lookup dump mapshow missing progshow nmaps xlated_maps run counts; do
    check "bpftool $f" "$(cat "$WORK/kernel.$f")" "$(cat "$WORK/bpfjet.$f")"
done
check "bpftool btf dump (types of the map's BTF)" "$(cat "$WORK/kernel.btf")" "$(cat "$WORK/bpfjet.btf")"

# Served by bpfjet, not the kernel: the map is in bpfjet's instance and the
# kernel has no pin for it.
# (grep reads all of the list: `grep -q` would close the pipe early and,
# under pipefail, the writer's SIGPIPE would fail the test.)
if "$BPFJET" map list --instance "$INST" | grep cp_m > /dev/null && [ ! -e "$JPIN/m" ]; then
    echo "ok   bpftool's map lives in bpfjet instance $INST (bpfjet map list)"
else
    echo "FAIL bpftool's map is not in bpfjet instance $INST"; fails=$((fails + 1))
fi
jx bpftool -j prog show | python3 -c '
import json,sys; progs=json.load(sys.stdin); sys.exit(0 if [p["name"] for p in progs]==["xdp_count"] else 1)' \
    && echo "ok   bpftool prog show under exec lists bpfjet's program only" \
    || { echo "FAIL bpftool prog show under exec"; fails=$((fails + 1)); }

# Unpinning (unlink on bpffs) frees what only the pins held.
pins=()
for f in "$BPFJET_RUN_DIR/$INST/pins"/*; do
    pins+=("$(basename "$f" | sed 's/%2F/\//g; s/%25/%/g')")
done
jx "$WORK/unpin" "${pins[@]}"
left=$("$BPFJET" map list --instance "$INST" | tail -n +2 | wc -l)
progs=$(ls "$BPFJET_RUN_DIR/$INST/progs" | wc -l)
check "objects left after unpinning everything (maps, programs)" "0 0" "$left $progs"

# ---- kernel kfuncs through bpf() ---------------------------------------------
# libbpf resolves __ksym kfuncs against the kernel's BTF and passes their
# BTF ids (crates/server/src/kfunc_calls.rs): an open-coded iterator and a
# kfunc's address, run by bpftool prog run on both sides; a kfunc bpfjet
# does not provide is refused with its name in the verifier log.
clang-19 -O2 -g -target bpf -I "/usr/include/$(uname -m)-linux-gnu" \
    -c "$ROOT/tests/preload/kfunc_calls.bpf.c" -o "$WORK/kfunc_calls.o"
clang-19 -O2 -g -target bpf -I "/usr/include/$(uname -m)-linux-gnu" -DMISSING \
    -c "$ROOT/tests/preload/kfunc_calls.bpf.c" -o "$WORK/kfunc_missing.o"
for side in kernel bpfjet; do
    if [ $side = kernel ]; then run=(); pin=$KPIN; else run=(jx); pin=$JPIN; fi
    "${run[@]}" bpftool prog load "$WORK/kfunc_calls.o" "$pin/kf" pinmaps "$pin/kfmaps"
    : > "$WORK/$side.kfrun"
    for len in 37 60 100; do
        head -c $len "$WORK/pkt" > "$WORK/kpkt$len"
        "${run[@]}" bpftool prog run pinned "$pin/kf" data_in "$WORK/kpkt$len" repeat 2 \
            | sed 's/duration.*//' >> "$WORK/$side.kfrun"
    done
    "${run[@]}" bpftool -j map dump pinned "$pin/kfmaps/sum" >> "$WORK/$side.kfrun"
done
check "kernel kfuncs through bpf(): bpftool prog run and the map" "$(cat "$WORK/kernel.kfrun")" "$(cat "$WORK/bpfjet.kfrun")"
# A spin lock in global data, taken in several bpftool processes in turn.
clang-19 -O2 -g -target bpf -I "/usr/include/$(uname -m)-linux-gnu" \
    -c "$ROOT/tests/preload/datasec_lock.bpf.c" -o "$WORK/datasec_lock.o"
for side in kernel bpfjet; do
    if [ $side = kernel ]; then run=(); pin=$KPIN; else run=(jx); pin=$JPIN; fi
    "${run[@]}" bpftool prog load "$WORK/datasec_lock.o" "$pin/dl" pinmaps "$pin/dlmaps"
    : > "$WORK/$side.dlrun"
    for len in 37 60 100; do
        "${run[@]}" bpftool prog run pinned "$pin/dl" data_in "$WORK/kpkt$len" repeat 3 \
            | sed 's/duration.*//' >> "$WORK/$side.dlrun"
    done
    "${run[@]}" bpftool -j map dump pinned "$pin/dlmaps/_data_L" >> "$WORK/$side.dlrun"
done
check "a bpf_spin_lock in .data.L through bpf(): runs and counters" "$(cat "$WORK/kernel.dlrun")" "$(cat "$WORK/bpfjet.dlrun")"
if jx bpftool -d prog load "$WORK/kfunc_missing.o" "$JPIN/kfm" > "$WORK/kfm.out" 2>&1; then
    echo "FAIL a program calling bpf_dynptr_from_xdp loaded under bpfjet exec"; fails=$((fails + 1))
elif grep "bpf_dynptr_from_xdp" "$WORK/kfm.out" > /dev/null; then
    echo "ok   a kernel kfunc bpfjet lacks is refused by name"
else
    echo "FAIL refusal does not name the kfunc"; tail -20 "$WORK/kfm.out"; fails=$((fails + 1))
fi
# Objects from bpf_obj_new would live in one process's memory while the
# program runs in several: refused through bpf(), with the reason.
clang-19 -O2 -g -target bpf -mcpu=v3 -I "/usr/include/$(uname -m)-linux-gnu" \
    -c "$ROOT/examples/nf/skiplist_rbtree.c" -o "$WORK/skiplist_rbtree.o"
if jx bpftool -d prog load "$WORK/skiplist_rbtree.o" "$JPIN/rb" > "$WORK/rb.out" 2>&1; then
    echo "FAIL a bpf_obj_new program loaded through bpf()"; fails=$((fails + 1))
elif grep "bpf_obj_new_impl: the objects bpfjet allocates" "$WORK/rb.out" > /dev/null; then
    echo "ok   bpf_obj_new through bpf() is refused with the reason"
else
    echo "FAIL bpf_obj_new refusal"; tail -20 "$WORK/rb.out"; fails=$((fails + 1))
fi

# ---- the libbpf program ----------------------------------------------------
"$WORK/cp_demo" "$WORK/xdp_count.o" > "$WORK/kernel.cp" 2>/dev/null
jx "$WORK/cp_demo" "$WORK/xdp_count.o" > "$WORK/bpfjet.cp" 2> "$WORK/bpfjet.cp.err"
if diff -u "$WORK/kernel.cp" "$WORK/bpfjet.cp"; then
    echo "ok   cp_demo prints the same $(wc -l < "$WORK/kernel.cp") lines against the kernel and under bpfjet exec"
else
    echo "FAIL cp_demo differs"; fails=$((fails + 1))
fi
grep -q "BPF_MAP_CREATE of map type 1000 is not served" "$WORK/bpfjet.cp.err" \
    && echo "ok   unserved command named on stderr" \
    || { echo "FAIL no stderr line for the unserved map type"; cat "$WORK/bpfjet.cp.err"; fails=$((fails + 1)); }

[ $fails = 0 ] && echo "control planes: all passed" || { echo "control planes: $fails failed"; exit 1; }
