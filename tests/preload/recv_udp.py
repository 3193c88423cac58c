"""What the stack of this namespace receives: UDP datagrams to ports 8888
and 9999 during SECONDS, printed as "n_8888 n_9999" (the counterpart of
send_udp.py).

Usage: recv_udp.py SECONDS
"""
import select, socket, sys, time
socks = {}
for port in (8888, 9999):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    socks[s] = port
got = {8888: 0, 9999: 0}
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for s in select.select(list(socks), [], [], 0.1)[0]:
        s.recv(2048)
        got[socks[s]] += 1
print(got[8888], got[9999])
