# a shift by a register holding 64 (RFC 9669 masks it to 0 at run time):
# the kernel makes the result an unknown scalar, so adding it to a map
# value pointer and loading through it is refused; shifting by 3 gives a
# bounded offset and is accepted
# maps: array 4 64 1
# expect: bad=reject good=accept
--- bad
mov %r6, 1
mov %r7, 64
lsh %r6, %r7
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
add %r0, %r6
ldxb %r0, [%r0+0]
out:
mov %r0, 2
exit
--- good
mov %r6, 1
mov %r7, 3
lsh %r6, %r7
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
add %r0, %r6
ldxb %r0, [%r0+0]
out:
mov %r0, 2
exit
