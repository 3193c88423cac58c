# array lookup with a variable key needs a NULL check
# maps: array 4 8 4
# expect: bad=reject good=accept
--- bad
ldxw %r6, [%r1+16]
and %r6, 3
stxw [%r10-4], %r6
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
ldxw %r0, [%r0+0]
exit
--- good
ldxw %r6, [%r1+16]
and %r6, 3
stxw [%r10-4], %r6
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
ldxw %r0, [%r0+0]
exit
out:
mov %r0, 2
exit
