# 32-bit arithmetic on a pointer
# expect: bad=reject good=accept
--- bad
add32 %r1, 4
mov %r0, 2
exit
--- good
add %r1, 4
mov %r0, 2
exit
