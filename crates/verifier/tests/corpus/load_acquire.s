# load-acquire (BPF_ATOMIC, imm 0x100, kernel 6.15+): every size from the
# stack and a map value, zero-extended as a plain load (the value read back
# through the stack keeps its bound); never from the context or a packet,
# and always naturally aligned, also where plain loads need not be
# maps: array 4 8 1
# expect: stack=accept map=accept bound=accept ctx=reject pkt=reject misaligned_map=reject misaligned_stack=reject
# expect-unpriv: stack=accept map=accept bound=accept ctx=reject pkt=reject misaligned_map=reject misaligned_stack=reject
--- stack
mov %r1, 0x12
stxdw [%r10-8], %r1
ldacqb %r2, [%r10-1]
ldacqh %r3, [%r10-2]
ldacqw %r4, [%r10-4]
ldacqdw %r5, [%r10-8]
mov %r0, 2
exit
--- map
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
ldacqb %r2, [%r0+7]
ldacqh %r3, [%r0+6]
ldacqw %r4, [%r0+4]
ldacqdw %r5, [%r0+0]
out:
mov %r0, 2
exit
--- bound
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, 7
stxdw [%r10-8], %r1
ldacqdw %r2, [%r10-8]
add %r6, %r2
ldxb %r0, [%r6+0]
out:
mov %r0, 2
exit
--- ctx
ldacqw %r0, [%r1+0]
mov %r0, 2
exit
--- pkt
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 8
jgt %r4, %r3, out
ldacqw %r0, [%r2+0]
out:
mov %r0, 2
exit
--- misaligned_map
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
ldacqw %r4, [%r0+2]
out:
mov %r0, 2
exit
--- misaligned_stack
stdw [%r10-8], 0
ldacqh %r2, [%r10-7]
mov %r0, 2
exit
