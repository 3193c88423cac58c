#!/usr/bin/env python3
"""(Re)writes the checked-in fixtures under examples/xdp/fixtures/<program>/:
packets (*.pkt.hex), expected output packets (*.out.hex, where the output is
computable without the program's hash), small states (state.json) and
cases.json. The katran state is generated at build time (see gen_state.py).

    gen_fixtures.py [--out examples/xdp/fixtures]

Expected actions were confirmed against the kernel with kernel_check.py
(see examples/README.md). Standard library only.
"""
import argparse
import json
import os
import shutil
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, HERE)
import gen_state  # noqa: E402
from mkpkt import build, csum, to_hex  # noqa: E402

V4_TCP = {"l3": "ipv4", "l4": "tcp"}
V4_UDP = {"l3": "ipv4", "l4": "udp"}
V6_TCP = {"l3": "ipv6", "l4": "tcp"}
V6_UDP = {"l3": "ipv6", "l4": "udp"}
ARP = {"l3": "arp", "op": 1, "src": "10.0.0.2", "dst": "10.0.0.1"}
# BPF_PROG_TEST_RUN refuses frames shorter than 14 bytes, so the shortest
# malformed input is an Ethernet header announcing IPv4 with nothing after it.
ETH_ONLY = {"l3": "ipv4", "truncate": 14}


def spec(base, **kw):
    s = dict(base)
    s.update(kw)
    return s


# Each case: (name, packet spec, expected action, note[, extra case fields]).
KATRAN = [
    ("vip4_tcp_syn", spec(V4_TCP, src="192.168.10.1", dst="10.200.1.1", sport=31337, dport=80,
                          flags="S", payload_len=0), "TX", "TCP SYN to a v4 VIP: ring pick, IPIP encap"),
    ("vip4_tcp_ack", spec(V4_TCP, src="192.168.10.2", dst="10.200.1.1", sport=40001, dport=80,
                          flags="A", payload_len=64), "TX", "established TCP: connection-table miss, ring, IPIP"),
    ("vip4_udp", spec(V4_UDP, src="192.168.10.3", dst="10.200.1.2", sport=5000, dport=443,
                      payload_len=100), "TX", "UDP VIP with F_HASH_NO_SRC_PORT: IPIP"),
    ("vip6_tcp_syn", spec(V6_TCP, src="2001:db8::10", dst="fc00:200::1", sport=31337, dport=80,
                          flags="S"), "TX", "TCP SYN to a v6 VIP: IP6IP6 encap"),
    ("vip4_any_port_v6_real", spec(V4_TCP, src="192.168.10.4", dst="10.200.1.3", sport=1234, dport=8080,
                                   flags="S"), "TX", "port-0 (any port) VIP with v6 reals: IPv4-in-IPv6"),
    ("vip_addr_other_port", spec(V4_TCP, src="192.168.10.1", dst="10.200.1.1", sport=31337, dport=22),
     "PASS", "VIP address but no VIP on port 22"),
    ("non_vip_udp", spec(V4_UDP, src="192.168.10.1", dst="10.9.9.9", dport=53, payload_len=20),
     "PASS", "not a VIP"),
    ("non_vip_udp6", spec(V6_UDP, src="2001:db8::10", dst="fc00:300::1", dport=53), "PASS", "not a VIP (v6)"),
    ("icmp_to_vip", {"l3": "ipv4", "l4": "icmp", "src": "192.168.10.1", "dst": "10.200.1.1"},
     "PASS", "ICMP is not balanced"),
    ("arp", ARP, "PASS", "non-IP"),
    ("vlan_tagged_vip", spec(V4_TCP, src="192.168.10.1", dst="10.200.1.1", dport=80, vlan=100),
     "PASS", "802.1Q-tagged frames go to the stack"),
    ("truncated_tcp", spec(V4_TCP, src="192.168.10.1", dst="10.200.1.1", dport=80, truncate=14 + 20 + 10),
     "DROP", "TCP header cut short"),
    ("truncated_ipv4", spec(V4_TCP, dst="10.200.1.1", dport=80, truncate=14 + 12), "DROP", "IPv4 header cut short"),
    ("ipv4_options", spec(V4_TCP, src="192.168.10.1", dst="10.200.1.1", dport=80, ip_options="01010101"),
     "DROP", "IPv4 options (ihl 6) are not balanced"),
    ("ipv4_fragment", spec(V4_UDP, src="192.168.10.1", dst="10.200.1.2", dport=443, mf=True, df=False,
                           payload_len=64), "DROP", "first fragment (MF) to a VIP"),
    ("eth_only", ETH_ONLY, "DROP", "EtherType IPv4, no IP header"),
]

