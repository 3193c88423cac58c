# 8-byte key at fp-4 runs past the top of the stack
# maps: hash 8 8 16
# expect: bad=reject good=accept
--- bad
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
mov %r0, 2
exit
--- good
stdw [%r10-8], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -8
call 1
mov %r0, 2
exit
