# an atomic add must be naturally aligned also in a map value, where plain
# accesses need not be (the kernel checks atomics with strict alignment)
# maps: array 4 8 1
# expect: bad=reject good=accept
# expect-unpriv: bad=reject good=accept
--- bad
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
mov %r1, 1
lock add32 [%r0+2], %r1
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
mov %r1, 1
lock add32 [%r0+4], %r1
out:
mov %r0, 2
exit
