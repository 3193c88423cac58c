#!/usr/bin/env bash
# What bpfjet leaves to the kernel under `bpfjet exec`, against the kernel
# (crates/server/src/kernel_objects.rs):
#
#  1. Debian's `bpftool feature probe`, unmodified: under bpfjet exec it
#     must find the program types and map types the kernel has (those bpfjet
#     does not run or hold go to the kernel), the same system and misc
#     features, the kernel's helper lists for program types the kernel
#     runs, and for the types bpfjet runs (xdp, kprobe, tracepoint,
#     raw_tracepoint, perf_event) only helpers the kernel offers too.
#  2. tests/preload/kernel_objects.bpf.c loaded whole by `bpftool prog
#     loadall` (XDP for bpfjet; tc and cgroup_skb for the kernel, with the
#     object's BTF, and an SK_STORAGE map the kernel creates): the same
#     program and map types as on the kernel, and test runs of the XDP and
#     tc programs with the kernel's return values.
#     The tc program's own maps (a HASH map, .bss, .rodata) move to the
#     kernel at its load.
#  3. tests/preload/kernel_objects.c (libbpf) loads the object (with a map
#     libbpf pins by name at creation), test-runs the tc program and reads
#     its maps, the pinned one through its pin; then loads a tc program
#     naming a per-CPU array and a hash map written before its load (their
#     elements must move with them); then maps an mmapable array, writes
#     through the mapping, loads a tc program counting in it and reads the
#     count through the mapping: the same lines against the kernel and
#     under bpfjet exec (the move copies the array and maps the kernel's
#     values where the loader has them).
#  4. The same object with the tc program reading the XDP program's map:
#     the kernel loads it, bpfjet refuses it (EINVAL) naming the map.
#  5. Listings under exec (`bpftool prog show`, `map show`) name the kernel
#     objects the instance's processes made next to bpfjet's, and a
#     struct_ops TCP congestion control (tests/preload/struct_ops_cc.bpf.c)
#     registered by `bpftool struct_ops register` under exec is in the
#     kernel, listed by `struct_ops list` and unregistered by name from
#     other processes of the instance, as on the kernel.
#
# Needs root, bpftool, clang-19, cc, libbpf-dev, python3.
# Usage: BPFJET=target/release/bpfjet tests/preload/kernel_objects.sh
set -euo pipefail
. "$(dirname "$0")/lib.sh"
preload_setup kobj bpftool clang-19 cc python3
fails=0
CHECK_LABELS="kernel bpfjet"

# (libbpf turns dots of map pin paths into underscores: no dot in MNT.)
MNT=$(mktemp -d /tmp/bjkoXXXXXX)
mount -t bpf bpf "$MNT"
trap 'umount "$MNT" 2>/dev/null || true; rmdir "$MNT"; preload_cleanup' EXIT
X() { "$BPFJET" exec --instance "$INST" -- "$@"; }

# 1. Feature probe.
bpftool -j feature probe > "$WORK/probe.kernel"
X bpftool -j feature probe > "$WORK/probe.bpfjet" 2> "$WORK/probe.err"
python3 - "$WORK/probe.kernel" "$WORK/probe.bpfjet" > "$WORK/probe.cmp" <<'PY'
import json, sys
k, b = (json.load(open(f)) for f in sys.argv[1:3])
for sec in ("system_config", "syscall_config", "program_types", "map_types", "misc"):
    diff = sorted(x for x in set(k[sec]) | set(b[sec]) if k[sec].get(x) != b[sec].get(x))
    print(sec, len(k[sec]), "differ:", diff)
bpfjet_runs = {"xdp", "kprobe", "tracepoint", "raw_tracepoint", "perf_event"}
for key in sorted(k["helpers"]):
    t = key[: -len("_available_helpers")]
    ks, bs = set(k["helpers"][key]), set(b["helpers"].get(key, []))
    if t in bpfjet_runs:
        print(key, "bpfjet offers", "none" if not bs else "some", "not in the kernel's:", sorted(bs - ks))
    else:
        print(key, "equal" if ks == bs else "differ: %s" % sorted(ks ^ bs))
PY
while read -r line; do
    check "feature probe: ${line%% *}" "${line#* }" "$(grep -F -- "${line%% *} " "$WORK/probe.cmp" | head -1 | cut -d' ' -f2-)"
