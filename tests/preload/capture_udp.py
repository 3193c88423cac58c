"""Raw UDP frames an interface receives for SECONDS, as sorted lines
"DPORT PAYLOAD-HEX" (ports 7001-7009 only: the devmap test's traffic).

Usage: capture_udp.py IFNAME SECONDS
"""
import socket, struct, sys, time
ifname, seconds = sys.argv[1], float(sys.argv[2])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
s.bind((ifname, 0))
s.settimeout(0.1)
seen = []
end = time.time() + seconds
while time.time() < end:
    try:
        b, addr = s.recvfrom(2048)
    except socket.timeout:
        continue
    if addr[2] == socket.PACKET_OUTGOING or len(b) < 42 or b[23] != 17:
        continue
    ihl = (b[14] & 15) * 4
    dport = struct.unpack("!H", b[14 + ihl + 2:14 + ihl + 4])[0]
    if 7001 <= dport <= 7009:
        seen.append(f"{dport} {b[14 + ihl + 8:].hex()}")
print("\n".join(sorted(seen)))
