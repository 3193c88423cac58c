# the current task's ids are base helpers in 6.18: XDP may call them, with or
# without CAP_PERFMON (a tracing-only helper stays refused)
# expect: uid_gid=accept pid_tgid=accept tracing_only=reject
--- uid_gid
call 15
mov %r0, 2
exit
--- pid_tgid
call 14
mov %r0, 2
exit
--- tracing_only
call 45
mov %r0, 2
exit
