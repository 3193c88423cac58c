# stack pointer stored into a map value
# maps: array 4 8 4
# expect: bad=accept good=accept
# expect-unpriv: bad=reject good=accept
--- bad
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
stxdw [%r0+0], %r10
out:
mov %r0, 2
exit
--- good
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
stdw [%r0+0], 7
out:
mov %r0, 2
exit
