# load through data_end
# expect: bad=reject good=accept
--- bad
ldxw %r3, [%r1+4]
ldxb %r0, [%r3-1]
exit
--- good
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 14
jgt %r4, %r3, out
ldxb %r0, [%r4-1]
out:
mov %r0, 2
exit
