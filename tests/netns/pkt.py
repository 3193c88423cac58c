#!/usr/bin/env python3
"""Frames for the netns test, from raw sockets (needs root; no scapy).

  pkt.py echo IFACE DST_MAC COUNT     send UDP frames, count MAC-swapped echoes
  pkt.py sniff IFACE SECONDS MARK     count frames carrying MARK in the payload
  pkt.py send IFACE DST_MAC COUNT     send UDP frames only
  pkt.py ping ADDR COUNT              ICMP echo, count replies
  pkt.py jumbo IFACE DST_MAC COUNT SIZE
                                      send SIZE-byte UDP frames, count echoes
                                      of the same size with MACs swapped, the
                                      last byte set to 0xee, the rest intact
Prints one integer: the count observed.
"""
import os
import socket
import struct
import sys
import time

MARK = b"bpfjet-netns"


def mac_of(iface):
    with open(f"/sys/class/net/{iface}/address") as f:
        return bytes.fromhex(f.read().strip().replace(":", ""))


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def udp_frame(src_mac, dst_mac, seq, size=0):
    payload = MARK + struct.pack("!I", seq)
    if size:
        fill = size - 14 - 20 - 8 - len(payload)
        payload += bytes((seq + i * 7) & 0xFF for i in range(fill))
    udp = struct.pack("!HHHH", 40000, 9, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), seq & 0xFFFF, 0, 64, 17, 0,
                     socket.inet_aton("10.77.0.1"), socket.inet_aton("10.77.0.2"))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return dst_mac + src_mac + b"\x08\x00" + ip + udp


def raw(iface):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.bind((iface, 0))
    s.settimeout(0.2)
    return s


def count_marked(s, seconds, want_dst=None):
    n = 0
    end = time.time() + seconds
    while time.time() < end:
        try:
            frame, addr = s.recvfrom(65535)
        except socket.timeout:
            continue
        if addr[2] == socket.PACKET_OUTGOING:
            continue
        if MARK in frame and (want_dst is None or frame[:6] == want_dst):
            n += 1
    return n


def main():
    cmd = sys.argv[1]
    if cmd in ("echo", "send"):
        iface, dst, count = sys.argv[2], bytes.fromhex(sys.argv[3].replace(":", "")), int(sys.argv[4])
        s = raw(iface)
        src = mac_of(iface)
        for i in range(count):
            s.send(udp_frame(src, dst, i))
        if cmd == "send":
            print(count)
            return
        # An echo comes back addressed to us (MACs swapped).
        print(count_marked(s, 1.5, want_dst=src))
    elif cmd == "jumbo":
        iface, dst = sys.argv[2], bytes.fromhex(sys.argv[3].replace(":", ""))
        count, size = int(sys.argv[4]), int(sys.argv[5])
        s = raw(iface)
        # Echoes arrive while the rest is still being sent: room for all of
        # them (SO_RCVBUFFORCE, we are root).
        s.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)
        src = mac_of(iface)
        sent = {}
        for i in range(count):
            f = udp_frame(src, dst, i, size)
            sent[f[14:34]] = f
            s.send(f)
        n = 0
        end = time.time() + 2.0
        while time.time() < end:
            try:
                frame, addr = s.recvfrom(65535)
            except socket.timeout:
                continue
            if addr[2] == socket.PACKET_OUTGOING or frame[:6] != src:
                continue
            orig = sent.get(frame[14:34])
            if orig and len(frame) == size and frame[6:12] == dst and frame[-1] == 0xEE \
                    and frame[12:-1] == orig[12:-1]:
                n += 1
            elif os.environ.get("PKT_DEBUG"):
                bad = [i for i in range(min(len(frame), len(orig or b""))) if frame[i] != orig[i]]
                print(f"bad echo: len {len(frame)} known {orig is not None} "
                      f"diffs {len(bad)} first {bad[:8]} last {frame[-1]:#x}", file=sys.stderr)
        print(n)
    elif cmd == "sniff":
        iface, seconds = sys.argv[2], float(sys.argv[3])
        print(count_marked(raw(iface), seconds))
    elif cmd == "ping":
        addr, count = sys.argv[2], int(sys.argv[3])
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        s.settimeout(1.0)
        got = 0
        for i in range(count):
            body = struct.pack("!BBHHH", 8, 0, 0, 0x4242, i) + MARK
            body = body[:2] + struct.pack("!H", csum(body)) + body[4:]
            s.sendto(body, (addr, 0))
            end = time.time() + 1.0
            while time.time() < end:
                try:
                    pkt, _ = s.recvfrom(65535)
                except socket.timeout:
                    break
                icmp = pkt[(pkt[0] & 0xF) * 4:]
                if icmp[0] == 0 and struct.unpack("!HH", icmp[4:8]) == (0x4242, i):
                    got += 1
                    break
        print(got)
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
