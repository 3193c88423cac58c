# pointer passed where the helper takes a plain number
# expect: bad=accept good=accept
# expect-unpriv: bad=reject good=accept
--- bad
mov %r2, 0
call 23
mov %r0, 2
exit
--- good
mov %r1, 1
mov %r2, 0
call 23
mov %r0, 2
exit
