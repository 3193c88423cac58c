# reservation size not a constant
# maps: ringbuf 0 0 4096
# expect: bad=reject good=accept
--- bad
ldxw %r6, [%r1+16]
and %r6, 15
lddw %r1, map_idx 0
mov %r2, %r6
mov %r3, 0
call 131
jeq %r0, 0, out
mov %r1, %r0
mov %r2, 0
call 133
out:
mov %r0, 2
exit
--- good
lddw %r1, map_idx 0
mov %r2, 16
mov %r3, 0
call 131
jeq %r0, 0, out
mov %r1, %r0
mov %r2, 0
call 133
out:
mov %r0, 2
exit
