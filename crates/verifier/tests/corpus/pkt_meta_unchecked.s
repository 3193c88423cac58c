# data_meta read without comparing it against data
# expect: bad=reject good=accept
--- bad
ldxw %r2, [%r1+8]
ldxw %r3, [%r1+0]
ldxb %r0, [%r2+0]
exit
--- good
ldxw %r2, [%r1+8]
ldxw %r3, [%r1+0]
mov %r4, %r2
add %r4, 4
jgt %r4, %r3, out
ldxb %r0, [%r2+0]
out:
mov %r0, 2
exit
