# context pointer moved before the load
# expect: bad=reject good=accept
--- bad
add %r1, 4
ldxw %r2, [%r1+0]
mov %r0, 2
exit
--- good
ldxw %r2, [%r1+4]
mov %r0, 2
exit
