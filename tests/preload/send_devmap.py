"""The devmap test's traffic from IFNAME: for each port 7001-7004, two
datagrams the egress program passes and one it drops ('D' at payload
byte 8), each payload naming its port and number.

Usage: send_devmap.py IFNAME DST_MAC SRC_IP DST_IP
"""
import os, socket, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from send_udp import frame
ifname, dst_mac, src, dst = sys.argv[1:5]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((ifname, 0))
src_mac = bytes.fromhex(open(f"/sys/class/net/{ifname}/address").read().strip().replace(":", ""))
mac = bytes.fromhex(dst_mac.replace(":", ""))
for port in (7001, 7002, 7003, 7004, 7005):
    for n, mark in ((1, b"k"), (2, b"k"), (3, b"D")):
        payload = b"\0" * 8 + mark + f"{port}-{n}".encode().ljust(15, b".")
        s.send(frame(src_mac, mac, src, dst, port, payload))
