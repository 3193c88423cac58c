# dynptrs across frames: a callee may use, release, initialise a caller's
# dynptr through a stack pointer; a callback's own dynptr must be released
# before it returns; loops over dynptr calls converge (a may_goto loop); a dynptr made on one
# path only is not initialised after the join
# include: dynptr.inc
# maps: ringbuf 0 0 4096
# expect: release_in_subprog=accept read_in_subprog=accept reserve_in_subprog=accept leak_in_subprog=reject overwrite_via_pointer=reject callback_release=accept callback_leak=reject loop_reads=accept one_branch_init=reject
--- release_in_subprog
@reserve
mov %r1, %r10
add %r1, -16
call local f
mov %r0, 2
exit
f:
mov %r2, 0
call 199
mov %r0, 0
exit
--- read_in_subprog
@reserve
mov %r1, %r10
add %r1, -16
call local f
@discard
mov %r0, 2
exit
f:
mov %r3, %r1
mov %r1, %r10
add %r1, -8
mov %r2, 8
mov %r4, 0
mov %r5, 0
call 201
mov %r0, 0
exit
--- reserve_in_subprog
mov %r1, %r10
add %r1, -16
call local f
@submit
mov %r0, 2
exit
f:
mov %r4, %r1
lddw %r1, map_idx 0
mov %r2, 8
mov %r3, 0
call 198
mov %r0, 0
exit
--- leak_in_subprog
call local f
mov %r0, 2
exit
f:
@reserve
mov %r0, 0
exit
--- overwrite_via_pointer
@reserve
mov %r1, %r10
add %r1, -16
call local f
@submit
mov %r0, 2
exit
f:
stdw [%r1+0], 0
mov %r0, 0
exit
--- callback_release
stdw [%r10-8], 0
mov %r1, 4
lddw %r2, func cb
mov %r3, %r10
add %r3, -8
mov %r4, 0
call 181
mov %r0, 2
exit
cb:
@reserve
@discard
mov %r0, 0
exit
--- callback_leak
stdw [%r10-8], 0
mov %r1, 4
lddw %r2, func cb
mov %r3, %r10
add %r3, -8
mov %r4, 0
call 181
mov %r0, 2
exit
cb:
@reserve
mov %r0, 0
exit
--- loop_reads
@reserve
mov %r6, 0
loop:
may_goto done
mov %r1, %r10
add %r1, -24
mov %r2, 8
mov %r3, %r10
add %r3, -16
mov %r4, %r6
mov %r5, 0
call 201
add %r6, 1
ja loop
done:
@submit
mov %r0, 2
exit
--- one_branch_init
ldxw %r6, [%r1+16]
stw [%r10-36], 0
jeq %r6, 0, skip
@reserve
@discard
skip:
mov %r1, %r10
add %r1, -24
mov %r2, 8
mov %r3, %r10
add %r3, -16
mov %r4, 0
mov %r5, 0
call 201
mov %r0, 2
exit
