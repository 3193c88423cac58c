#!/usr/bin/env python3
"""Initial map contents (STATE.json, see shared DESIGN.md) for the XDP corpus.

    gen_state.py katran [--reals N] [--cpus N] [--ring-size 65537] --out FILE
    gen_state.py firewall|rate_limiter|router_tailcall|xdp_redirect|... --out FILE

The katran state holds full Maglev rings (65537 slots per VIP), so it is written
at build time (examples/Makefile) instead of being checked in. The others are
small and live in examples/xdp/fixtures/<name>/state.json (written by
gen_fixtures.py from the builders below). Standard library only.

Byte layouts mirror the C structs: host-order integers are little-endian
(x86-64 / arm64), addresses and ports are in network order.
"""
import argparse
import hashlib
import ipaddress
import json
import struct
import sys

# ---- encoding helpers -------------------------------------------------------


def hx(data):
    """Hex in 4-byte groups, like the examples in DESIGN.md."""
    h = data.hex()
    return " ".join(h[i:i + 8] for i in range(0, len(h), 8))


def u32(v):
    return struct.pack("<I", v)


def u64(v):
    return struct.pack("<Q", v)


def ip4(s):
    return ipaddress.IPv4Address(s).packed


def ip6(s):
    return ipaddress.IPv6Address(s).packed


def ip16(s):
    """An address in a 16-byte slot: IPv4 first, zero padded (Katran's layout)."""
    a = ipaddress.ip_address(s)
    return a.packed + bytes(16 - len(a.packed))


def mac(s):
    return bytes(int(x, 16) for x in s.split(":"))


def entry(key, value):
    return {"key": hx(key), "value": hx(value)}


# ---- katran_lb ---------------------------------------------------------------

KATRAN_RING_SIZE = 65537  # must equal `ring_size` in katran_lb.c's .rodata
KATRAN_MAX_VIPS = 32
F_HASH_NO_SRC_PORT = 1 << 0
F_REAL_IPV6 = 1 << 0
GW_MAC = "02:00:00:00:00:fe"
LB_MAC = "02:00:00:00:00:01"
IPPROTO_TCP, IPPROTO_UDP = 6, 17

# (address, port, proto, flags, real family)
KATRAN_VIPS = [
    ("10.200.1.1", 80, IPPROTO_TCP, 0, 4),
    ("10.200.1.2", 443, IPPROTO_UDP, F_HASH_NO_SRC_PORT, 4),
    ("fc00:200::1", 80, IPPROTO_TCP, 0, 6),
    ("10.200.1.3", 0, IPPROTO_TCP, 0, 6),  # any port, IPv4 in IPv6 to v6 reals
]


def maglev_ring(names, size):
    """Maglev lookup table (Eisenbud et al., NSDI'16): each backend walks its own
    permutation of the slots and claims the next free one, round robin."""
    perms = []
    for name in names:
        d = hashlib.sha256(name.encode()).digest()
        offset = int.from_bytes(d[0:8], "little") % size
        skip = int.from_bytes(d[8:16], "little") % (size - 1) + 1
        perms.append((offset, skip))
    ring = [-1] * size
    nxt = [0] * len(names)
    filled = 0
    while filled < size:
        for i, (offset, skip) in enumerate(perms):
            c = (offset + nxt[i] * skip) % size
            while ring[c] >= 0:
                nxt[i] += 1
                c = (offset + nxt[i] * skip) % size
            ring[c] = i
            nxt[i] += 1
            filled += 1
            if filled == size:
                break
    return ring


def katran_state(n_reals=8, cpus=2, ring_size=KATRAN_RING_SIZE, lru_size=1000):
    reals_v4 = ["10.0.1.%d" % (i + 1) for i in range(n_reals)]
    reals_v6 = ["fc00:1::%x" % (i + 1) for i in range(n_reals)]
    reals = []
    for i, a in enumerate(reals_v4):
        reals.append(entry(u32(i), ip16(a) + bytes([0, 0, 0, 0])))
    for i, a in enumerate(reals_v6):
        reals.append(entry(u32(n_reals + i), ip16(a) + bytes([F_REAL_IPV6, 0, 0, 0])))

    vips, rings = [], []
    for vip_num, (addr, port, proto, flags, fam) in enumerate(KATRAN_VIPS):
        key = ip16(addr) + struct.pack("!H", port) + bytes([proto, 0])
        vips.append(entry(key, u32(flags) + u32(vip_num)))
        names = reals_v4 if fam == 4 else reals_v6
        base = 0 if fam == 4 else n_reals
        for pos, r in enumerate(maglev_ring(names, ring_size)):
            rings.append(entry(u32(vip_num * ring_size + pos), u32(base + r)))

    inner = {"type": "lru_hash", "key_size": 40, "value_size": 16, "max_entries": lru_size, "entries": []}
    return {
        "vip_map": vips,
        "reals": reals,
        "ch_rings": rings,
        "ctl_array": [entry(u32(0), mac(GW_MAC) + bytes(2)), entry(u32(1), mac(LB_MAC) + bytes(2))],
        "lru_mapping": [{"key": hx(u32(cpu)), "inner": dict(inner)} for cpu in range(cpus)],
    }


