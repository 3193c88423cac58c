# store into a frozen read-only map (.rodata)
# maps: rodata 4 8 1
# expect: bad=reject good=accept
--- bad
lddw %r1, map_idx_value 0, 0
stw [%r1+0], 1
mov %r0, 2
exit
--- good
lddw %r1, map_idx_value 0, 0
ldxw %r0, [%r1+0]
exit
