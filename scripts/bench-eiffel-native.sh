#!/bin/sh
# The Eiffel NF (examples/nf/eiffel.c, steady-verdict build) compiled as
# native x86-64 code by clang -O2 -march=native, run the way `bpfjet bench`
# runs a program (fresh 54-byte packet per run), next to `bpfjet bench` of
# the same source's BPF builds on the kernel JIT and bpfjet's JIT: where
# bpfjet's JIT stands against native code, the ceiling of any JIT.
#
# The native build is the NF's C source with scripts/native/shim.h for the
# kernel headers and its ARRAY/PERCPU_ARRAY lookups turned into direct
# indexing of static arrays (one CPU slot), as the JIT inlines them; the
# kfunc build's bpfjet_ctz64 is __builtin_ctzll.
#
#   scripts/bench-eiffel-native.sh [ITERS [ROUNDS]]     (root for the kernel rows)
set -eu
ITERS=${1:-5000000}
ROUNDS=${2:-7}
BPFJET=${BPFJET:-target/release/bpfjet}
D=build/examples/nf
N=build/native-eiffel
mkdir -p "$N"
make -s -C examples nf bench
python3 examples/tools/gen_nf_bench.py "$D/bench" >/dev/null
python3 - examples/nf/eiffel.c examples/nf/nf.h "$N/eiffel_native.c" <<'PY'
import re, sys
src, nfh, out = sys.argv[1:4]
s = open(src).read()
h = open(nfh).read()
# nf.h's flow key and parser, without its kernel includes.
key = re.search(r"struct flow_key \{.*?\} __attribute__\(\(packed\)\);", h, re.S).group(0)
parse = re.search(r"static __always_inline int parse_flow\(.*?\n\}\n", h, re.S).group(0)
s = re.sub(r'#include "nf.h"\n#ifdef USE_KFUNCS\n#include [^\n]*\n#endif\n',
           '#include "shim.h"\n' + key + "\n" + parse, s)
# Each map: its values as a static array; lookups index it.
s = re.sub(r'\} (\w+) SEC\("\.maps"\);',
           r'} \1; static typeof(*\1.value) \1_values[sizeof(*\1.max_entries) / sizeof(int)];', s)
s = re.sub(r'bpf_map_lookup_elem\(&(\w+), &(\w+)\)',
           r'((\2) < sizeof(\1_values) / sizeof(\1_values[0]) ? &\1_values[\2] : (void *)0)', s)
s += "\nint nf_entry(struct xdp_md *ctx) { return eiffel(ctx); }\n"
open(out, "w").write(s)
PY
echo "| levels | kernel JIT, plain | bpfjet JIT, plain | native, plain | bpfjet JIT, kfunc | native, kfunc | bpfjet kfunc / native kfunc | kfunc goal (kernel / 1.75) |"
echo "|---|---|---|---|---|---|---|---|"
for l in 64 1024 4096 65536; do
    for b in plain kfunc; do
        kf=""
        [ "$b" = kfunc ] && kf=-DUSE_KFUNCS
        clang-19 -O2 -march=native -Wno-macro-redefined -I scripts/native -DNPRIO=$l -DSTEADY_VERDICT $kf \
            -o "$N/eiffel_$b$l" "$N/eiffel_native.c" scripts/native/harness.c
    done
    np=$("$N/eiffel_plain$l" "$ITERS" "$ROUNDS" | awk '{ print $3 }')
    nk=$("$N/eiffel_kfunc$l" "$ITERS" "$ROUNDS" | awk '{ print $3 }')
    # One bench run: the kernel and bpfjet on the plain build, bpfjet on
    # the kfunc build (the kernel cannot load bpfjet's kfuncs).
    "$BPFJET" bench "$D/eiffel_steady_l${l}_plain.o" --data "$D/bench/flow.bin" \
        --engines kernel,jit --versus "$D/eiffel_steady_l${l}_kfunc.o" --rounds "$ROUNDS" --json 2>/dev/null |
        NP=$np NK=$nk L=$l python3 -c '
import json, os, sys
e = json.load(sys.stdin)["engines"]
np_, nk = float(os.environ["NP"]), float(os.environ["NK"])
k, p = e["kernel"]["net_ns"], e["jit"]["net_ns"]
kf = [v["net_ns"] for n, v in e.items() if n.startswith("jit:")][0]
print("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.1f |" % (os.environ["L"], k, p, np_, kf, nk, kf / nk, k / 1.75))
'
done
