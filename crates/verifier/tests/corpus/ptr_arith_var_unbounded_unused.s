# a pointer plus a scalar that may reach 2^32: the kernel checks only the
# scalar's minimum at the arithmetic and refuses the pointer where it is used
# (dereference, helper argument, packet range); unused, it is legal
# maps: array 4 8 4
# expect: map_unused=accept stack_unused=accept pkt_unused=accept map_to_helper=reject pkt_checked=reject sub_unbounded=reject
# expect-unpriv: map_unused=reject stack_unused=reject pkt_unused=reject map_to_helper=reject pkt_checked=reject sub_unbounded=reject
--- map_unused
ldxw %r6, [%r1+16]
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
add %r0, %r6
add %r0, 4
out:
mov %r0, 2
exit
--- stack_unused
ldxw %r6, [%r1+16]
mov %r2, %r10
add %r2, -64
add %r2, %r6
mov %r0, 2
exit
--- pkt_unused
ldxw %r6, [%r1+16]
ldxw %r2, [%r1+0]
add %r2, %r6
add %r2, 14
mov %r0, 2
exit
--- map_to_helper
ldxw %r6, [%r1+16]
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
add %r0, %r6
mov %r2, %r0
lddw %r1, map_idx 0
call 1
out:
mov %r0, 2
exit
--- pkt_checked
ldxw %r6, [%r1+16]
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
add %r2, %r6
mov %r4, %r2
add %r4, 1
jgt %r4, %r3, out
ldxb %r0, [%r2+0]
out:
mov %r0, 2
exit
--- sub_unbounded
ldxw %r6, [%r1+16]
mov %r2, %r10
add %r2, -64
sub %r2, %r6
mov %r0, 2
exit
