# `if p <= end goto ok`: only the taken side is proven
# expect: bad=reject good=accept
--- bad
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 14
jle %r4, %r3, ok
ldxb %r0, [%r2+0]
exit
ok:
ldxb %r0, [%r2+14]
out:
mov %r0, 2
exit
--- good
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 14
jle %r4, %r3, ok
mov %r0, 1
exit
ok:
ldxb %r0, [%r2+13]
out:
mov %r0, 2
exit
