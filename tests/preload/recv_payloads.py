"""UDP payloads the stack of this namespace receives on PORT during
SECONDS, as sorted hex lines (the devmap test's CPUMAP traffic).

Usage: recv_payloads.py PORT SECONDS
"""
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.settimeout(0.1)
got = []
end = time.time() + float(sys.argv[2])
while time.time() < end:
    try:
        got.append(s.recv(2048).hex())
    except socket.timeout:
        pass
print("\n".join(sorted(got)))
