# store into the XDP context
# expect: bad=reject good=accept
--- bad
stw [%r1+0], 0
mov %r0, 2
exit
--- good
ldxw %r2, [%r1+0]
mov %r0, 2
exit
