# a 32-bit difference of packet pointers (data_end - data) bounded by
# 32-bit compares, then used as a 64-bit helper size: the kernel makes the
# difference a fully unknown register (its upper half too), so the size may
# be negative and the call is refused; the 32-bit copy (w4 = w7) zero-extends
# and is accepted (without CAP_PERFMON pointer subtraction is refused by both)
# expect: bad=reject good=accept
# expect-unpriv: bad=reject good=reject
--- bad
ldxw %r8, [%r1+0]
ldxw %r7, [%r1+4]
sub32 %r7, %r8
jeq32 %r7, 0, out
jgt32 %r7, 16, out
stdw [%r10-16], 0
stdw [%r10-8], 0
mov %r3, %r10
add %r3, -16
mov32 %r2, 0
mov %r4, %r7
call 189
out:
mov %r0, 2
exit
--- good
ldxw %r8, [%r1+0]
ldxw %r7, [%r1+4]
sub32 %r7, %r8
jeq32 %r7, 0, out
jgt32 %r7, 16, out
stdw [%r10-16], 0
stdw [%r10-8], 0
mov %r3, %r10
add %r3, -16
mov32 %r2, 0
mov32 %r4, %r7
call 189
out:
mov %r0, 2
exit
