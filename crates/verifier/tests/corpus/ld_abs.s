# legacy packet load (ld_abs) is for socket filters only
# expect: bad=reject good=accept
--- bad
mov %r6, %r1
ldabsb 0
mov %r0, 2
exit
--- good
mov %r0, 2
exit
