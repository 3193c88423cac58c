# 4-byte load at offset 11 needs 15 bytes, 14 proven
# expect: bad=reject good=accept
--- bad
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 14
jgt %r4, %r3, out
ldxw %r0, [%r2+11]
out:
mov %r0, 2
exit
--- good
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 14
jgt %r4, %r3, out
ldxw %r0, [%r2+10]
out:
mov %r0, 2
exit
