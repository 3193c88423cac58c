# submitted on one branch, leaked on the other
# maps: ringbuf 0 0 4096
# expect: bad=reject good=accept
--- bad
ldxw %r6, [%r1+16]
lddw %r1, map_idx 0
mov %r2, 16
mov %r3, 0
call 131
jeq %r0, 0, out
jeq %r6, 0, out
mov %r1, %r0
mov %r2, 0
call 132
out:
mov %r0, 2
exit
--- good
ldxw %r6, [%r1+16]
lddw %r1, map_idx 0
mov %r2, 16
mov %r3, 0
call 131
jeq %r0, 0, out
mov %r1, %r0
mov %r2, 0
jeq %r6, 0, disc
call 132
ja out
disc:
call 133
out:
mov %r0, 2
exit
