# a bpf_loop callback decides on ctx->a, then moves ctx->b into ctx->a: its second iteration is pruned against the first, still being explored, and what that iteration needs precise (a) must reach b before the call once the callback is explored, or the caller's path with b = 1 is pruned where b = 0 was explored
# expect: bad=reject good=accept
--- bad
call 7
mov %r6, %r0
mov %r7, 0
mov %r8, 0
mov %r9, 0
stdw [%r10-16], 0
stdw [%r10-8], 0
jeq %r6, 0, one
ja join
one:
stdw [%r10-8], 1
join:
mov %r1, 2
lddw %r2, func cb
mov %r3, %r10
add %r3, -16
mov %r4, 0
call 181
mov %r0, 2
exit
cb:
ldxdw %r3, [%r2+0]
jne %r3, 1, ok
ldxdw %r0, [%r10+8]
ok:
ldxdw %r4, [%r2+8]
stxdw [%r2+0], %r4
mov %r0, 0
exit
--- good
call 7
mov %r6, %r0
mov %r7, 0
mov %r8, 0
mov %r9, 0
stdw [%r10-16], 0
stdw [%r10-8], 0
jeq %r6, 0, one
ja join
one:
stdw [%r10-8], 1
join:
mov %r1, 2
lddw %r2, func cb
mov %r3, %r10
add %r3, -16
mov %r4, 0
call 181
mov %r0, 2
exit
cb:
ldxdw %r3, [%r2+0]
jne %r3, 1, ok
ldxdw %r0, [%r2+8]
ok:
ldxdw %r4, [%r2+8]
stxdw [%r2+0], %r4
mov %r0, 0
exit
