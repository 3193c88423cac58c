# egress_ifindex is only readable by devmap programs
# expect: bad=reject good=accept
--- bad
ldxw %r0, [%r1+20]
exit
--- good
ldxw %r0, [%r1+12]
exit
