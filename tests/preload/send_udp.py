"""UDP datagrams as raw Ethernet frames, checksums complete (a veth peer's
UDP socket would leave them to checksum offload, which AF_XDP copies do not
finish): N_DROP to port 9999, then N_PASS to port 8888.

Usage: send_udp.py IFNAME DST_MAC SRC_IP DST_IP N_DROP N_PASS
(importable: `frame()` builds one, for tests that check the bytes sent).
"""
import socket, struct, sys
def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16: s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
def frame(src_mac, dst_mac, src, dst, dport, payload):
    udp_len = 8 + len(payload)
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 17, udp_len)
    udp = struct.pack("!HHHH", 40000, dport, udp_len, 0) + payload
    udp = udp[:6] + struct.pack("!H", csum(pseudo + udp) or 0xffff) + udp[8:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, 0, 0x4000, 64, 17, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return dst_mac + src_mac + b"\x08\x00" + ip + udp
if __name__ == "__main__":
    ifname, dst_mac, src, dst, n_drop, n_pass = sys.argv[1:7]
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((ifname, 0))
    src_mac = open(f"/sys/class/net/{ifname}/address").read().strip()
    mac = lambda m: bytes.fromhex(m.replace(":", ""))
    for port, n in ((9999, int(n_drop)), (8888, int(n_pass))):
        for _ in range(n):
            s.send(frame(mac(src_mac), mac(dst_mac), src, dst, port, b"p" * 32))
