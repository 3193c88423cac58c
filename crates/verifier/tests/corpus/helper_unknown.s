# call of a helper id that does not exist
# expect: bad=reject good=accept
--- bad
call 9999
mov %r0, 2
exit
--- good
call 7
mov %r0, 2
exit
