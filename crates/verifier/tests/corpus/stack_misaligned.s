# 8-byte store at a 4-byte aligned stack offset
# expect: bad=reject good=accept
--- bad
stdw [%r10-12], 0
mov %r0, 2
exit
--- good
stdw [%r10-16], 0
mov %r0, 2
exit
