# packet pointer used after bpf_xdp_adjust_head invalidated it
# expect: bad=reject good=accept
--- bad
mov %r6, %r1
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 14
jgt %r4, %r3, out
mov %r7, %r2
mov %r1, %r6
mov %r2, 0
call 44
ldxb %r0, [%r7+0]
out:
mov %r0, 2
exit
--- good
mov %r6, %r1
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 14
jgt %r4, %r3, out
mov %r1, %r6
mov %r2, 0
call 44
mov %r1, %r6
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 14
jgt %r4, %r3, out
ldxb %r0, [%r2+0]
out:
mov %r0, 2
exit