FIREWALL = [
    ("blocked_v4", spec(V4_TCP, src="192.0.2.55", dst="10.0.0.1", dport=443), "DROP", "source in 192.0.2.0/24"),
    ("allowlisted_v4", spec(V4_TCP, src="192.0.2.10", dst="10.0.0.1", sport=5555, dport=22, flags="A"),
     "PASS", "blocked prefix, but the 5-tuple is allowlisted"),
    ("allowlist_other_port", spec(V4_TCP, src="192.0.2.10", dst="10.0.0.1", sport=5556, dport=22),
     "DROP", "same hosts, different source port: not allowlisted"),
    ("blocked_v4_slash16", spec(V4_UDP, src="10.66.200.1", dst="10.0.0.1", dport=53), "DROP", "source in 10.66.0.0/16"),
    ("neighbour_prefix", spec(V4_UDP, src="10.67.0.1", dst="10.0.0.1", dport=53), "PASS", "10.67/16 is not blocked"),
    ("clean_v4", spec(V4_TCP, src="203.0.113.1", dst="10.0.0.1", dport=80), "PASS", "no rule matches"),
    ("blocked_icmp", {"l3": "ipv4", "l4": "icmp", "src": "198.51.100.9", "dst": "10.0.0.1"},
     "DROP", "ICMP from 198.51.100.0/24"),
    ("blocked_v6", spec(V6_TCP, src="2001:db8:bad::1", dst="fc00::1", dport=443), "DROP", "source in 2001:db8:bad::/48"),
    ("allowlisted_v6", spec(V6_UDP, src="2001:db8:bad::7", dst="fc00::1", sport=5353, dport=53),
     "PASS", "allowlisted v6 5-tuple inside a blocked prefix"),
    ("clean_v6", spec(V6_TCP, src="2001:db8:600d::1", dst="fc00::1", dport=443), "PASS", "no rule matches"),
    ("arp", ARP, "PASS", "non-IP passes"),
    ("truncated_udp", spec(V4_UDP, src="203.0.113.1", dst="10.0.0.1", truncate=14 + 20 + 4), "DROP",
     "UDP header cut short"),
    ("eth_only", ETH_ONLY, "DROP", "EtherType IPv4, no IP header"),
]

CMS = [
    ("tcp4", spec(V4_TCP, src="10.0.0.2", dst="10.0.0.1", sport=1111, dport=80), "PASS", "counted in 4 rows"),
    ("udp6", spec(V6_UDP, src="2001:db8::2", dst="fc00::1", sport=2222, dport=53), "PASS", "counted (v6)"),
    ("heavy_hitter", spec(V4_UDP, src="10.0.0.3", dst="10.0.0.1", sport=3333, dport=4789, payload_len=50),
     "PASS", "repeated 1100 times: crosses hh_threshold (1024), lands in heavy_hitters",
     {"repeat": 1100}),
    ("arp", ARP, "PASS", "not counted"),
    ("truncated_ipv4", spec(V4_TCP, truncate=20), "PASS", "not counted"),
]

ICMP = [
    ("echo_request", {"l3": "ipv4", "l4": "icmp", "src": "10.0.0.2", "dst": "10.0.0.1", "ttl": 17,
                      "icmp_id": 0x4242, "icmp_seq": 7, "payload_len": 56}, "TX",
     "answered in place: swapped MACs/IPs, TTL 64, type 0", {"expected_out": "echo_request.out.hex"}),
    ("echo_request_odd_payload", {"l3": "ipv4", "l4": "icmp", "src": "192.168.1.9", "dst": "10.0.0.1",
                                  "ttl": 255, "payload_len": 13}, "TX", "odd-length payload",
     {"expected_out": "echo_request_odd_payload.out.hex"}),
    ("echo_reply", {"l3": "ipv4", "l4": "icmp", "icmp_type": 0}, "PASS", "replies are not answered"),
    ("bad_ip_csum", {"l3": "ipv4", "l4": "icmp", "bad_ip_csum": True}, "PASS", "IP checksum does not verify"),
    ("ip_options", {"l3": "ipv4", "l4": "icmp", "ip_options": "01010101"}, "PASS", "options left to the stack"),
    ("truncated_icmp", {"l3": "ipv4", "l4": "icmp", "truncate": 14 + 20 + 4}, "PASS", "ICMP header cut short"),
    ("tcp", V4_TCP, "PASS", "not ICMP"),
    ("icmpv6_echo", {"l3": "ipv6", "l4": "icmpv6"}, "PASS", "IPv6 is not handled"),
]

