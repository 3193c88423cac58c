#!/usr/bin/env python3
"""Build test packets (Ethernet / VLAN / IPv4 / IPv6 / TCP / UDP / ICMP / ARP)
with correct checksums, as hex text. Standard library only.

Library use:
    from mkpkt import build, to_hex
    pkt = build({"l3": "ipv4", "src": "10.0.0.1", "dst": "10.200.1.1",
                 "l4": "tcp", "sport": 1234, "dport": 80, "flags": "S"})

Command line (one packet to stdout or -o FILE):
    mkpkt.py --l3 ipv4 --src 10.0.0.1 --dst 10.200.1.1 --l4 tcp --dport 80 --flags S
    mkpkt.py --spec '{"l3": "arp", "op": 1, "src": "10.0.0.2", "dst": "10.0.0.1"}'
    mkpkt.py --from-hex FILE --summary       # decode a .pkt.hex briefly

Spec keys (all optional except l3):
    eth_dst, eth_src     MAC strings (defaults 02:00:00:00:00:01 / 02:00:00:00:00:02)
    vlan                 802.1Q VLAN id (adds a tag)
    ethertype            raw EtherType when l3 == "raw"
    l3                   ipv4 | ipv6 | arp | raw
    src, dst             addresses (IPv4/IPv6 text)
    ttl / hop_limit, tos / tclass, ip_id, df (bool, default true), mf (bool),
    frag_offset (in 8-byte units), ip_options (bytes as hex, padded to 4),
    bad_ip_csum (bool)   corrupt the IPv4 header checksum on purpose
    ext_headers          IPv6 extension headers: list of {"type": "hop"|"dst"|"routing"|"frag", "len": 8*n}
    l4                   tcp | udp | icmp | icmpv6 | raw (with "proto": number)
    sport, dport, flags  (TCP flags letters from "FSRPAUEC"), seq, ack_seq
    icmp_type, icmp_code, icmp_id, icmp_seq
    op                   ARP opcode (1 request, 2 reply)
    payload_len          bytes of payload (pattern 0x00, 0x01, ...), or payload (hex)
    truncate             cut the frame to this many bytes (after checksums)
"""
import argparse
import ipaddress
import json
import struct
import sys

ETH_P_IP = 0x0800
ETH_P_IPV6 = 0x86DD
ETH_P_ARP = 0x0806
ETH_P_8021Q = 0x8100

PROTO = {"icmp": 1, "tcp": 6, "udp": 17, "icmpv6": 58}
EXT_TYPE = {"hop": 0, "routing": 43, "frag": 44, "dst": 60}
TCP_FLAG_BITS = {"F": 0x01, "S": 0x02, "R": 0x04, "P": 0x08, "A": 0x10, "U": 0x20, "E": 0x40, "C": 0x80}


def mac(s):
    return bytes(int(x, 16) for x in s.split(":"))


