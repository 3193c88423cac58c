# bpf_xdp_load_bytes of 16 bytes into an 8-byte stack buffer at fp-8
# expect: bad=reject good=accept
--- bad
mov %r6, %r1
mov %r1, %r6
mov %r2, 0
mov %r3, %r10
add %r3, -8
mov %r4, 16
call 189
mov %r0, 2
exit
--- good
mov %r6, %r1
mov %r1, %r6
mov %r2, 0
mov %r3, %r10
add %r3, -8
mov %r4, 8
call 189
mov %r0, 2
exit
