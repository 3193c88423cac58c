#!/usr/bin/env python3
"""Packets and map states for benchmarking the NF library examples
(examples/nf): one UDP flow's frame, and cuckoo flow tables filled to a load
factor with that flow's signature placed so that a lookup scans a known
number of slots.

  gen_nf_bench.py OUTDIR

writes OUTDIR/flow.bin (the frame) and OUTDIR/cuckoo_load{50,95}.json:
  load 50: every bucket half full, the flow in slot 7 of its first bucket;
  load 95: every bucket 15-16 slots full, the flow's two buckets full and the
           flow in the last slot of its second bucket (a lookup scans 32 slots).
and OUTDIR/skiplist_get_k{N}.bin: a GET request to the skip-list store
(examples/nf/skiplist.c, UDP port 9000) for key 2 * (N / 3), present in the
store its -DPREFILL=N build fills (keys 0, 2, ..., 2(N - 1)).
and OUTDIR/cuckoofilter_s{8,16}_load{50,95}.json, the same for the cuckoo
filter (examples/nf/cuckoofilter.c: 1024 buckets of 8 or 16 fingerprints).
and OUTDIR/tss_t{4,16,64}.json: rule sets for the tuple-space-search
classifier (examples/nf/tss.c) with that many tuples in use, each with 16
rules for other traffic; every fourth tuple also has a rule for the flow's
masked key, the one of highest priority (the last) passing it, the others
dropping it: a packet of the flow probes every tuple and finds N/4 rules.
"""
import json
import os
import random
import sys

NBUCKETS = 64
SLOTS = 16
SEED = 0x9E3779B9


def crc32c(data, c):
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    return c


def frame():
    f = bytearray(54)
    f[12:14] = b"\x08\x00"
    ip = f[14:34]
    ip[0] = 0x45
    ip[3] = 40
    ip[8] = 64
    ip[9] = 17
    ip[12:16] = bytes([10, 0, 0, 3])
    ip[16:20] = bytes([192, 168, 1, 3])
    f[14:34] = ip
    f[34:36] = (1027).to_bytes(2, "big")
    f[36:38] = (83).to_bytes(2, "big")
    return bytes(f)


def flow_key(f):
    # struct flow_key: saddr, daddr, sport, dport as in the packet, proto.
    return f[26:30] + f[30:34] + f[34:36] + f[36:38] + f[23:24]


def bucket_value(sigs, counts):
    b = b"".join(s.to_bytes(2, "little") for s in sigs)
    b += b"".join(c.to_bytes(4, "little") for c in counts)
    return b.hex()


def cuckoo_state(load, f, rng):
    h = crc32c(flow_key(f), SEED)
    sig = (h >> 16) | 1
    b1 = h % NBUCKETS
    b2 = (h ^ ((sig * 0x5BD1E995) & 0xFFFFFFFF)) % NBUCKETS
    entries = []
    for i in range(NBUCKETS):
        used = round(SLOTS * load) if load < 0.9 else rng.choice([15, 16, 16, 15, 16])
        if load >= 0.9 and i in (b1, b2):
            used = SLOTS
        sigs = []
        for s in range(SLOTS):
            if s < used:
                v = sig
                while v == sig:
                    v = rng.randrange(1, 0x10000) | 1
                sigs.append(v)
            else:
                sigs.append(0)
        if load >= 0.9 and i == b2:
            sigs[SLOTS - 1] = sig
        elif load < 0.9 and i == b1:
            sigs[7] = sig
        counts = [1 if s else 0 for s in sigs]
        entries.append({"key": i.to_bytes(4, "little").hex(), "value": bucket_value(sigs, counts)})
    return {"buckets": entries}


SKIPLIST_KEYS = (1024, 4096, 16384)


def skiplist_request(op, key, value=0):
    f = bytearray(66)
    f[0:6] = bytes([2, 0, 0, 0, 0, 2])
    f[6:12] = bytes([2, 0, 0, 0, 0, 1])
    f[12:14] = b"\x08\x00"
    f[14:34] = bytes([0x45, 0, 0, 52, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2])
    f[34:42] = (4321).to_bytes(2, "big") + (9000).to_bytes(2, "big") + (32).to_bytes(2, "big") + b"\0\0"
    f[42] = op
    f[50:58] = key.to_bytes(8, "little")
    f[58:66] = value.to_bytes(8, "little")
    return bytes(f)


CF_NBUCKETS = 1024
CF_SEED = 0x85EBCA6B


