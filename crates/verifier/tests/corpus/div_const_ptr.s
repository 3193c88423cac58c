# an offset computed by a division, even of constants (10 / 2), has no
# range in the kernel: adding it to a map value pointer and loading is
# refused as unbounded; the same offset as a constant is fine
# maps: array 4 64 1
# expect: bad=reject good=accept
--- bad
mov %r6, 10
div %r6, 2
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
mov %r6, 5
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
