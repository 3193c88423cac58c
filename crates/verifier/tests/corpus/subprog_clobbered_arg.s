# r1 is clobbered by a call; r6 is preserved
# expect: bad=reject good=accept
--- bad
mov %r6, 2
mov %r1, 2
call local f
mov %r0, %r1
exit
f:
mov %r0, 0
exit
--- good
mov %r6, 2
mov %r1, 2
call local f
mov %r0, %r6
exit
f:
mov %r0, 0
exit
