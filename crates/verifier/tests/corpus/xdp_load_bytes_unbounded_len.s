# bpf_xdp_load_bytes with an unbounded length
# expect: bad=reject good=accept
# expect-unpriv: bad=reject good=reject
--- bad
mov %r6, %r1
ldxw %r7, [%r1+16]
mov %r1, %r6
mov %r2, 0
mov %r3, %r10
add %r3, -8
mov %r4, %r7
call 189
mov %r0, 2
exit
--- good
mov %r6, %r1
ldxw %r7, [%r1+16]
mov %r1, %r6
mov %r2, 0
mov %r3, %r10
add %r3, -8
mov %r4, %r7
and %r4, 7
add %r4, 1
call 189
mov %r0, 2
exit
