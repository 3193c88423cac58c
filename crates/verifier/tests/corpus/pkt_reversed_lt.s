# `if end < p goto out` (reversed operands): fall-through proves p <= end
# expect: bad=reject good=accept
--- bad
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 14
jlt %r3, %r4, out
ldxb %r0, [%r2+14]
out:
mov %r0, 2
exit
--- good
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 14
jlt %r3, %r4, out
ldxb %r0, [%r2+13]
out:
mov %r0, 2
exit
