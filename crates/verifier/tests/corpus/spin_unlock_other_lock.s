# unlocking the lock of another map's value
# maps: array 4 8 1 lock=0, array 4 8 1 lock=0
# expect: bad=reject good=accept
--- bad
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r8, %r6
stw [%r10-4], 0
lddw %r1, map_idx 1
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r8
call 93
mov %r1, %r6
call 94
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
mov %r6, %r0
mov %r8, %r6
stw [%r10-4], 0
lddw %r1, map_idx 1
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r8
call 93
mov %r1, %r8
call 94
out:
mov %r0, 2
exit
