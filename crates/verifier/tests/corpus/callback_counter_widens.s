# a bpf_loop callback of up to 2^23 calls counts its calls in ctx: when nothing depends on the count, the count that changed since the previous iteration is widened to unknown at the call (the kernel's widen_imprecise_scalars) and the iterations converge after a few; used as an index after the loop, the count is precise, never widened, and the 2^23 iterations exceed the budget
# expect: bad=reject good=accept
# expect-unpriv: bad=reject good=accept
--- bad
stdw [%r10-8], 0
stdw [%r10-16], 0
stdw [%r10-24], 0
mov %r1, 8388608
lddw %r2, func cb
mov %r3, %r10
add %r3, -8
mov %r4, 0
call 181
ldxdw %r1, [%r10-8]
lsh %r1, 3
mov %r2, %r10
add %r2, -24
add %r2, %r1
ldxdw %r0, [%r2+0]
mov %r0, 2
exit
cb:
ldxdw %r3, [%r2+0]
add %r3, 1
stxdw [%r2+0], %r3
mov %r0, 0
exit
--- good
stdw [%r10-8], 0
stdw [%r10-16], 0
stdw [%r10-24], 0
mov %r1, 8388608
lddw %r2, func cb
mov %r3, %r10
add %r3, -8
mov %r4, 0
call 181
ldxdw %r1, [%r10-8]
stxdw [%r10-16], %r1
mov %r0, 2
exit
cb:
ldxdw %r3, [%r2+0]
add %r3, 1
stxdw [%r2+0], %r3
mov %r0, 0
exit
