# writing the read-only frame pointer r10
# expect: bad=reject good=accept
--- bad hex
b7 0a 00 00 00 00 00 00
b7 00 00 00 02 00 00 00
95 00 00 00 00 00 00 00
--- good hex
b7 01 00 00 00 00 00 00
b7 00 00 00 02 00 00 00
95 00 00 00 00 00 00 00
