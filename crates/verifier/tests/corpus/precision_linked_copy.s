# a bound learned through a copy (same id) applies to the original only while they are linked: the link must be part of the precise state
# maps: array 4 8 1
# expect: bad=reject good=accept
--- bad
call 7
mov %r7, %r0
call 7
mov %r6, %r0
mov %r8, %r7
stw [%r10-4], 0
jeq %r6, 0, unlink
ja join
unlink:
mov %r8, %r6
join:
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
jge %r8, 8, out
add %r0, %r7
ldxb %r0, [%r0+0]
exit
out:
mov %r0, 2
exit
--- good
call 7
mov %r7, %r0
call 7
mov %r6, %r0
mov %r8, %r7
stw [%r10-4], 0
jeq %r6, 0, unlink
ja join
unlink:
mov %r8, %r7
join:
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
jge %r8, 8, out
add %r0, %r7
ldxb %r0, [%r0+0]
exit
out:
mov %r0, 2
exit
