#!/usr/bin/env bash
# `make demo`: the Katran-class load balancer from the NF corpus, verified by
# bpfjet, then run packet by packet in bpfjet and in the kernel side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
BPFJET=target/release/bpfjet
OBJ=build/examples/xdp/katran_lb.o
FIX=examples/xdp/fixtures/katran_lb
STATE=build/examples/xdp/fixtures/katran_lb/state.json

echo "== bpfjet verify $OBJ"
$BPFJET verify "$OBJ"
echo

kernel=yes
if ! $BPFJET test-run "$OBJ" --data "$FIX/non_vip_udp.pkt.hex" --engine kernel >/dev/null 2>&1; then
  kernel=no
  echo "(kernel side skipped: BPF_PROG_TEST_RUN needs root)"
fi

printf '%-22s %-8s %-8s %s\n' "packet" "bpfjet" "kernel" "same bytes out"
for case in vip4_tcp_syn vip4_udp vip6_tcp_syn vip4_any_port_v6_real non_vip_udp truncated_tcp; do
  pkt="$FIX/$case.pkt.hex"
  ours=$($BPFJET test-run "$OBJ" --data "$pkt" --maps "$STATE" --cpu 0 --json)
  a=$(echo "$ours" | python3 -c 'import json,sys; print(json.load(sys.stdin)["action"])')
  if [ $kernel = yes ]; then
    theirs=$($BPFJET test-run "$OBJ" --data "$pkt" --maps "$STATE" --cpu 0 --json --engine kernel)
    k=$(echo "$theirs" | python3 -c 'import json,sys; print(json.load(sys.stdin)["action"])')
    same=$(python3 -c 'import json,sys; a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2]); print("yes" if a["data_out"]==b["data_out"] else "NO")' "$ours" "$theirs")
  else
    k="-"; same="-"
  fi
  printf '%-22s %-8s %-8s %s\n' "$case" "$a" "$k" "$same"
done

echo
GEN="proto=tcp,ip=4,flows=10000,dist=zipf:1.1,dst=10.200.1.1:80,count=300000,seed=7"
echo "== bpfjet run $OBJ --gen $GEN, per engine"
printf '%-8s %10s %14s %9s %9s %9s %9s\n' engine Mpps "Mpps/core" TX DROP PASS ABORTED
for engine in interp jit; do
  $BPFJET run "$OBJ" --engine $engine --maps "$STATE" --gen "$GEN" --name "demo-$engine" --force --json 2>/dev/null |
    python3 -c '
import json, sys
s = json.loads(sys.stdin.read().strip().splitlines()[-1])
a = s["actions"]
print("%-8s %10.3f %14.3f %9d %9d %9d %9d" % (s["engine"], s["mpps"], s["mpps_per_core"],
      a["TX"], a["DROP"], a["PASS"], a["ABORTED"]))'
done
echo
echo "== top flows and backends (jit, --top 5: Katran encapsulates IP-in-IP towards the backend it picked)"
$BPFJET run "$OBJ" --engine jit --maps "$STATE" --gen "$GEN" --name demo-top --force --top 5 2>/dev/null |
  sed -n '/top 5 flows/,/^  maps published/p' | grep -v '^  maps published'
