# loop bound taken from the context: never converges within 1M instructions
# expect: bad=reject good=accept
# expect-unpriv: bad=reject good=reject
--- bad
ldxw %r6, [%r1+16]
mov %r0, 2
mov %r1, 0
l:
add %r1, 1
mov %r2, %r1
mul %r2, 3
mov %r3, %r2
rsh %r3, 1
xor %r3, %r2
add %r0, 0
mov %r2, %r1
mul %r2, 3
mov %r3, %r2
rsh %r3, 1
xor %r3, %r2
add %r0, 0
mov %r2, %r1
mul %r2, 3
mov %r3, %r2
rsh %r3, 1
xor %r3, %r2
add %r0, 0
jlt %r1, %r6, l
mov %r0, 2
exit
--- good
ldxw %r6, [%r1+16]
and %r6, 63
mov %r0, 2
mov %r1, 0
l:
add %r1, 1
mov %r2, %r1
mul %r2, 3
mov %r3, %r2
rsh %r3, 1
xor %r3, %r2
add %r0, 0
jlt %r1, %r6, l
mov %r0, 2
exit
