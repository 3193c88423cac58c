# stack pointer plus an unbounded scalar
# expect: bad=reject good=accept
# expect-unpriv: bad=reject good=reject
--- bad
ldxw %r6, [%r1+16]
mov %r2, %r10
add %r2, -64
add %r2, %r6
stb [%r2+0], 0
mov %r0, 2
exit
--- good
ldxw %r6, [%r1+16]
and %r6, 31
mov %r2, %r10
add %r2, -64
add %r2, %r6
stb [%r2+0], 0
mov %r0, 2
exit
