# the released reservation is submitted again
# maps: ringbuf 0 0 4096
# expect: bad=reject good=accept
--- bad
lddw %r1, map_idx 0
mov %r2, 16
mov %r3, 0
call 131
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
mov %r2, 0
call 132
mov %r1, %r6
mov %r2, 0
call 132
out:
mov %r0, 2
exit
--- good
lddw %r1, map_idx 0
mov %r2, 16
mov %r3, 0
call 131
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
mov %r2, 0
call 132
out:
mov %r0, 2
exit