done < <(python3 - "$WORK/probe.kernel" <<'PY'
import json, sys
k = json.load(open(sys.argv[1]))
for sec in ("system_config", "syscall_config", "program_types", "map_types", "misc"):
    print(sec, len(k[sec]), "differ: []")
for key in sorted(k["helpers"]):
    t = key[: -len("_available_helpers")]
    if t in {"xdp", "kprobe", "tracepoint", "raw_tracepoint", "perf_event"}:
        print(key, "bpfjet offers some not in the kernel's: []")
    else:
        print(key, "equal")
PY
)

# 2. One object, two runtimes.
CFLAGS=(-O2 -g -target bpf -I/usr/include/x86_64-linux-gnu)
clang-19 "${CFLAGS[@]}" -c "$ROOT/tests/preload/kernel_objects.bpf.c" -o "$WORK/ko.o"
clang-19 "${CFLAGS[@]}" -DPINNED_MAP -c "$ROOT/tests/preload/kernel_objects.bpf.c" -o "$WORK/ko_pin.o"
clang-19 "${CFLAGS[@]}" -DSHARE_BPFJET_MAP -c "$ROOT/tests/preload/kernel_objects.bpf.c" -o "$WORK/ko_share.o"
python3 -c '
import sys
eth = bytes(6) + bytes.fromhex("020000000001") + b"\x08\x00"
for name, n in (("short", 64), ("long", 1200)):
    open(sys.argv[1] + "/" + name + ".pkt", "wb").write(eth + bytes(n - 14))
' "$WORK"

