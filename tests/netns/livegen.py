#!/usr/bin/env python3
"""Line-rate-ish traffic for the throughput comparison, without pktgen.

  livegen.py IFACE DST_MAC COUNT [SRC_IP]

Loads a two-instruction XDP program (`return XDP_TX`) and runs it with
BPF_PROG_TEST_RUN in BPF_F_TEST_XDP_LIVE_FRAMES mode on a 64-byte UDP frame
with IFACE as the ingress interface: the kernel transmits COUNT copies of the
frame out of IFACE as fast as it can (on veth, they arrive on the peer).
Prints "<packets> <seconds>". Needs root.
"""
import ctypes
import os
import socket
import struct
import sys
import time

SYS_BPF = {"x86_64": 321, "aarch64": 280}[os.uname().machine]
BPF_PROG_LOAD, BPF_PROG_TEST_RUN = 5, 10
BPF_PROG_TYPE_XDP = 6
BPF_F_TEST_XDP_LIVE_FRAMES = 1 << 1
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def bpf(cmd, attr):
    buf = ctypes.create_string_buffer(attr, 256)
    r = libc.syscall(SYS_BPF, cmd, buf, 256)
    if r < 0:
        e = ctypes.get_errno()
        sys.exit(f"bpf({cmd}): {os.strerror(e)}")
    return r


def csum(b):
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def main():
    iface, dst, count = sys.argv[1], bytes.fromhex(sys.argv[2].replace(":", "")), int(sys.argv[3])
    src_ip = sys.argv[4] if len(sys.argv) > 4 else "10.66.1.1"
    with open(f"/sys/class/net/{iface}/address") as f:
        src = bytes.fromhex(f.read().strip().replace(":", ""))
    ifindex = socket.if_nametoindex(iface)
    payload = bytes(64 - 14 - 20 - 8)
    udp = struct.pack("!HHHH", 40000, 9, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0,
                     socket.inet_aton(src_ip), socket.inet_aton("10.77.0.2"))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    frame = ctypes.create_string_buffer(dst + src + b"\x08\x00" + ip + udp)
    insns = ctypes.create_string_buffer(
        struct.pack("<BBhi", 0xB7, 0, 0, 3) + struct.pack("<BBhi", 0x95, 0, 0, 0))
    lic = ctypes.create_string_buffer(b"GPL")
    attr = struct.pack("<IIQQIIQII", BPF_PROG_TYPE_XDP, 2, ctypes.addressof(insns),
                       ctypes.addressof(lic), 0, 0, 0, 0, 0)
    fd = bpf(BPF_PROG_LOAD, attr)
    # xdp_md: data 0, data_end = the frame size (the kernel checks both).
    ctx = ctypes.create_string_buffer(struct.pack("<IIIIII", 0, len(frame) - 1, 0, ifindex, 0, 0))
    sent = 0
    start = time.time()
    while sent < count:
        n = min(count - sent, 1 << 24)
        attr = struct.pack("<IIIIQQIIIIQQIII", fd, 0, len(frame) - 1, 0, ctypes.addressof(frame),
                           0, n, 0, len(ctx) - 1, 0, ctypes.addressof(ctx), 0,
                           BPF_F_TEST_XDP_LIVE_FRAMES, 0, 0)
        bpf(BPF_PROG_TEST_RUN, attr)
        sent += n
    print(sent, round(time.time() - start, 4))


if __name__ == "__main__":
    main()
