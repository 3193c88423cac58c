# tail call while holding a reservation
# maps: ringbuf 0 0 4096, prog_array 4 4 2
# expect: bad=reject good=accept
--- bad
mov %r6, %r1
lddw %r1, map_idx 0
mov %r2, 16
mov %r3, 0
call 131
jeq %r0, 0, out
mov %r7, %r0
mov %r1, %r6
lddw %r2, map_idx 1
mov %r3, 0
call 12
mov %r1, %r7
mov %r2, 0
call 133
out:
mov %r0, 2
exit
--- good
mov %r6, %r1
lddw %r1, map_idx 0
mov %r2, 16
mov %r3, 0
call 131
jeq %r0, 0, out
mov %r1, %r0
mov %r2, 0
call 133
mov %r1, %r6
lddw %r2, map_idx 1
mov %r3, 0
call 12
out:
mov %r0, 2
exit
