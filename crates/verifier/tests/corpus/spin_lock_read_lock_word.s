# a load of the lock word, no lock held
# maps: hash 4 8 4 lock=4
# expect: bad=reject good=accept
--- bad
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
mov %r6, %r0
ldxw %r0, [%r6+4]
exit
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
ldxw %r0, [%r6+0]
exit
out:
mov %r0, 2
exit