RATE = [
    ("new_source", spec(V4_UDP, src="203.0.113.1", dport=53), "PASS", "first packet: full bucket"),
    ("exhausted", spec(V4_UDP, src="203.0.113.7", dport=53), "DROP", "bucket empty, no refill"),
    ("tokens_left", spec(V4_UDP, src="203.0.113.8", dport=53), "PASS", "bucket has 5 tokens"),
    ("exhausted_v6", spec(V6_TCP, src="2001:db8:1::7"), "DROP", "IPv6 bucket empty"),
    ("new_source_v6", spec(V6_TCP, src="2001:db8:1::8"), "PASS", "first IPv6 packet"),
    ("arp", ARP, "PASS", "non-IP is not limited"),
    ("truncated_ipv4", spec(V4_UDP, truncate=14 + 10), "DROP", "malformed"),
]

ROUTER = [
    ("v4_routed", spec(V4_UDP, src="10.0.0.2", dst="10.1.9.9", ttl=64, payload_len=18), "TX",
     "10.1.0.0/16: MACs rewritten, TTL 63", {"expected_out": "v4_routed.out.hex"}),
    ("v4_longest_prefix", spec(V4_TCP, src="10.0.0.2", dst="10.1.2.3", ttl=9), "TX",
     "10.1.2.0/24 wins over 10.1.0.0/16", {"expected_out": "v4_longest_prefix.out.hex"}),
    ("v4_vlan_routed", spec(V4_UDP, src="10.0.0.2", dst="10.1.9.9", vlan=7), "TX",
     "L3 offset 18 handed over in the scratch map", {"expected_out": "v4_vlan_routed.out.hex"}),
    ("v4_no_route", spec(V4_UDP, src="10.0.0.2", dst="172.16.0.1"), "PASS", "no route"),
    ("v4_ttl_1", spec(V4_UDP, src="10.0.0.2", dst="10.1.9.9", ttl=1), "PASS", "TTL exceeded: stack answers"),
    ("v6_tcp", spec(V6_TCP, src="2001:db8::2", dst="2001:db8::1"), "PASS", "counted as TCP"),
    ("v6_ext_headers", spec(V6_UDP, src="2001:db8::2", dst="2001:db8::1",
                            ext_headers=[{"type": "hop"}, {"type": "routing", "len": 24}, {"type": "frag"},
                                         {"type": "dst", "len": 16}]),
     "PASS", "bpf_loop walks 4 extension headers to UDP"),
    ("v6_truncated_ext", spec(V6_UDP, ext_headers=[{"type": "hop", "len": 64}], truncate=14 + 40 + 16),
     "DROP", "extension header runs past the frame"),
    ("arp_request", ARP, "PASS", "counted"),
    ("lldp", {"l3": "raw", "ethertype": 0x88CC, "payload_len": 46}, "PASS", "not dispatched"),
    ("eth_only", ETH_ONLY, "DROP", "EtherType IPv4, no IP header"),
]

SAMPLER = [
    ("tcp4_syn", spec(V4_TCP, flags="S"), "PASS", "sampled (packet 0) and reported as a SYN"),
    ("tcp6_syn", spec(V6_TCP, flags="S"), "PASS", "sampled and reported (v6)"),
    ("udp4", V4_UDP, "PASS", "sampled only"),
    ("arp", ARP, "PASS", "sampled only"),
    ("burst_syn", spec(V4_TCP, flags="S", payload_len=200), "PASS", "1000 SYNs: 16 samples, 1000 SYN events",
     {"repeat": 1000}),
]

REDIRECT = [
    ("known_mac_port0", spec(V4_UDP, eth_dst="02:00:00:00:00:10"), "REDIRECT", "mac_table -> port 0 -> lo"),
    ("known_mac_port1", spec(V6_TCP, eth_dst="02:00:00:00:00:11"), "REDIRECT", "mac_table -> port 1 -> lo"),
    ("empty_slot_fallback", spec(V4_UDP, eth_dst="02:00:00:00:00:15"), "PASS",
     "port 5 has no device: fallback action from .rodata"),
    ("port_out_of_range", spec(V4_UDP, eth_dst="02:00:00:00:00:99"), "DROP", "port 64 >= MAX_PORTS"),
    ("unknown_unicast", spec(V4_UDP, eth_dst="02:00:00:00:00:77"), "PASS", "no entry, no default port"),
    ("broadcast", ARP, "REDIRECT", "flooded with BPF_F_BROADCAST"),
]

