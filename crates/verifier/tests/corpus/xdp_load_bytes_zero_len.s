# bpf_xdp_load_bytes with a zero length
# expect: bad=reject good=accept
--- bad
mov %r6, %r1
mov %r1, %r6
mov %r2, 0
mov %r3, %r10
add %r3, -8
mov %r4, 0
call 189
mov %r0, 2
exit
--- good
mov %r6, %r1
mov %r1, %r6
mov %r2, 0
mov %r3, %r10
add %r3, -8
mov %r4, 4
call 189
mov %r0, 2
exit
