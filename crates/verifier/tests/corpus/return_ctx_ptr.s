# returning a pointer (the context) from the program
# expect: bad=reject good=accept
--- bad
mov %r0, %r1
exit
--- good
mov %r0, 2
exit
