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
JPIN=$BPFFS/bpfjet_cptest_jet_$$ # bpfjet records its pins in its run dir and leaves a placeholder file here
mount | grep -q "on $BPFFS type bpf" || mount -t bpf bpf "$BPFFS"
mkdir -p "$KPIN" "$JPIN"
cleanup() {
    rm -rf "$KPIN" "$JPIN" "$WORK"
    rm -f /dev/shm/bpfjet.$INST.*
}
trap cleanup EXIT

fails=0
. "$(dirname "$0")/lib.sh"
CHECK_LABELS="kernel bpfjet"
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
    # -f: bpftool walks bpffs for the files pinning each object.
    "${run[@]}" bpftool -j -f prog show pinned "$pin/p" | python3 -c '
import json,sys; print(sorted(p.split("/")[-1] for p in json.load(sys.stdin).get("pinned", [])))' > "$WORK/$side.pinned"
    (cd "$pin" && ls . maps) > "$WORK/$side.ls"
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
for f in lookup dump mapshow missing progshow nmaps pinned ls xlated_maps run counts; do
    check "bpftool $f" "$(cat "$WORK/kernel.$f")" "$(cat "$WORK/bpfjet.$f")"
done
# The kernel's own answer is what bpfjet is held to: it must not be empty.
check "bpftool -f (kernel) names the program's pin" "['p']" "$(cat "$WORK/kernel.pinned")"
check "bpftool btf dump (types of the map's BTF)" "$(cat "$WORK/kernel.btf")" "$(cat "$WORK/bpfjet.btf")"

# Served by bpfjet, not the kernel: the map is in bpfjet's instance. Its pin
# is a file on bpffs as the kernel's are (directory listings see it), and a
# process outside the instance opening it gets bpfjet's placeholder, not
# the map (crates/server/src/pin_files.rs).
# (grep reads all of the list: `grep -q` would close the pipe early and,
# under pipefail, the writer's SIGPIPE would fail the test.)
if "$BPFJET" map list --instance "$INST" | grep cp_m > /dev/null && [ -e "$JPIN/m" ] \
    && [ "$(bpftool -j map show pinned "$JPIN/m" | python3 -c 'import json,sys; print(json.load(sys.stdin)["name"])')" = bpfjet_pin ]; then
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
# kfunc's address, run by bpftool prog run on both sides; a spin lock in
# global data (crates/server/src/prog_btf.rs) taken in several bpftool
# processes in turn; a kfunc bpfjet does not provide is refused with its
# name in the verifier log, and bpf_obj_new with the reason.
bpf_cc() { # SOURCE OUT [clang args]
    local src=$1 out=$2
    shift 2
    clang-19 -O2 -g -target bpf -I "/usr/include/$(uname -m)-linux-gnu" "$@" -c "$src" -o "$out"
}
bpf_cc "$ROOT/tests/preload/kfunc_calls.bpf.c" "$WORK/kfunc_calls.o"
bpf_cc "$ROOT/tests/preload/kfunc_calls.bpf.c" "$WORK/kfunc_missing.o" -DMISSING
bpf_cc "$ROOT/tests/preload/datasec_lock.bpf.c" "$WORK/datasec_lock.o"
bpf_cc "$ROOT/tests/preload/global_funcs.bpf.c" "$WORK/global_funcs.o"
bpf_cc "$ROOT/tests/preload/global_funcs.bpf.c" "$WORK/global_unchecked.o" -DUNCHECKED
bpf_cc "$ROOT/examples/nf/skiplist_rbtree.c" "$WORK/skiplist_rbtree.o" -mcpu=v3
for len in 37 60 100; do head -c $len "$WORK/pkt" > "$WORK/kpkt$len"; done

# run_both NAME OBJECT MAP REPEAT WHAT: the object loaded by bpftool on the
# kernel and under bpfjet exec, run on three packets (one bpftool process
# each), then its map MAP dumped; both transcripts must be equal.
run_both() {
    local name=$1 obj=$2 map=$3 repeat=$4 what=$5 side run pin len
    for side in kernel bpfjet; do
        if [ $side = kernel ]; then run=(); pin=$KPIN; else run=(jx); pin=$JPIN; fi
        "${run[@]}" bpftool prog load "$obj" "$pin/$name" pinmaps "$pin/${name}maps"
        : > "$WORK/$side.$name"
        for len in 37 60 100; do
            "${run[@]}" bpftool prog run pinned "$pin/$name" data_in "$WORK/kpkt$len" repeat "$repeat" \
                | sed 's/duration.*//' >> "$WORK/$side.$name"
        done
        "${run[@]}" bpftool -j map dump pinned "$pin/${name}maps/$map" >> "$WORK/$side.$name"
    done
    check "$what" "$(cat "$WORK/kernel.$name")" "$(cat "$WORK/bpfjet.$name")"
}
run_both kf "$WORK/kfunc_calls.o" sum 2 "kernel kfuncs through bpf(): bpftool prog run and the map"
run_both dl "$WORK/datasec_lock.o" _data_L 3 "a bpf_spin_lock in .data.L through bpf(): runs and counters"
run_both gf "$WORK/global_funcs.o" seen 2 "global functions through bpf(): runs and the map"

# refused_by_bpfjet NAME OBJECT PATTERN WHAT: bpftool's load under bpfjet
# exec fails and its output (the verifier log) matches PATTERN.
refused_by_bpfjet() {
    if jx bpftool -d prog load "$2" "$JPIN/$1" > "$WORK/$1.out" 2>&1; then
        echo "FAIL $4: loaded"; fails=$((fails + 1))
    elif grep "$3" "$WORK/$1.out" > /dev/null; then
        echo "ok   $4"
    else
        echo "FAIL $4: the log does not say"; tail -20 "$WORK/$1.out"; fails=$((fails + 1))
    fi
}
refused_by_bpfjet kfm "$WORK/kfunc_missing.o" "bpf_xdp_ct_lookup" \
    "a kernel kfunc bpfjet lacks is refused by name"
if bpftool prog load "$WORK/global_unchecked.o" "$KPIN/gu" 2>/dev/null; then
    echo "FAIL the kernel loads a global function dereferencing a nullable argument"; fails=$((fails + 1))
fi
refused_by_bpfjet gu "$WORK/global_unchecked.o" "mem_or_null" \
    "a global function's body is verified from its prototype through bpf(), refused as by the kernel"
refused_by_bpfjet rb "$WORK/skiplist_rbtree.o" "bpf_obj_new_impl: the objects bpfjet allocates" \
    "bpf_obj_new through bpf() is refused with the reason"

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
