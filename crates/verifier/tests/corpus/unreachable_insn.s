# dead instruction after exit that no jump reaches
# expect: bad=reject good=accept
--- bad
mov %r0, 2
exit
mov %r0, 1
exit
--- good
mov %r0, 2
exit
