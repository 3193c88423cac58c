# bpf_get_current_comm is a base helper of a CAP_PERFMON loader in 6.18, XDP included; its buffer must fit the stack (without CAP_PERFMON the kernel does not know the helper for XDP)
# expect: comm=accept comm_oob=reject
# expect-unpriv: comm=reject comm_oob=reject
--- comm
stdw [%r10-16], 0
stdw [%r10-8], 0
mov %r1, %r10
add %r1, -16
mov %r2, 16
call 16
mov %r0, 2
exit
--- comm_oob
stdw [%r10-16], 0
stdw [%r10-8], 0
mov %r1, %r10
add %r1, -16
mov %r2, 24
call 16
mov %r0, 2
exit