PROGRAMS = {
    # name: (cases, entry program, state reference)
    "katran_lb": (KATRAN, "katran_lb", "build:xdp/fixtures/katran_lb/state.json"),
    "firewall": (FIREWALL, "firewall", "state.json"),
    "cms_sketch": (CMS, "cms_sketch", "state.json"),
    "icmp_echo": (ICMP, "icmp_echo", "state.json"),
    "rate_limiter": (RATE, "rate_limiter", "state.json"),
    "router_tailcall": (ROUTER, "xdp_router", "state.json"),
    "ringbuf_sampler": (SAMPLER, "ringbuf_sampler", "state.json"),
    "xdp_redirect": (REDIRECT, "xdp_redirect", "state.json"),
}


# ---- expected outputs for programs whose rewrite does not depend on a hash ----

def icmp_reply(pkt):
    """What icmp_echo.c must produce for an echo request (no IP options)."""
    b = bytearray(pkt)
    b[0:6], b[6:12] = pkt[6:12], pkt[0:6]
    ip = 14
    b[ip + 12:ip + 16], b[ip + 16:ip + 20] = pkt[ip + 16:ip + 20], pkt[ip + 12:ip + 16]
    b[ip + 8] = 64
    b[ip + 10:ip + 12] = b"\0\0"
    b[ip + 10:ip + 12] = struct.pack("!H", csum(bytes(b[ip:ip + 20])))
    icmp = ip + 20
    b[icmp] = 0
    b[icmp + 2:icmp + 4] = b"\0\0"
    b[icmp + 2:icmp + 4] = struct.pack("!H", csum(bytes(b[icmp:])))
    return bytes(b)


def routed(pkt, dmac, smac):
    """What router_tailcall.c's IPv4 path must produce: next-hop MACs, TTL - 1."""
    b = bytearray(pkt)
    b[0:6], b[6:12] = dmac, smac
    ip = 18 if pkt[12:14] == b"\x81\x00" else 14
    b[ip + 8] -= 1
    b[ip + 10:ip + 12] = b"\0\0"
    ihl = (b[ip] & 0xF) * 4
    b[ip + 10:ip + 12] = struct.pack("!H", csum(bytes(b[ip:ip + ihl])))
    return bytes(b)


def expected_out(program, name, pkt):
    if program == "icmp_echo":
        return icmp_reply(pkt)
    if program == "router_tailcall":
        nh_16 = gen_state.mac("02:00:00:00:01:01")
        nh_24 = gen_state.mac("02:00:00:00:01:02")
        me = gen_state.mac("02:00:00:00:00:01")
        return routed(pkt, nh_24 if name == "v4_longest_prefix" else nh_16, me)
    raise KeyError(program)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=os.path.join(HERE, "..", "xdp", "fixtures"))
    args = ap.parse_args()

    for program, (cases, prog, state_ref) in PROGRAMS.items():
        fdir = os.path.join(args.out, program)
        shutil.rmtree(fdir, ignore_errors=True)
        os.makedirs(fdir)
        if state_ref == "state.json":
            with open(os.path.join(fdir, "state.json"), "w") as f:
                gen_state.dump(gen_state.BUILDERS[program](), f)
        out_cases = []
        for case in cases:
            name, pspec, action, note = case[:4]
            extra = case[4] if len(case) > 4 else {}
            pkt = build(pspec)
            write(os.path.join(fdir, name + ".pkt.hex"), to_hex(pkt))
            c = {"name": name, "packet": name + ".pkt.hex", "state": state_ref,
                 "expected_action": action, "note": note}
            if "repeat" in extra:
                c["repeat"] = extra["repeat"]
            if "expected_out" in extra:
                write(os.path.join(fdir, extra["expected_out"]), to_hex(expected_out(program, name, pkt)))
                c["expected_out"] = extra["expected_out"]
            out_cases.append(c)
        doc = {"program": program, "object": program + ".o", "prog": prog, "cases": out_cases}
        write(os.path.join(fdir, "cases.json"), json.dumps(doc, indent=2) + "\n")
        print("%-16s %2d cases" % (program, len(out_cases)))


if __name__ == "__main__":
    main()
