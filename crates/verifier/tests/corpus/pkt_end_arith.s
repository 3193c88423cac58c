# arithmetic on data_end
# expect: bad=reject good=accept
--- bad
ldxw %r3, [%r1+4]
add %r3, -1
mov %r0, 2
exit
--- good
ldxw %r3, [%r1+4]
mov %r0, 2
exit
