# bpf_map_lookup_elem on a PROG_ARRAY
# maps: prog_array 4 4 2
# expect: bad=reject good=reject
--- bad
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
mov %r0, 2
exit
--- good
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
mov %r0, 2
exit