# side LABEL RUN...: load the object in a bpffs directory of its own and
# describe what was made and what test runs return, with RUN as prefix.
side() {
    local d=$MNT/$1
    shift
    mkdir -p "$d"
    "$@" bpftool prog loadall "$WORK/ko.o" "$d/p" pinmaps "$d/m" >/dev/null
    "$@" bash -c '
        d=$1 w=$2
        for p in count_frames drop_long sock_bytes; do
            echo "$p: $(bpftool -j prog show pinned "$d/p/$p" | python3 -c "import json,sys; print(json.load(sys.stdin)[\"type\"])")"
        done
        for m in frames tc_verdicts sk_bytes; do
            echo "$m: $(bpftool -j map show pinned "$d/m/$m" | python3 -c "import json,sys; j=json.load(sys.stdin); print(j[\"type\"], j[\"flags\"], j[\"bytes_key\"], j[\"bytes_value\"])")"
        done
        for p in count_frames drop_long; do
            for pkt in short long; do
                echo "$p $pkt: $(bpftool prog run pinned "$d/p/$p" data_in "$w/$pkt.pkt" repeat 3 | grep -o "Return value: [0-9]*")"
            done
        done
        echo "tc_runs: $(bpftool -j map dump pinned "$d/m/ko_bss" | python3 -c "import json,sys; print(json.load(sys.stdin)[0][\"value\"])")"
        echo "long_frame: $(bpftool -j map dump pinned "$d/m/ko_rodata" | python3 -c "import json,sys; print(json.load(sys.stdin)[0][\"value\"])")"
        echo "tc_verdicts: $(bpftool -j map dump pinned "$d/m/tc_verdicts" | python3 -c "import json,sys; print(sorted((e[\"key\"], e[\"value\"]) for e in json.load(sys.stdin)))")"
        ' _ "$d" "$WORK"
}
side kernel > "$WORK/objects.kernel"
side bpfjet X > "$WORK/objects.bpfjet" 2> "$WORK/objects.err"
sed "s/^/  /" "$WORK/objects.kernel"
check "programs, maps and test runs of one object" "$(cat "$WORK/objects.kernel")" "$(cat "$WORK/objects.bpfjet")"
check "no libbpf warning under exec (.rodata bound to every program: the kernel programs get its kernel copy)" \
    "" "$(grep -i 'libbpf: .*failed' "$WORK/objects.err" || true)"
grep -q "BPF_MAP_CREATE of map type 24 goes to the kernel" "$WORK/objects.err" \
    && check "the SK_STORAGE map is said to be the kernel's" yes yes \
    || check "the SK_STORAGE map is said to be the kernel's" yes "no: $(cat "$WORK/objects.err")"

# 3. A libbpf loader, and global data mapped before the move.
cc -O1 -o "$WORK/kernel_objects" "$ROOT/tests/preload/kernel_objects.c" -lbpf
mkdir -p "$MNT/kpins" "$MNT/jpins"
"$WORK/kernel_objects" "$WORK/ko_pin.o" "$MNT/kpins" > "$WORK/loader.kernel"
X "$WORK/kernel_objects" "$WORK/ko_pin.o" "$MNT/jpins" > "$WORK/loader.bpfjet" 2> "$WORK/loader.err"
sed "s/^/  /" "$WORK/loader.kernel"
check "a libbpf loader's test runs, maps and mapped globals" "$(cat "$WORK/loader.kernel")" "$(cat "$WORK/loader.bpfjet")"

# 4. A kernel program naming a map a bpfjet program uses.
mkdir -p "$MNT/kshare" "$MNT/jshare"
k=$(bpftool prog loadall "$WORK/ko_share.o" "$MNT/kshare" >/dev/null 2>&1 && echo loaded || echo refused)
j=$(X bpftool prog loadall "$WORK/ko_share.o" "$MNT/jshare" > "$WORK/share.out" 2>&1 && echo loaded || echo refused)
check "a tc program reading an XDP program's map" "loaded" "$k"
check "  ... under bpfjet exec" "refused" "$j"
grep -q "map 'frames' (fd [0-9]*) is a bpfjet map; a program of type 3 runs in the kernel, and the map cannot move there: a program bpfjet runs uses it" "$WORK/share.out" \
    && check "  ... the refusal names the map" yes yes \
    || check "  ... the refusal names the map" yes "no: $(cat "$WORK/share.out")"

# 5. Listings and struct_ops.
# Under exec: each object of the instance once, by name and type; those the
# kernel holds (all but bpfjet's XDP program and its array) with the id,
# name and type the kernel's own listing gives them.
listing() {
    python3 - "$1" "$2" "$3" <<'PY'
import json, sys
exe, kern = (json.load(open(f)) for f in sys.argv[1:3])
names = sys.argv[3].split()
mine = sorted((o["name"], o["type"]) for o in exe if o.get("name") in names)
kernel = {(o["id"], o["name"], o["type"]) for o in kern}
held = [o for o in exe if o.get("name") in names and (o["id"], o["name"], o["type"]) in kernel]
print(" ".join("%s:%s" % m for m in mine), "| the kernel's:", " ".join(sorted(o["name"] for o in held)))
PY
}
X bpftool -j prog show > "$WORK/progs.bpfjet"; bpftool -j prog show > "$WORK/progs.kernel"
check "bpftool prog show under exec: the instance's programs, the kernel's with their kernel ids" \
    "count_frames:xdp drop_long:sched_cls sock_bytes:cgroup_skb | the kernel's: drop_long sock_bytes" \
    "$(listing "$WORK/progs.bpfjet" "$WORK/progs.kernel" "count_frames drop_long sock_bytes")"
X bpftool -j map show > "$WORK/maps.bpfjet"; bpftool -j map show > "$WORK/maps.kernel"
check "bpftool map show under exec: the instance's maps, the kernel's with their kernel ids" \
    "frames:array sk_bytes:sk_storage tc_verdicts:hash | the kernel's: sk_bytes tc_verdicts" \
    "$(listing "$WORK/maps.bpfjet" "$WORK/maps.kernel" "frames tc_verdicts sk_bytes")"
bpftool btf dump file /sys/kernel/btf/vmlinux format c > "$WORK/vmlinux.h"
clang-19 "${CFLAGS[@]}" -I"$WORK" -c "$ROOT/tests/preload/struct_ops_cc.bpf.c" -o "$WORK/cc.o"
cc_listed() { sysctl -n net.ipv4.tcp_available_congestion_control | tr ' ' '\n' | grep -cx bjcc || true; }
if bpftool struct_ops register "$WORK/cc.o" >/dev/null 2>&1; then
    k="$(cc_listed) $(bpftool struct_ops list | grep -c ' bjcc ')"
    bpftool struct_ops unregister name bjcc >/dev/null 2>&1
    k="$k $(cc_listed)"
    X bpftool struct_ops register "$WORK/cc.o" >/dev/null 2>&1 || true
    j="$(cc_listed) $(X bpftool struct_ops list | grep -c ' bjcc ')"
    X bpftool struct_ops unregister name bjcc >/dev/null 2>&1 || true
    j="$j $(cc_listed)"
    check "struct_ops register / list / unregister (registered, listed, after)" "$k" "$j"
    [ "$(cc_listed)" = 0 ] || bpftool struct_ops unregister name bjcc >/dev/null 2>&1 || true
else
    echo "SKIPPED: kernel_objects.sh: the kernel does not register a struct_ops TCP congestion control here" | tee -a "${BPFJET_SKIP_LOG:-/dev/null}"
fi

[ "$fails" = 0 ] && echo "kernel_objects.sh: all checks passed" || { echo "kernel_objects.sh: $fails failed"; exit 1; }
