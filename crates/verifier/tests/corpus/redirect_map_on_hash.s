# bpf_redirect_map on a HASH map
# maps: hash 4 4 4, devmap 4 4 4
# expect: bad=reject good=accept
--- bad
lddw %r1, map_idx 0
mov %r2, 0
mov %r3, 0
call 51
exit
--- good
lddw %r1, map_idx 1
mov %r2, 0
mov %r3, 0
call 51
exit
