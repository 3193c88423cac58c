# load before the packet start
# expect: bad=reject good=accept
--- bad
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 14
jgt %r4, %r3, out
ldxb %r0, [%r2-1]
out:
mov %r0, 2
exit
--- good
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 14
jgt %r4, %r3, out
ldxb %r0, [%r2+0]
out:
mov %r0, 2
exit
