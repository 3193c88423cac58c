# array lookup with constant key 4 (max_entries 4) may return NULL; an in-range key cannot
# maps: array 4 8 4
# expect: bad=reject good=accept
--- bad
stw [%r10-8], 4
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -8
call 1
ldxw %r0, [%r0+0]
exit
--- good
stw [%r10-8], 3
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -8
call 1
ldxw %r0, [%r0+0]
exit
