# one load reads the context on one path and the packet on another: the
# kernel refuses ("same insn cannot be used with different pointers"),
# because the context load is rewritten for every path; split into two
# loads it is fine, and so is one load through packet and stack pointers
# (only the context must not mix)
# expect: ctxpkt=reject split=accept pktstack=accept
--- ctxpkt
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 32
jgt %r4, %r3, out
ldxb %r5, [%r2+0]
mov %r6, %r1
jeq %r5, 0, use
mov %r6, %r2
use:
ldxw %r0, [%r6+4]
out:
mov %r0, 2
exit
--- split
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 32
jgt %r4, %r3, out
ldxb %r5, [%r2+0]
jeq %r5, 0, use
ldxw %r0, [%r2+4]
ja out
use:
ldxw %r0, [%r1+4]
out:
mov %r0, 2
exit
--- pktstack
stdw [%r10-8], 0
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 32
jgt %r4, %r3, out
ldxb %r5, [%r2+0]
mov %r6, %r10
add %r6, -8
jeq %r5, 0, use
mov %r6, %r2
use:
ldxw %r0, [%r6+4]
out:
mov %r0, 2
exit
