# map_lookup_elem result dereferenced without a NULL check
# maps: hash 4 8 16
# expect: bad=reject good=accept
--- bad
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
ldxw %r0, [%r0+0]
exit
--- good
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
ldxw %r0, [%r0+0]
exit
out:
mov %r0, 2
exit
