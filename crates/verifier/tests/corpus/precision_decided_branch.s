# a branch decided by a scalar's value skips an unsafe access on one path only: the join must keep the scalar exact
# expect: bad=reject good=accept
--- bad
stdw [%r10-8], 0
call 7
mov %r6, %r0
mov %r7, 0
mov %r8, 1
mov %r0, 2
jeq %r6, 0, one
ja join
one:
mov %r7, 1
join:
mov %r8, 3
mov %r9, 4
jeq %r7, 0, safe
ldxdw %r0, [%r10+8]
safe:
mov %r0, 2
exit
--- good
stdw [%r10-8], 0
call 7
mov %r6, %r0
mov %r7, 0
mov %r8, 1
mov %r0, 2
jeq %r6, 0, one
ja join
one:
mov %r7, 1
join:
mov %r8, 3
mov %r9, 4
jeq %r7, 0, safe
ldxdw %r0, [%r10-8]
safe:
mov %r0, 2
exit
