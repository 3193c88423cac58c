# store-release (BPF_ATOMIC, imm 0x110, kernel 6.15+): every size into the
# stack and a map value; never into the context or a packet, always
# naturally aligned; a pointer may be spilled to the stack with it and
# filled back, and stored into a map only by a privileged loader
# maps: array 4 8 1
# expect: stack=accept map=accept spill=accept ptr_into_map=accept ctx=reject pkt=reject misaligned=reject
# expect-unpriv: stack=accept map=accept spill=accept ptr_into_map=reject ctx=reject pkt=reject misaligned=reject
--- stack
mov %r1, 0x12
strelb [%r10-1], %r1
strelh [%r10-4], %r1
strelw [%r10-8], %r1
streldw [%r10-16], %r1
ldxdw %r0, [%r10-16]
mov %r0, 2
exit
--- map
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
mov %r1, 5
strelb [%r0+7], %r1
strelh [%r0+6], %r1
strelw [%r0+0], %r1
streldw [%r0+0], %r1
out:
mov %r0, 2
exit
--- spill
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
streldw [%r10-16], %r0
ldxdw %r3, [%r10-16]
ldxdw %r0, [%r3+0]
out:
mov %r0, 2
exit
--- ptr_into_map
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
mov %r3, %r10
streldw [%r0+0], %r3
out:
mov %r0, 2
exit
--- ctx
mov %r2, 0
strelw [%r1+0], %r2
mov %r0, 2
exit
--- pkt
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 8
jgt %r4, %r3, out
mov %r5, 0
strelw [%r2+0], %r5
out:
mov %r0, 2
exit
--- misaligned
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
mov %r1, 5
strelh [%r0+3], %r1
out:
mov %r0, 2
exit
