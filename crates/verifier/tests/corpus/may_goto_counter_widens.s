# a may_goto loop (what can_loop / cond_break expand to) counts its iterations in r1: when nothing depends on the count, the fall-through path's count, changed since the state at the may_goto one iteration earlier, is widened to unknown and the loop converges at the may_goto (a state still being explored covers the next iteration's, every scalar within its range); used as a stack index after the loop, the count is precise, never widened, and the loop is unrolled until the budget runs out
# expect: bad=reject good=accept
# expect-unpriv: bad=reject good=accept
--- bad
stdw [%r10-8], 0
mov %r1, 0
loop:
may_goto out
add %r1, 1
ja loop
out:
lsh %r1, 3
mov %r2, %r10
add %r2, -8
add %r2, %r1
ldxdw %r0, [%r2+0]
mov %r0, 2
exit
--- good
stdw [%r10-8], 0
mov %r1, 0
loop:
may_goto out
add %r1, 1
ja loop
out:
stxdw [%r10-8], %r1
mov %r0, 2
exit
