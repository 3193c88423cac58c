# signed index in [-4, 3] may point before the value
# maps: array 4 8 4
# expect: bad=reject good=accept
--- bad
ldxw %r6, [%r1+16]
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
lsh %r6, 32
arsh %r6, 32
jsgt %r6, 3, out
jslt %r6, -4, out
add %r0, %r6
ldxb %r0, [%r0+0]
exit
out:
mov %r0, 2
exit
--- good
ldxw %r6, [%r1+16]
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
jgt %r6, 3, out
add %r0, %r6
ldxb %r0, [%r0+0]
exit
out:
mov %r0, 2
exit
