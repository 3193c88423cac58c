# load of a stack slot never written (allowed for root: CAP_PERFMON)
# expect: bad=accept good=accept
# expect-unpriv: bad=reject good=accept
--- bad
ldxdw %r0, [%r10-8]
mov %r0, 2
exit
--- good
stdw [%r10-8], 0
ldxdw %r0, [%r10-8]
exit
