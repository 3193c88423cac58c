# a scalar that differs between two paths meets at a join, then sizes a helper's write into an 8-byte stack buffer: the join must keep it exact (precision tracking)
# expect: bad=reject good=accept
--- bad
mov %r9, %r1
call 7
mov %r6, %r0
mov %r7, 4
mov %r8, 1
stdw [%r10-8], 0
jeq %r6, 0, big
ja join
big:
mov %r7, 100
join:
mov %r1, %r9
mov %r2, 0
mov %r3, %r10
add %r3, -8
mov %r4, %r7
call 189
mov %r0, 2
exit
--- good
mov %r9, %r1
call 7
mov %r6, %r0
mov %r7, 4
mov %r8, 1
stdw [%r10-8], 0
jeq %r6, 0, big
ja join
big:
mov %r7, 8
join:
mov %r1, %r9
mov %r2, 0
mov %r3, %r10
add %r3, -8
mov %r4, %r7
call 189
mov %r0, 2
exit
