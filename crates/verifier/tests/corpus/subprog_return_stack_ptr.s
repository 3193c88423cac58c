# subprogram returns a pointer to its own stack
# expect: bad=reject good=accept
--- bad
call local f
mov %r0, 2
exit
f:
stdw [%r10-8], 0
mov %r0, %r10
add %r0, -8
exit
--- good
call local f
exit
f:
stdw [%r10-8], 0
ldxdw %r0, [%r10-8]
exit
