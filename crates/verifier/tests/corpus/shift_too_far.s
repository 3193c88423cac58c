# 64-bit shift by 64
# expect: bad=reject good=accept
--- bad
mov %r0, 1
lsh %r0, 64
exit
--- good
mov %r0, 1
lsh %r0, 63
exit
