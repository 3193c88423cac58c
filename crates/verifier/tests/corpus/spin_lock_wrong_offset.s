# bpf_spin_lock on a map value word that is not the lock
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
add %r1, 4
call 93
mov %r1, %r6
add %r1, 4
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
mov %r1, %r6
call 93
ldxw %r7, [%r6+4]
add %r7, 1
stxw [%r6+4], %r7
mov %r1, %r6
call 94
out:
mov %r0, 2
exit
