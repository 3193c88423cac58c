# comparing two unrelated pointers
# expect: bad=accept good=accept
# expect-unpriv: bad=reject good=accept
--- bad
mov %r0, 2
jgt %r1, %r10, out
mov %r0, 1
out:
exit
--- good
mov %r0, 2
ldxw %r2, [%r1+16]
jgt %r2, 3, out
mov %r0, 1
out:
exit
