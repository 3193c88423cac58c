# read of a register never written
# expect: bad=reject good=accept
--- bad
mov %r0, %r5
exit
--- good
mov %r5, 2
mov %r0, %r5
exit
