# access on the side where p > end
# expect: bad=reject good=accept
--- bad
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 14
jgt %r4, %r3, bad
mov %r0, 2
exit
bad:
ldxb %r0, [%r2+0]
exit
--- good
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 14
jgt %r4, %r3, bad
ldxb %r0, [%r2+0]
exit
bad:
mov %r0, 1
exit