def csum(data):
    """RFC 1071 Internet checksum of bytes (returned as int, ready to pack '!H')."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def pseudo_v4(src, dst, proto, length):
    return struct.pack("!4s4sBBH", src, dst, 0, proto, length)


def pseudo_v6(src, dst, proto, length):
    return struct.pack("!16s16sI3xB", src, dst, length, proto)


def payload_of(spec):
    if "payload" in spec:
        return bytes.fromhex(spec["payload"].replace(" ", ""))
    return bytes(i & 0xFF for i in range(spec.get("payload_len", 0)))


def l4_bytes(spec, pseudo):
    """Builds the L4 header + payload; `pseudo(proto, length)` gives the pseudo header."""
    l4 = spec.get("l4", "raw")
    data = payload_of(spec)
    if l4 == "tcp":
        flags = 0
        for ch in spec.get("flags", "S"):
            flags |= TCP_FLAG_BITS[ch]
        hdr = struct.pack("!HHIIBBHHH", spec.get("sport", 40000), spec.get("dport", 80),
                          spec.get("seq", 1000), spec.get("ack_seq", 0), 5 << 4, flags,
                          spec.get("window", 65535), 0, 0)
        seg = hdr + data
        c = csum(pseudo(6, len(seg)) + seg)
        return 6, seg[:16] + struct.pack("!H", c) + seg[18:]
    if l4 == "udp":
        seg = struct.pack("!HHHH", spec.get("sport", 40000), spec.get("dport", 53), 8 + len(data), 0) + data
        c = csum(pseudo(17, len(seg)) + seg) or 0xFFFF  # 0 means "no checksum" in UDP
        return 17, seg[:6] + struct.pack("!H", c) + seg[8:]
    if l4 in ("icmp", "icmpv6"):
        default_type = 8 if l4 == "icmp" else 128
        msg = struct.pack("!BBHHH", spec.get("icmp_type", default_type), spec.get("icmp_code", 0), 0,
                          spec.get("icmp_id", 0x1234), spec.get("icmp_seq", 1)) + data
        if l4 == "icmp":
            c = csum(msg)  # ICMPv4 has no pseudo header
            return 1, msg[:2] + struct.pack("!H", c) + msg[4:]
        c = csum(pseudo(58, len(msg)) + msg)
        return 58, msg[:2] + struct.pack("!H", c) + msg[4:]
    return spec.get("proto", 253), data


def ipv4_packet(spec):
    src = ipaddress.IPv4Address(spec.get("src", "10.0.0.2")).packed
    dst = ipaddress.IPv4Address(spec.get("dst", "10.0.0.1")).packed
    proto, seg = l4_bytes(spec, lambda p, n: pseudo_v4(src, dst, p, n))
    opts = bytes.fromhex(spec.get("ip_options", "").replace(" ", ""))
    opts += b"\x00" * (-len(opts) % 4)
    ihl = 5 + len(opts) // 4
    frag = (0x4000 if spec.get("df", True) else 0) | (0x2000 if spec.get("mf") else 0) | spec.get("frag_offset", 0)
    hdr = struct.pack("!BBHHHBBH4s4s", (4 << 4) | ihl, spec.get("tos", 0), ihl * 4 + len(seg),
                      spec.get("ip_id", 1), frag, spec.get("ttl", 64), proto, 0, src, dst) + opts
    c = csum(hdr)
    if spec.get("bad_ip_csum"):
        c ^= 0x5A5A
    return ETH_P_IP, hdr[:10] + struct.pack("!H", c) + hdr[12:] + seg


def ipv6_packet(spec):
    src = ipaddress.IPv6Address(spec.get("src", "fc00::2")).packed
    dst = ipaddress.IPv6Address(spec.get("dst", "fc00::1")).packed
    proto, seg = l4_bytes(spec, lambda p, n: pseudo_v6(src, dst, p, n))
    # Extension headers are chained front to back; each names the next.
    exts = spec.get("ext_headers", [])
    chain = b""
    nexthdr = proto
    for ext in reversed(exts):
        t = EXT_TYPE[ext["type"]]
        if t == 44:  # fragment header: fixed 8 bytes, offset 0, M=0
            body = struct.pack("!BBHI", nexthdr, 0, 0, 0x1234)
        else:
            length = ext.get("len", 8)
            assert length % 8 == 0 and length >= 8
            # One PadN option fills the options area, so the header is well formed.
            body = struct.pack("!BBBB", nexthdr, length // 8 - 1, 1, length - 4) + bytes(length - 4)
        chain = body + chain
        nexthdr = t
    tc = spec.get("tclass", 0)
    flow = spec.get("flow_label", 0)
    word0 = (6 << 28) | (tc << 20) | flow
    body = chain + seg
    hdr = struct.pack("!IHBB16s16s", word0, len(body), nexthdr, spec.get("hop_limit", 64), src, dst)
    return ETH_P_IPV6, hdr + body


def arp_packet(spec):
    sha = mac(spec.get("eth_src", "02:00:00:00:00:02"))
    op = spec.get("op", 1)
    tha = bytes(6) if op == 1 else mac(spec.get("eth_dst", "02:00:00:00:00:01"))
    spa = ipaddress.IPv4Address(spec.get("src", "10.0.0.2")).packed
    tpa = ipaddress.IPv4Address(spec.get("dst", "10.0.0.1")).packed
    return ETH_P_ARP, struct.pack("!HHBBH6s4s6s4s", 1, ETH_P_IP, 6, 4, op, sha, spa, tha, tpa)


def build(spec):
    l3 = spec["l3"]
    if l3 == "ipv4":
        ethertype, body = ipv4_packet(spec)
    elif l3 == "ipv6":
        ethertype, body = ipv6_packet(spec)
    elif l3 == "arp":
        ethertype, body = arp_packet(spec)
    elif l3 == "raw":
        ethertype, body = spec.get("ethertype", 0x88B5), payload_of(spec)
    else:
        raise ValueError("unknown l3 %r" % l3)
    eth_dst = spec.get("eth_dst", "ff:ff:ff:ff:ff:ff" if l3 == "arp" and spec.get("op", 1) == 1
                       else "02:00:00:00:00:01")
    frame = mac(eth_dst) + mac(spec.get("eth_src", "02:00:00:00:00:02"))
    if "vlan" in spec:
        frame += struct.pack("!HH", ETH_P_8021Q, spec["vlan"] & 0xFFF)
    frame += struct.pack("!H", ethertype) + body
    if "truncate" in spec:
        frame = frame[:spec["truncate"]]
    return frame


def to_hex(data, per_line=16):
    lines = []
    for i in range(0, len(data), per_line):
        lines.append(" ".join("%02x" % b for b in data[i:i + per_line]))
    return "\n".join(lines) + "\n"


def from_hex(text):
    """Parses hex text; '#' starts a comment; whitespace is ignored."""
    digits = "".join(line.split("#", 1)[0] for line in text.splitlines())
    return bytes.fromhex("".join(digits.split()))


def summary(data):
    if len(data) < 14:
        return "runt frame (%d bytes)" % len(data)
    et = struct.unpack("!H", data[12:14])[0]
    off = 14
    s = "eth %s > %s" % (data[6:12].hex(":"), data[0:6].hex(":"))
    if et == ETH_P_8021Q and len(data) >= 18:
        s += " vlan %d" % (struct.unpack("!H", data[14:16])[0] & 0xFFF)
        et = struct.unpack("!H", data[16:18])[0]
        off = 18
    if et == ETH_P_IP and len(data) >= off + 20:
        src, dst = ipaddress.IPv4Address(data[off + 12:off + 16]), ipaddress.IPv4Address(data[off + 16:off + 20])
        s += " ip %s > %s proto %d" % (src, dst, data[off + 9])
    elif et == ETH_P_IPV6 and len(data) >= off + 40:
        src, dst = ipaddress.IPv6Address(data[off + 8:off + 24]), ipaddress.IPv6Address(data[off + 24:off + 40])
        s += " ip6 %s > %s nexthdr %d" % (src, dst, data[off + 6])
    else:
        s += " ethertype 0x%04x" % et
    return s + " len %d" % len(data)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", help="packet spec as JSON")
    ap.add_argument("--from-hex", help="read a .pkt.hex file instead of building")
    ap.add_argument("--summary", action="store_true", help="print a one-line decode")
    ap.add_argument("--binary", action="store_true", help="write raw bytes, not hex")
    ap.add_argument("-o", "--out")
    for key in ("l3", "l4", "src", "dst", "flags", "eth_dst", "eth_src"):
        ap.add_argument("--" + key.replace("_", "-"), dest=key)
    for key in ("sport", "dport", "vlan", "ttl", "payload_len", "truncate", "icmp_type", "op"):
        ap.add_argument("--" + key.replace("_", "-"), dest=key, type=int)
    args = ap.parse_args()

    if args.from_hex:
        with open(args.from_hex) as f:
            data = from_hex(f.read())
    else:
        spec = json.loads(args.spec) if args.spec else {}
        for key, val in vars(args).items():
            if key in ("spec", "from_hex", "summary", "binary", "out") or val is None:
                continue
            spec[key] = val
        if "l3" not in spec:
            ap.error("--l3 (or a spec with l3) is required")
        data = build(spec)

    if args.summary:
        print(summary(data))
        return
    out = data if args.binary else to_hex(data).encode()
    if args.out:
        with open(args.out, "wb") as f:
            f.write(out)
    else:
        sys.stdout.buffer.write(out)


if __name__ == "__main__":
    main()
