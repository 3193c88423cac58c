# may_goto is an ordinary instruction of the walk: a path that goes round its loop must be safe on every iteration the budget allows; a pointer advanced once per iteration leaves the stack after a few (the jump path at the may_goto is the loop's only exit), while a pointer reset every iteration stays inside
# expect: bad=reject good=accept
# expect-unpriv: bad=reject good=accept
--- bad
mov %r2, %r10
add %r2, -16
loop:
may_goto out
stb [%r2+0], 1
add %r2, 1
ja loop
out:
mov %r0, 2
exit
--- good
mov %r3, 0
loop:
may_goto out
mov %r2, %r10
add %r2, -16
stb [%r2+0], 1
add %r3, 1
ja loop
out:
mov %r0, 2
exit