# ---- firewall ----------------------------------------------------------------


def fw_tuple(family, saddr, daddr, sport, dport, proto):
    return (ip16(saddr) + ip16(daddr) + struct.pack("!HH", sport, dport) + bytes([proto, family, 0, 0]))


def firewall_state():
    v4 = [("192.0.2.0", 24, 1), ("198.51.100.0", 24, 2), ("10.66.0.0", 16, 3)]
    v6 = [("2001:db8:bad::", 48, 10)]
    return {
        "blocked_v4": [entry(u32(plen) + ip4(a), u32(rule) + u32(0)) for a, plen, rule in v4],
        "blocked_v6": [entry(u32(plen) + ip6(a), u32(rule) + u32(0)) for a, plen, rule in v6],
        "allowlist": [
            entry(fw_tuple(4, "192.0.2.10", "10.0.0.1", 5555, 22, IPPROTO_TCP), u64(0)),
            entry(fw_tuple(6, "2001:db8:bad::7", "fc00::1", 5353, 53, IPPROTO_UDP), u64(0)),
        ],
    }


# ---- rate_limiter ----------------------------------------------------------------

NANO = 10**9
U64_MAX = 2**64 - 1


def v4mapped(a):
    return bytes(10) + b"\xff\xff" + ip4(a)


def rate_limiter_state():
    # last_ns = U64_MAX: "stamped in the future", so the kernel never refills the
    # bucket and the verdict does not depend on the clock.
    return {
        "buckets": [
            entry(v4mapped("203.0.113.7"), u64(0) + u64(U64_MAX)),  # exhausted
            entry(v4mapped("203.0.113.8"), u64(5 * NANO) + u64(U64_MAX)),  # 5 tokens left
            entry(ip6("2001:db8:1::7"), u64(0) + u64(U64_MAX)),  # exhausted (IPv6)
        ],
    }


# ---- router_tailcall -------------------------------------------------------------


def router_tailcall_state():
    return {
        "jmp_table": [
            {"key": hx(u32(0)), "prog": "handle_ipv4"},
            {"key": hx(u32(1)), "prog": "handle_ipv6"},
            {"key": hx(u32(2)), "prog": "handle_arp"},
        ],
        "routes_v4": [
            entry(u32(16) + ip4("10.1.0.0"), mac("02:00:00:00:01:01") + mac("02:00:00:00:00:01") + u32(0)),
            entry(u32(24) + ip4("10.1.2.0"), mac("02:00:00:00:01:02") + mac("02:00:00:00:00:01") + u32(0)),
        ],
    }


# ---- xdp_redirect ------------------------------------------------------------------


def xdp_redirect_state():
    # ifindex 1 is the loopback device in every network namespace.
    return {
        "tx_ports": [entry(u32(0), u32(1)), entry(u32(1), u32(1))],
        "mac_table": [
            entry(mac("02:00:00:00:00:10") + bytes(2), u32(0) + u32(0)),
            entry(mac("02:00:00:00:00:11") + bytes(2), u32(1) + u32(0)),
            entry(mac("02:00:00:00:00:15") + bytes(2), u32(5) + u32(0)),  # empty slot
            entry(mac("02:00:00:00:00:99") + bytes(2), u32(64) + u32(0)),  # out of range
        ],
    }


BUILDERS = {
    "firewall": firewall_state,
    "rate_limiter": rate_limiter_state,
    "router_tailcall": router_tailcall_state,
    "xdp_redirect": xdp_redirect_state,
    "cms_sketch": dict,
    "icmp_echo": dict,
    "ringbuf_sampler": dict,
}


def dump(state, f):
    """One map entry per line: diffs stay readable and big states stream out."""
    f.write("{\n")
    names = list(state)
    for i, name in enumerate(names):
        entries = state[name]
        f.write("  %s: [" % json.dumps(name))
        if entries:
            f.write("\n")
            f.write(",\n".join("    " + json.dumps(e) for e in entries))
            f.write("\n  ")
        f.write("]" + ("," if i + 1 < len(names) else "") + "\n")
    f.write("}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("program", choices=["katran"] + sorted(BUILDERS))
    ap.add_argument("--reals", type=int, default=8, help="katran: reals per address family")
    ap.add_argument("--cpus", type=int, default=2, help="katran: per-CPU connection tables to create")
    ap.add_argument("--ring-size", type=int, default=KATRAN_RING_SIZE,
                    help="katran: must match ring_size in katran_lb.c")
    ap.add_argument("--lru-size", type=int, default=1000, help="katran: entries per connection table")
    ap.add_argument("--out", help="output file (default stdout)")
    args = ap.parse_args()

    if args.program == "katran":
        if args.ring_size * KATRAN_MAX_VIPS > 2**32 or args.ring_size > KATRAN_RING_SIZE:
            ap.error("ring size must be at most %d (the ch_rings map is sized for it)" % KATRAN_RING_SIZE)
        state = katran_state(args.reals, args.cpus, args.ring_size, args.lru_size)
    else:
        state = BUILDERS[args.program]()
    if args.out:
        with open(args.out, "w") as f:
            dump(state, f)
    else:
        dump(state, sys.stdout)


if __name__ == "__main__":
    main()
