# reading the kernel's struct bpf_array through a map pointer: only reads,
# inside the struct, at non-negative offsets, and only with CAP_PERFMON
# (the accepted reads are in crates/cli/tests/new_helpers.rs, compiled
# from C with the kernel's offsets)
# maps: array 4 8 4
# (`read` uses max_entries' offset in Linux 6.18's struct bpf_map, 76)
# expect: read=accept negative=reject write=reject beyond=reject store_imm=reject
# expect-unpriv: read=reject negative=reject write=reject beyond=reject store_imm=reject
--- read
lddw %r1, map_idx 0
ldxw %r0, [%r1+76]
mov %r0, 2
exit
--- negative
lddw %r1, map_idx 0
ldxw %r0, [%r1-4]
mov %r0, 2
exit
--- write
lddw %r1, map_idx 0
mov %r2, 7
stxw [%r1+76], %r2
mov %r0, 2
exit
--- beyond
lddw %r1, map_idx 0
ldxw %r0, [%r1+4096]
mov %r0, 2
exit
--- store_imm
lddw %r1, map_idx 0
stw [%r1+76], 1
mov %r0, 2
exit
