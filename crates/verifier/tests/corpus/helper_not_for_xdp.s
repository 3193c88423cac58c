# bpf_get_current_pid_tgid is not available to XDP
# expect: bad=reject good=accept
--- bad
call 14
mov %r0, 2
exit
--- good
call 5
mov %r0, 2
exit
