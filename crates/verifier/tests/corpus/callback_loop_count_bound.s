# bpf_loop runs its callback at most its count's upper bound times: the callback counts its calls in ctx and reads outside its frame on the third one only; with a count of 2 that call never happens (the kernel stops entering the callback at the bound), with 3 it does
# expect: bad=reject good=accept
--- bad
stdw [%r10-8], 0
mov %r1, 3
lddw %r2, func cb
mov %r3, %r10
add %r3, -8
mov %r4, 0
call 181
mov %r0, 2
exit
cb:
ldxdw %r3, [%r2+0]
jne %r3, 2, ok
ldxdw %r0, [%r10+8]
ok:
add %r3, 1
stxdw [%r2+0], %r3
mov %r0, 0
exit
--- good
stdw [%r10-8], 0
mov %r1, 2
lddw %r2, func cb
mov %r3, %r10
add %r3, -8
mov %r4, 0
call 181
mov %r0, 2
exit
cb:
ldxdw %r3, [%r2+0]
jne %r3, 2, ok
ldxdw %r0, [%r10+8]
ok:
add %r3, 1
stxdw [%r2+0], %r3
mov %r0, 0
exit
