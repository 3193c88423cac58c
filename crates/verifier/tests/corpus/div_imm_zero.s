# division by an immediate 0 (a register divisor of 0 is legal and yields 0)
# expect: bad=reject good=accept
--- bad
mov %r0, 7
div %r0, 0
exit
--- good
mov %r0, 7
mov %r1, 0
div %r0, %r1
exit
