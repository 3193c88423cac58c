# load past the end of xdp_md
# expect: bad=reject good=accept
--- bad
ldxw %r2, [%r1+24]
mov %r0, 2
exit
--- good
ldxw %r2, [%r1+16]
mov %r0, 2
exit
