# 1-byte load of an xdp_md field
# expect: bad=reject good=accept
--- bad
ldxb %r2, [%r1+0]
mov %r0, 2
exit
--- good
ldxw %r2, [%r1+0]
mov %r0, 2
exit