def cuckoofilter_state(load, slots, f, rng):
    h = crc32c(flow_key(f), CF_SEED)
    fp = (h >> 16) or 1
    b1 = h % CF_NBUCKETS
    b2 = (b1 ^ (((fp * 0x5BD1E995) & 0xFFFFFFFF) >> 16)) % CF_NBUCKETS
    entries = []
    for i in range(CF_NBUCKETS):
        if load >= 0.9:
            used = slots if i in (b1, b2) else rng.choice([slots - 1, slots])
        else:
            used = round(slots * load)
        fps = []
        for s in range(slots):
            v = 0
            while s < used and v in (0, fp):
                v = rng.randrange(1, 0x10000)
            fps.append(v)
        if load >= 0.9 and i == b2:
            fps[slots - 1] = fp
        elif load < 0.9 and i == b1:
            fps[slots // 2 - 1] = fp
        value = b"".join(v.to_bytes(2, "little") for v in fps)
        entries.append({"key": i.to_bytes(4, "little").hex(), "value": value.hex()})
    return {"buckets": entries}


TSS_TUPLES = (4, 16, 64)
TSS_NBUCKETS = 64
TSS_SLOTS = 8


def tss_key(f):
    # struct tss_key: saddr, daddr, sport, dport as in the packet, proto, 3 zero bytes.
    return f[26:30] + f[30:34] + f[34:36] + f[36:38] + f[23:24] + bytes(3)


def tss_mask(i):
    # The enumeration crates/cli/tests/nf_tss/mod.rs uses.
    def prefix(bits):
        return ((0xFFFFFFFF << (32 - bits)) & 0xFFFFFFFF).to_bytes(4, "big")

    m = prefix([32, 24, 16, 0, 8][i % 5]) + prefix([32, 0, 24, 16][(i // 5) % 4])
    m += b"\xff\xff" if (i // 20) % 2 == 0 else b"\0\0"
    m += b"\xff\xff" if (i // 40) % 2 == 0 else b"\0\0"
    m += b"\xff" if (i // 80) % 2 == 0 else b"\0"
    return m + bytes(3)


def tss_state(n, f, rng):
    masks = [tss_mask(t * 7 % 160) for t in range(n)]
    flow = tss_key(f)
    tables = [dict() for _ in range(n)]  # masked key -> (rule id, priority)
    rules = []  # (action, ifindex)
    winners = [t for t in range(n) if t % 4 == 1] or [0]
    for t in range(n):
        mk = bytes(a & b for a, b in zip(flow, masks[t]))
        for _ in range(16):
            k = bytes([172, 16 + rng.randrange(16), 0, 1]) + rng.randbytes(8) + b"\x11" + bytes(3)
            k = bytes(a & b for a, b in zip(k, masks[t]))
            if k == mk or k in tables[t]:
                continue
            if sum(1 for x in tables[t] if crc32c(x, SEED) % TSS_NBUCKETS == crc32c(k, SEED) % TSS_NBUCKETS) >= TSS_SLOTS - 1:
                continue
            tables[t][k] = (len(rules), rng.randrange(1, 100))
            rules.append((1, 1))
        if t in winners:
            tables[t][mk] = (len(rules), 100 + t)
            rules.append((2 if t == winners[-1] else 1, 1))
    tuples = b"".join(masks) + n.to_bytes(4, "little")
    entries = []
    for t, table in enumerate(tables):
        buckets = {}
        for k, (rid, prio) in sorted(table.items(), key=lambda kv: kv[1][0]):
            h = crc32c(k, SEED)
            b = buckets.setdefault(h % TSS_NBUCKETS, ([0] * TSS_SLOTS, [bytes(24)] * TSS_SLOTS))
            s = b[0].index(0)
            b[0][s] = (h >> 16) | 1
            b[1][s] = k + rid.to_bytes(4, "little") + prio.to_bytes(4, "little")
        for i, (sigs, slots) in sorted(buckets.items()):
            value = b"".join(x.to_bytes(2, "little") for x in sigs) + b"".join(slots)
            entries.append({"key": (t * TSS_NBUCKETS + i).to_bytes(4, "little").hex(), "value": value.hex()})
    return {
        "tuples": [{"key": "00000000", "value": tuples.hex()}],
        "tables": entries,
        "rules": [
            {"key": i.to_bytes(4, "little").hex(), "value": (a.to_bytes(4, "little") + x.to_bytes(4, "little")).hex()}
            for i, (a, x) in enumerate(rules)
        ],
    }


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    f = frame()
    with open(os.path.join(out, "flow.bin"), "wb") as w:
        w.write(f)
    rng = random.Random(42)
    for load in (50, 95):
        with open(os.path.join(out, f"cuckoo_load{load}.json"), "w") as w:
            json.dump(cuckoo_state(load / 100, f, rng), w)
    for n in SKIPLIST_KEYS:
        with open(os.path.join(out, f"skiplist_get_k{n}.bin"), "wb") as w:
            w.write(skiplist_request(2, 2 * (n // 3)))
    for slots in (8, 16):
        for load in (50, 95):
            name = f"cuckoofilter_s{slots}_load{load}.json"
            with open(os.path.join(out, name), "w") as w:
                json.dump(cuckoofilter_state(load / 100, slots, f, rng), w)
    for n in TSS_TUPLES:
        with open(os.path.join(out, f"tss_t{n}.json"), "w") as w:
            json.dump(tss_state(n, f, rng), w)


if __name__ == "__main__":
    main()
