# bpf_csum_diff reads stack bytes never written
# expect: bad=accept good=accept
# expect-unpriv: bad=reject good=accept
--- bad
mov %r1, %r10
add %r1, -8
mov %r2, 8
mov %r3, 0
mov %r4, 0
mov %r5, 0
call 28
mov %r0, 2
exit
--- good
stdw [%r10-8], 0
mov %r1, %r10
add %r1, -8
mov %r2, 8
mov %r3, 0
mov %r4, 0
mov %r5, 0
call 28
mov %r0, 2
exit
