# a bpf_loop callback forks on a random number into v = 0 (explored first) and v = 1, joins, and stores v into ctx->a, on which the next iteration decides (a = 1 reads outside the frame in bad). The v = 0 path converges against the first iteration, still being explored, so the join's state is fully explored while its marks wait for that iteration; an optimistic prune of the v = 1 path at the join holds only until those marks (a, hence v) are final, and must then be made again, or the second iteration with a = 1 is never explored (without the check bpfjet accepts bad)
# expect: bad=reject good=accept
--- bad
stdw [%r10-16], 0
stdw [%r10-8], 0
mov %r1, 2
lddw %r2, func cb
mov %r3, %r10
add %r3, -16
mov %r4, 0
call 181
mov %r0, 2
exit
cb:
mov %r6, %r2
ldxdw %r3, [%r6+0]
jne %r3, 1, ok
ldxdw %r0, [%r10+8]
ok:
call 7
mov %r7, 1
jne %r0, 0, join
mov %r7, 0
mov %r8, 0
mov %r8, 0
mov %r8, 0
mov %r8, 0
mov %r8, 0
mov %r8, 0
mov %r8, 0
mov %r8, 0
ja join
join:
mov %r4, 0
mov %r5, 0
stxdw [%r6+0], %r7
mov %r0, 0
exit
--- good
stdw [%r10-16], 0
stdw [%r10-8], 0
mov %r1, 2
lddw %r2, func cb
mov %r3, %r10
add %r3, -16
mov %r4, 0
call 181
mov %r0, 2
exit
cb:
mov %r6, %r2
ldxdw %r3, [%r6+0]
jne %r3, 1, ok
ldxdw %r0, [%r6+8]
ok:
call 7
mov %r7, 1
jne %r0, 0, join
mov %r7, 0
mov %r8, 0
mov %r8, 0
mov %r8, 0
mov %r8, 0
mov %r8, 0
mov %r8, 0
mov %r8, 0
mov %r8, 0
ja join
join:
mov %r4, 0
mov %r5, 0
stxdw [%r6+0], %r7
mov %r0, 0
exit
