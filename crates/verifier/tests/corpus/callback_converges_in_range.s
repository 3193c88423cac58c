# a bpf_loop callback of up to 2^23 calls leaves ctx in [0, 7]: after its second call the caller's state lies within the one before it, so the iterations converge at the call; the index then stays in an 8-slot stack array and runs past a 7-slot one
# expect: bad=reject good=accept
# expect-unpriv: bad=reject good=reject
--- bad
stdw [%r10-8], 0
stdw [%r10-16], 0
stdw [%r10-24], 0
stdw [%r10-32], 0
stdw [%r10-40], 0
stdw [%r10-48], 0
stdw [%r10-56], 0
stdw [%r10-64], 0
mov %r1, 8388608
lddw %r2, func cb
mov %r3, %r10
add %r3, -8
mov %r4, 0
call 181
ldxdw %r1, [%r10-8]
lsh %r1, 3
mov %r2, %r10
add %r2, -56
add %r2, %r1
ldxdw %r0, [%r2+0]
mov %r0, 2
exit
cb:
mov %r6, %r2
call 7
and %r0, 7
stxdw [%r6+0], %r0
mov %r0, 0
exit
--- good
stdw [%r10-8], 0
stdw [%r10-16], 0
stdw [%r10-24], 0
stdw [%r10-32], 0
stdw [%r10-40], 0
stdw [%r10-48], 0
stdw [%r10-56], 0
stdw [%r10-64], 0
mov %r1, 8388608
lddw %r2, func cb
mov %r3, %r10
add %r3, -8
mov %r4, 0
call 181
ldxdw %r1, [%r10-8]
lsh %r1, 3
mov %r2, %r10
add %r2, -64
add %r2, %r1
ldxdw %r0, [%r2+0]
mov %r0, 2
exit
cb:
mov %r6, %r2
call 7
and %r0, 7
stxdw [%r6+0], %r0
mov %r0, 0
exit
