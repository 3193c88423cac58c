# partial overwrite of a spilled ctx pointer, then using it as ctx
# expect: bad=reject good=accept
--- bad
stxdw [%r10-8], %r1
stw [%r10-8], 0
ldxdw %r1, [%r10-8]
ldxw %r0, [%r1+0]
mov %r0, 2
exit
--- good
stxdw [%r10-8], %r1
stw [%r10-16], 0
ldxdw %r1, [%r10-8]
ldxw %r0, [%r1+0]
mov %r0, 2
exit
