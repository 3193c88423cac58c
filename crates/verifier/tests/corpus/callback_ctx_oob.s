# bpf_loop callback writes past the caller's 8-byte context
# expect: bad=reject good=accept
--- bad
stdw [%r10-8], 0
mov %r1, 4
lddw %r2, func cb
mov %r3, %r10
add %r3, -8
mov %r4, 0
call 181
mov %r0, 2
exit
cb:
stdw [%r2+8], 1
mov %r0, 0
exit
--- good
stdw [%r10-8], 0
mov %r1, 4
lddw %r2, func cb
mov %r3, %r10
add %r3, -8
mov %r4, 0
call 181
mov %r0, 2
exit
cb:
stdw [%r2+0], 1
mov %r0, 0
exit
