# bpf_tail_call on an ARRAY instead of a PROG_ARRAY
# maps: array 4 8 4, prog_array 4 4 2
# expect: bad=reject good=accept
--- bad
lddw %r2, map_idx 0
mov %r3, 0
call 12
mov %r0, 2
exit
--- good
lddw %r2, map_idx 1
mov %r3, 0
call 12
mov %r0, 2
exit
