# exit without setting r0
# expect: bad=reject good=accept
--- bad
mov %r2, 1
exit
--- good
mov %r0, 1
exit
