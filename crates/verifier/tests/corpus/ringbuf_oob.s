# store past the 16 reserved bytes
# maps: ringbuf 0 0 4096
# expect: bad=reject good=accept
--- bad
lddw %r1, map_idx 0
mov %r2, 16
mov %r3, 0
call 131
jeq %r0, 0, out
stdw [%r0+16], 1
mov %r1, %r0
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
stdw [%r0+8], 1
mov %r1, %r0
mov %r2, 0
call 132
out:
mov %r0, 2
exit
