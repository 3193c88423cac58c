#!/usr/bin/env bash
# Runs `bpfjet bench` on every corpus program (one representative fixture
# packet each) and on the microbenchmarks of examples/bench, then prints one
# table: raw and net ns/packet per engine, ratios to the kernel JIT with
# their spread, and the geometric mean over the corpus.
#
#   scripts/bench-all.sh                 # needs root (the kernel engine)
#   ROUNDS=11 scripts/bench-all.sh       # more rounds
#   BPFJET=path/to/bpfjet scripts/bench-all.sh
#   ENGINES=kernel,jit scripts/bench-all.sh
#
# JSON results are kept in build/bench-results/.
set -euo pipefail
cd "$(dirname "$0")/.."
BPFJET=${BPFJET:-target/release/bpfjet}
ROUNDS=${ROUNDS:-7}
ENGINES=${ENGINES:-kernel,interp,jit}
CPU=${CPU:-0}
OUT=build/bench-results
FIX=examples/xdp/fixtures
XDP=build/examples/xdp
MICRO=build/examples/bench

make -s -C examples all >/dev/null
mkdir -p "$OUT"

# Benchmark inputs: a 64-byte IPv4/UDP frame, and 256 entries in the
# lookup benchmarks' hash maps (the array is always full).
python3 - "$MICRO" <<'PY'
import json, sys
d = sys.argv[1]
eth = "02 00 00 00 00 02 02 00 00 00 00 01 08 00"
ip = "45 00 00 32 00 00 40 00 40 11 00 00 0a 00 00 01 0a 00 00 02"
udp = "04 d2 16 2e 00 1e 00 00"
payload = " ".join(["ab"] * 22)
open(f"{d}/pkt64.hex", "w").write(f"{eth}\n{ip}\n{udp}\n{payload}\n")
entries = [{"key": i.to_bytes(4, "little").hex(), "value": (i + 1).to_bytes(8, "little").hex()}
           for i in range(256)]
json.dump({"bench_array": entries, "bench_hash": entries, "bench_lru": entries},
          open(f"{d}/map_lookup.state.json", "w"))
PY

run() { # label obj prog packet state [extra args...]
    local label=$1 obj=$2 prog=$3 pkt=$4 state=$5
    shift 5
    local maps=()
    [[ -n $state ]] && maps=(--maps "$state")
    echo "bench $label" >&2
    "$BPFJET" bench "$obj" --prog "$prog" --data "$pkt" "${maps[@]}" \
        --engines "$ENGINES" --rounds "$ROUNDS" --cpu "$CPU" --json "$@" >"$OUT/$label.json"
}

corpus() { # program case
    local prog_file=$1 case=$2
    local cases=$FIX/$prog_file/cases.json
    local prog state
    prog=$(jq -r .prog "$cases")
    state=$(jq -r --arg c "$case" '.cases[] | select(.name == $c) | .state // ""' "$cases")
    case $state in
        build:*) state=build/examples/${state#build:} ;;
        "") ;;
        *) state=$FIX/$prog_file/$state ;;
    esac
    run "corpus.$prog_file" "$XDP/$prog_file.o" "$prog" "$FIX/$prog_file/$case.pkt.hex" "$state"
}

corpus katran_lb vip4_tcp_syn
corpus firewall clean_v4
corpus cms_sketch tcp4
corpus icmp_echo echo_request
corpus rate_limiter tokens_left
corpus ringbuf_sampler udp4
corpus router_tailcall v4_routed
corpus xdp_redirect known_mac_port0

P64=$MICRO/pkt64.hex
for p in array_lookup hash_lookup lru_lookup loop_only; do
    run "micro.$p" "$MICRO/map_lookup.o" "$p" "$P64" "$MICRO/map_lookup.state.json"
done
run micro.copy_1k "$MICRO/memcpy_1k.o" copy_1k "$P64" "" --native-memcpy 1024x100
run micro.pkt_sum "$MICRO/pkt_sum.o" pkt_sum "$P64" ""
for p in inlined bpf2bpf tail_entry; do
    run "micro.$p" "$MICRO/calls.o" "$p" "$P64" ""
done

python3 - "$OUT" <<'PY'
import json, math, os, sys
out = sys.argv[1]
rows = []
for name in sorted(os.listdir(out)):
    if name.endswith(".json"):
        rows.append((name[:-5], json.load(open(os.path.join(out, name)))))
engines = ["kernel", "interp", "jit", "native"]
def f(v, w=9, p=1):
    return f"{v:>{w}.{p}f}" if isinstance(v, (int, float)) else f"{'-':>{w}}"
print(f"{'benchmark':<22}" + "".join(f"{e + ' ns':>11}" for e in engines[:3])
      + f"{'jit net':>10}{'jit x':>8}{'net x':>8}{'jit spread':>20}")
geo, geo_net = [], []
for label, r in rows:
    e = r["engines"]
    cells = "".join(f(e.get(x, {}).get("ns_per_pkt"), 11) for x in engines[:3])
    jit = e.get("jit", {})
    ratio = r["ratio_vs_kernel"].get("jit")
    net = r["net_ratio_vs_kernel"].get("jit")
    spread = f"({jit.get('min', 0):.1f}..{jit.get('max', 0):.1f})" if jit else "-"
    print(f"{label:<22}{cells}{f(jit.get('net_ns'), 10)}{f(ratio, 8, 2)}{f(net, 8, 2)}{spread:>20}")
    if label.startswith("corpus.") and ratio and net:
        geo.append(math.log(ratio)); geo_net.append(math.log(net))
    if "native" in e:
        n = e["native"]["ns_per_pkt"]
        print(f"{'  native memcpy':<22}{f(n, 11)}   jit/native = {jit.get('ns_per_pkt', 0) / n:.2f}x")
if geo:
    print(f"corpus geometric mean: jit {math.exp(sum(geo) / len(geo)):.2f}x raw, "
          f"{math.exp(sum(geo_net) / len(geo_net)):.2f}x net vs kernel ({len(geo)} programs)")
PY
