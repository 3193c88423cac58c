# an atomic add of a pointer into a map value: a privileged loader may
# (the kernel's pointer-leak rules apply only without CAP_PERFMON), an
# unprivileged one may not ("leaks addr into mem"); a scalar is fine for both
# maps: array 4 8 1
# expect: ptr=accept scalar=accept
# expect-unpriv: ptr=reject scalar=accept
--- ptr
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
mov %r3, %r10
lock add [%r0+0], %r3
out:
mov %r0, 2
exit
--- scalar
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
mov %r3, 1
lock add [%r0+0], %r3
out:
mov %r0, 2
exit
