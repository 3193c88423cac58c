# a static subprogram called with the lock held calls a helper
# maps: array 4 8 1 lock=0
# expect: bad=reject good=accept
--- bad
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
call 93
call local f
stxw [%r6+4], %r0
mov %r1, %r6
call 94
out:
mov %r0, 2
exit
f:
call 5
exit
--- good
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
call 93
call local f
stxw [%r6+4], %r0
mov %r1, %r6
call 94
out:
mov %r0, 2
exit
f:
mov %r0, 7
exit
