# load through a map pointer (only helpers take it)
# maps: array 4 8 4
# expect: bad=reject good=accept
--- bad
lddw %r1, map_idx 0
ldxw %r0, [%r1+0]
exit
--- good
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
mov %r0, 2
exit
