# scalar passed as the map argument
# maps: array 4 8 4
# expect: bad=reject good=accept
--- bad
stw [%r10-4], 0
mov %r1, 0
mov %r2, %r10
add %r2, -4
call 1
mov %r0, 2
exit
--- good
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
mov %r0, 2
exit
