# bitwise operation on a pointer
# expect: bad=reject good=accept
--- bad
and %r1, 255
mov %r0, 2
exit
--- good
mov %r2, %r1
add %r2, 8
mov %r0, 2
exit
