# store below the 512-byte stack
# expect: bad=reject good=accept
--- bad
stdw [%r10-520], 0
mov %r0, 2
exit
--- good
stdw [%r10-512], 0
mov %r0, 2
exit
