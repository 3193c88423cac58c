# `if p >= end goto out`: the fall-through proves p < end, so 15 bytes
# expect: bad=reject good=accept
--- bad
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 14
jge %r4, %r3, out
ldxb %r0, [%r2+15]
out:
mov %r0, 2
exit
--- good
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 14
jge %r4, %r3, out
ldxb %r0, [%r2+14]
out:
mov %r0, 2
exit
