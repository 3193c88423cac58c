# a loop that never changes state
# expect: bad=reject good=accept
# expect-unpriv: bad=reject good=reject
--- bad
mov %r0, 2
l:
ja l
exit
--- good
mov %r0, 2
mov %r1, 0
l:
add %r1, 1
jlt %r1, 16, l
exit
