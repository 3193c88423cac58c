# variable offset added after the check: the new pointer has no proven range
# expect: bad=reject good=accept
# expect-unpriv: bad=reject good=reject
--- bad
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 14
jgt %r4, %r3, out
ldxb %r5, [%r2+0]
add %r2, %r5
ldxb %r0, [%r2+0]
out:
mov %r0, 2
exit
--- good
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 14
jgt %r4, %r3, out
ldxb %r5, [%r2+0]
add %r2, %r5
mov %r4, %r2
add %r4, 1
jgt %r4, %r3, out
ldxb %r0, [%r2+0]
out:
mov %r0, 2
exit
