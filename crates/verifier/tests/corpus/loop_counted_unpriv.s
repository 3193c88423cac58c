# a counted loop of 4 iterations: fine for root, refused without CAP_PERFMON
# expect: bad=accept good=accept
# expect-unpriv: bad=reject good=accept
--- bad
mov %r0, 0
l:
add %r0, 1
jlt %r0, 4, l
exit
--- good
mov %r0, 0
add %r0, 1
add %r0, 1
add %r0, 1
add %r0, 1
exit
