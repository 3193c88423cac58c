# jump past the end of the program
# expect: bad=reject good=accept
--- bad hex
05 00 05 00 00 00 00 00
b7 00 00 00 02 00 00 00
95 00 00 00 00 00 00 00
--- good hex
05 00 00 00 00 00 00 00
b7 00 00 00 02 00 00 00
95 00 00 00 00 00 00 00
