# returning a pointer (the context) from the program: root may, it leaks the address otherwise
# expect: bad=accept good=accept
# expect-unpriv: bad=reject good=accept
--- bad
mov %r0, %r1
exit
--- good
mov %r0, 2
exit
