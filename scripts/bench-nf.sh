#!/bin/sh
# The NF library benchmark sweep (docs/PERFORMANCE.md, "NF library"): for
# each point, ONE `bpfjet bench` run interleaves the kernel JIT on the plain
# build, bpfjet's JIT on the plain build and bpfjet's JIT on the kfunc build
# (--versus), same packet and map state, fresh packets. NitroSketch runs its
# no-heavy-hitter build and Eiffel its steady-verdict build: with the one
# benchmark flow they do the same work per packet as the tested builds but
# their verdict does not depend on how many runs an engine made.
#
# The TSS classifier runs with the rule set a control plane installed
# (gen_nf_bench.py's tss_t{4,16,64}.json: the packet probes every tuple).
#
# The skip-list store has no plain build: its table compares the kernel JIT
# and bpfjet's JIT running the same store on the kernel's rbtree kfuncs
# (skiplist_rbtree.c) with bpfjet's JIT running the skip list on node
# memory, all filled with the same keys, answering the same GET request.
# A second table runs the same store on eNetSTL's node-pointer kfuncs
# (skiplist_enetstl.c: container in a __kptr, BTF-typed node reads) against
# the kernel's rbtree in the same rounds.
#
#   scripts/bench-nf.sh [extra bench args]      (root, release build)
#   ONLY=HeavyKeeper scripts/bench-nf.sh        (only rows whose label contains it;
#                                                skip-list rows are "skip-list N")
set -eu
BPFJET=${BPFJET:-target/release/bpfjet}
D=build/examples/nf
make -s -C examples nf bench
python3 examples/tools/gen_nf_bench.py "$D/bench"

point() {
    label=$1 plain=$2 kfunc=$3
    shift 3
    case "$label" in *"${ONLY:-}"*) ;; *) return 0 ;; esac
    "$BPFJET" bench "$D/$plain.o" --data "$D/bench/flow.bin" --engines kernel,jit \
        --versus "$D/$kfunc.o" --json "$@" | LABEL="$label" KF="jit:$kfunc" python3 -c '
import json, os, sys
d = json.load(sys.stdin)
e, r = d["engines"], d["net_ratio_vs_kernel"]
kf = os.environ["KF"]
acts = {n: e[n]["action"] for n in e}
assert len(set(acts.values())) == 1, acts
print("| %s | %.1f | %.1f | %.1f | %.2fx | %.2fx | %.2fx |" % (
    os.environ["LABEL"], e["kernel"]["net_ns"], e["jit"]["net_ns"], e[kf]["net_ns"],
    r["jit"], r[kf], e["jit"]["net_ns"] / e[kf]["net_ns"]))
'
}

echo "| NF | kernel net ns | bpfjet plain net ns | bpfjet kfunc net ns | plain x kernel | kfunc x kernel | kfunc x plain (bpfjet) |"
echo "|---|---|---|---|---|---|---|"
for h in 1 2 4 8; do
    point "count-min, $h hashes" "countmin_h${h}_plain" "countmin_h${h}_kfunc" "$@"
done
for l in 50 95; do
    point "cuckoo, load $l%" cuckoo_plain cuckoo_kfunc --maps "$D/bench/cuckoo_load$l.json" "$@"
done
for p in 4 16 64; do
    point "NitroSketch, p = 1/$p" "nitro_nohh_p${p}_plain" "nitro_nohh_p${p}_kfunc" "$@"
done
for l in 64 1024 4096 65536; do
    point "Eiffel cFFS, $l levels" "eiffel_steady_l${l}_plain" "eiffel_steady_l${l}_kfunc" "$@"
done
for r in 1 2 4; do
    point "HeavyKeeper top-16, $r rows" "heavykeeper_r${r}_plain" "heavykeeper_r${r}_kfunc" "$@"
done
for s in 8 16; do
    for l in 50 95; do
        point "cuckoo filter, $s slots, load $l%" "cuckoofilter_s${s}_plain" "cuckoofilter_s${s}_kfunc" \
            --maps "$D/bench/cuckoofilter_s${s}_load$l.json" "$@"
    done
done
for k in 2 4 8; do
    point "VI Bloom filter, $k hashes" "vibloom_k${k}_plain" "vibloom_k${k}_kfunc" "$@"
done
for w in 64 128 256; do
    point "Carousel wheel, $w fine slots" "carousel_steady_w${w}_plain" "carousel_steady_w${w}_kfunc" "$@"
done
for n in 4 8 16 32; do
    point "EDF load balancer, $n backends" "edflb_b${n}_plain" "edflb_b${n}_kfunc" "$@"
done
for t in 4 16 64; do
    point "TSS classifier, $t tuples" "tss_t${t}_plain" "tss_t${t}_kfunc" --maps "$D/bench/tss_t$t.json" "$@"
done

echo
echo "| skip-list store, keys | kernel rbtree net ns | bpfjet rbtree (JIT) net ns | bpfjet skip list (node kfuncs) net ns | rbtree: bpfjet x kernel | skip list x kernel rbtree |"
echo "|---|---|---|---|---|---|"
for k in 1024 4096 16384; do
    case "skip-list $k" in *"${ONLY:-}"*) ;; *) continue ;; esac
    "$BPFJET" bench "$D/skiplist_rbtree_k$k.o" --data "$D/bench/skiplist_get_k$k.bin" --engines kernel,jit \
        --versus "$D/skiplist_k${k}_kfunc.o" --json "$@" | LABEL="$k" KF="jit:skiplist_k${k}_kfunc" python3 -c '
import json, os, sys
d = json.load(sys.stdin)
e = d["engines"]
kf = os.environ["KF"]
acts = {n: e[n]["action"] for n in e}
assert len(set(acts.values())) == 1, acts
print("| %s | %.1f | %.1f | %.1f | %.2fx | %.2fx |" % (
    os.environ["LABEL"], e["kernel"]["net_ns"], e["jit"]["net_ns"], e[kf]["net_ns"],
    e["kernel"]["net_ns"] / e["jit"]["net_ns"], e["kernel"]["net_ns"] / e[kf]["net_ns"]))
'
done

echo
echo "| skip-list store, keys | kernel rbtree net ns | bpfjet skip list (eNetSTL ptr_* kfuncs, JIT) net ns | eNetSTL skip list x kernel rbtree |"
echo "|---|---|---|---|"
for k in 1024 4096 16384; do
    case "skip-list $k" in *"${ONLY:-}"*) ;; *) continue ;; esac
    "$BPFJET" bench "$D/skiplist_rbtree_k$k.o" --data "$D/bench/skiplist_get_k$k.bin" --engines kernel \
        --versus "$D/skiplist_enetstl_k$k.o" --json "$@" | LABEL="$k" KF="jit:skiplist_enetstl_k$k" python3 -c '
import json, os, sys
d = json.load(sys.stdin)
e = d["engines"]
kf = os.environ["KF"]
acts = {n: e[n]["action"] for n in e}
assert len(set(acts.values())) == 1, acts
print("| %s | %.1f | %.1f | %.2fx |" % (
    os.environ["LABEL"], e["kernel"]["net_ns"], e[kf]["net_ns"],
    e["kernel"]["net_ns"] / e[kf]["net_ns"]))
'
done
