# a helper's size reaches it through a stack spill, a fill and a subprogram's return value; precision must follow it back to the join
# expect: bad=reject good=accept
--- bad
mov %r9, %r1
call 7
mov %r6, %r0
mov %r1, 4
stxdw [%r10-16], %r1
stdw [%r10-8], 0
jeq %r6, 0, big
ja join
big:
mov %r1, 100
stxdw [%r10-16], %r1
join:
ldxdw %r1, [%r10-16]
call local pass
mov %r4, %r0
mov %r1, %r9
mov %r2, 0
mov %r3, %r10
add %r3, -8
call 189
mov %r0, 2
exit
pass:
mov %r0, %r1
exit
--- good
mov %r9, %r1
call 7
mov %r6, %r0
mov %r1, 4
stxdw [%r10-16], %r1
stdw [%r10-8], 0
jeq %r6, 0, big
ja join
big:
mov %r1, 6
stxdw [%r10-16], %r1
join:
ldxdw %r1, [%r10-16]
call local pass
mov %r4, %r0
mov %r1, %r9
mov %r2, 0
mov %r3, %r10
add %r3, -8
call 189
mov %r0, 2
exit
pass:
mov %r0, %r1
exit
