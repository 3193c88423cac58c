# the dynptr helpers take no packet pointers ("helper access to the packet
# is not allowed": their prototypes have no pkt_access), where a map helper
# does; a bounds-checked packet pointer as bpf_dynptr_write's source, as
# bpf_dynptr_read's destination, or as bpf_map_update_elem's value
# include: dynptr.inc
# maps: array 4 16 1
# expect: write_pkt_src=reject read_into_pkt=reject map_update_pkt_value=accept
--- @pkt8
ldxw %r7, [%r1+0]
ldxw %r8, [%r1+4]
mov %r2, %r7
add %r2, 16
jgt %r2, %r8, out
--- write_pkt_src
@pkt8
@value
@local
mov %r1, %r10
add %r1, -16
mov %r2, 0
mov %r3, %r7
mov %r4, 8
mov %r5, 0
call 202
@out
--- read_into_pkt
@pkt8
@value
@local
mov %r1, %r7
mov %r2, 8
mov %r3, %r10
add %r3, -16
mov %r4, 0
mov %r5, 0
call 201
@out
--- map_update_pkt_value
@pkt8
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
mov %r3, %r7
mov %r4, 0
call 2
@out
