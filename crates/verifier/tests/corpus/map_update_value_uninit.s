# update with a 16-byte value whose first 8 bytes were never written
# maps: hash 4 16 16
# expect: bad=accept good=accept
# expect-unpriv: bad=reject good=accept
--- bad
stw [%r10-4], 0
stdw [%r10-16], 1
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
mov %r3, %r10
add %r3, -24
mov %r4, 0
call 2
mov %r0, 2
exit
--- good
stw [%r10-4], 0
stdw [%r10-16], 1
stdw [%r10-24], 2
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
mov %r3, %r10
add %r3, -24
mov %r4, 0
call 2
mov %r0, 2
exit
