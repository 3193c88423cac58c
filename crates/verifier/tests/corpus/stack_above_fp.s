# store at or above r10
# expect: bad=reject good=accept
--- bad
stdw [%r10+0], 0
mov %r0, 2
exit
--- good
stdw [%r10-8], 0
mov %r0, 2
exit
