# a subprogram that calls itself
# expect: bad=reject good=accept
--- bad
call local f
exit
f:
call local f
mov %r0, 0
exit
--- good
call local f
exit
f:
mov %r0, 0
exit
