# bpf_ringbuf_reserve_dynptr (198) acquires a reference even when it
# fails: every path must submit (199) or discard (200) the dynptr; a
# referenced dynptr may not be overwritten (by the program or a helper), and
# it and its slices are gone after its release
# include: dynptr.inc
# maps: ringbuf 0 0 4096, array 4 16 1
# expect: ok=accept discard=accept leak=reject leak_on_failure=reject release_on_failure=accept overwrite=reject overwrite_second_slot=reject helper_overwrite=reject submit_local=reject use_after_submit=reject submit_twice=reject reinit_over_ringbuf=reject on_array=reject write_then_submit=accept var_size=accept read_then_submit=accept two_dynptrs=accept two_dynptrs_one_leaked=reject slice_write=accept slice_oob=reject slice_after_submit=reject slice_after_discard_unused=accept slice_as_release_arg=reject submit_ptr_in_dynptr_arg=reject ringbuf_ptr_as_dynptr=reject flags_nonzero=accept
# expect-unpriv: ok=accept discard=accept leak=reject leak_on_failure=reject release_on_failure=accept overwrite=reject overwrite_second_slot=reject helper_overwrite=reject submit_local=reject use_after_submit=reject submit_twice=reject reinit_over_ringbuf=reject on_array=reject write_then_submit=accept var_size=accept read_then_submit=accept two_dynptrs=accept two_dynptrs_one_leaked=reject slice_write=accept slice_oob=reject slice_after_submit=reject slice_after_discard_unused=reject slice_as_release_arg=reject submit_ptr_in_dynptr_arg=reject ringbuf_ptr_as_dynptr=reject flags_nonzero=accept
--- @value1
stw [%r10-36], 0
lddw %r1, map_idx 1
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
--- ok
@reserve
@submit
@out
--- discard
@reserve
@discard
@out
--- leak
@reserve
@out
--- leak_on_failure
@reserve
jne %r0, 0, out
@submit
@out
--- release_on_failure
@reserve
@discard
@out
--- overwrite
@reserve
stdw [%r10-16], 0
@submit
@out
--- overwrite_second_slot
@reserve
stdw [%r10-8], 0
@submit
@out
--- helper_overwrite
@reserve
mov %r1, %r10
add %r1, -16
mov %r2, 8
mov %r3, %r10
add %r3, -16
mov %r4, 0
mov %r5, 0
call 201
@submit
@out
--- submit_local
@value1
@local
@submit
@out
--- use_after_submit
@reserve
@submit
@read
@out
--- submit_twice
@reserve
@submit
@submit
@out
--- reinit_over_ringbuf
@value1
@reserve
@local
@submit
@out
--- on_array
lddw %r1, map_idx 1
mov %r2, 16
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 198
@discard
@out
--- write_then_submit
@reserve
stdw [%r10-24], 9
mov %r1, %r10
add %r1, -16
mov %r2, 8
mov %r3, %r10
add %r3, -24
mov %r4, 8
mov %r5, 0
call 202
@submit
@out
--- var_size
ldxw %r7, [%r1+16]
lddw %r1, map_idx 0
mov %r2, %r7
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 198
@discard
@out
--- read_then_submit
@reserve
@read
@submit
@out
--- two_dynptrs
@reserve
lddw %r1, map_idx 0
mov %r2, 16
mov %r3, 0
mov %r4, %r10
add %r4, -48
call 198
mov %r1, %r10
add %r1, -48
mov %r2, 0
call 199
@submit
@out
--- two_dynptrs_one_leaked
@reserve
lddw %r1, map_idx 0
mov %r2, 16
mov %r3, 0
mov %r4, %r10
add %r4, -48
call 198
mov %r1, %r10
add %r1, -48
mov %r2, 0
call 199
@out
--- slice_write
@reserve
mov %r1, %r10
add %r1, -16
mov %r2, 0
mov %r3, 16
call 203
jeq %r0, 0, sub
stdw [%r0+8], 5
sub:
@submit
@out
--- slice_oob
@reserve
mov %r1, %r10
add %r1, -16
mov %r2, 0
mov %r3, 16
call 203
jeq %r0, 0, sub
stdw [%r0+9], 5
sub:
@submit
@out
--- slice_after_submit
@reserve
mov %r1, %r10
add %r1, -16
mov %r2, 0
mov %r3, 16
call 203
mov %r6, %r0
@submit
jeq %r6, 0, out
ldxb %r1, [%r6+0]
@out
--- slice_after_discard_unused
@reserve
mov %r1, %r10
add %r1, -16
mov %r2, 0
mov %r3, 16
call 203
mov %r6, %r0
@discard
jeq %r6, 0, out
@out
--- slice_as_release_arg
@reserve
mov %r1, %r10
add %r1, -16
mov %r2, 0
mov %r3, 16
call 203
jeq %r0, 0, sub
mov %r1, %r0
mov %r2, 0
call 132
sub:
@submit
@out
--- submit_ptr_in_dynptr_arg
@reserve
mov %r1, %r10
add %r1, -16
mov %r2, 0
call 132
@out
--- ringbuf_ptr_as_dynptr
lddw %r1, map_idx 0
mov %r2, 16
mov %r3, 0
call 131
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
mov %r2, 0
call 199
@out
--- flags_nonzero
lddw %r1, map_idx 0
mov %r2, 16
mov %r3, 1
mov %r4, %r10
add %r4, -16
call 198
@discard
@out
