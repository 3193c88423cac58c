# bpf_dynptr_data (203): a slice of a constant size, NULL when out of
# range; it dies with its dynptr (overwritten or initialised again), copies
# included; bpf_dynptr_write (202) reads initialised memory
# include: dynptr.inc
# maps: array 4 16 1
# expect: ok=accept oob=reject no_null_check=reject var_len=reject var_off=accept after_overwrite=reject after_reinit=reject copy_survives_other=accept zero_len=accept zero_len_deref=reject uninit=reject write_from_stack=accept write_uninit_src=accept slice_ptr_arith=accept slice_ptr_arith_oob=reject slice_to_helper=accept slice_spilled=reject
# expect-unpriv: ok=accept oob=reject no_null_check=reject var_len=reject var_off=accept after_overwrite=reject after_reinit=reject copy_survives_other=accept zero_len=accept zero_len_deref=reject uninit=reject write_from_stack=accept write_uninit_src=reject slice_ptr_arith=accept slice_ptr_arith_oob=reject slice_to_helper=accept slice_spilled=reject
--- ok
@value
@local
@data8
jeq %r0, 0, out
stb [%r0+0], 1
ldxb %r1, [%r0+7]
@out
--- oob
@value
@local
@data8
jeq %r0, 0, out
ldxb %r1, [%r0+8]
@out
--- no_null_check
@value
@local
@data8
ldxb %r1, [%r0+0]
@out
--- var_len
@value
ldxw %r7, [%r6+0]
and %r7, 7
@local
mov %r1, %r10
add %r1, -16
mov %r2, 0
mov %r3, %r7
call 203
jeq %r0, 0, out
ldxb %r1, [%r0+0]
@out
--- var_off
@value
ldxw %r7, [%r6+0]
@local
mov %r1, %r10
add %r1, -16
mov %r2, %r7
mov %r3, 8
call 203
jeq %r0, 0, out
ldxb %r1, [%r0+7]
@out
--- after_overwrite
@value
@local
@data8
jeq %r0, 0, out
stdw [%r10-16], 0
ldxb %r1, [%r0+0]
@out
--- after_reinit
@value
@local
@data8
jeq %r0, 0, out
mov %r9, %r0
@local
ldxb %r1, [%r9+0]
@out
--- copy_survives_other
@value
@local
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -48
call 197
@data8
jeq %r0, 0, out
mov %r9, %r0
stdw [%r10-48], 0
ldxb %r1, [%r9+0]
@out
--- zero_len
@value
@local
mov %r1, %r10
add %r1, -16
mov %r2, 0
mov %r3, 0
call 203
@out
--- zero_len_deref
@value
@local
mov %r1, %r10
add %r1, -16
mov %r2, 0
mov %r3, 0
call 203
jeq %r0, 0, out
ldxb %r1, [%r0+0]
@out
--- uninit
@value
@data8
@out
--- write_from_stack
@value
@local
stdw [%r10-32], 3
mov %r1, %r10
add %r1, -16
mov %r2, 0
mov %r3, %r10
add %r3, -32
mov %r4, 8
mov %r5, 0
call 202
@out
--- write_uninit_src
@value
@local
mov %r1, %r10
add %r1, -16
mov %r2, 0
mov %r3, %r10
add %r3, -32
mov %r4, 8
mov %r5, 0
call 202
@out
--- slice_ptr_arith
@value
@local
@data8
jeq %r0, 0, out
add %r0, 4
ldxw %r1, [%r0+0]
@out
--- slice_ptr_arith_oob
@value
@local
@data8
jeq %r0, 0, out
add %r0, 5
ldxw %r1, [%r0+0]
@out
--- slice_to_helper
@value
@local
@data8
jeq %r0, 0, out
mov %r1, %r0
mov %r2, 8
mov %r3, 0
mov %r4, 0
mov %r5, 0
call 28
@out
--- slice_spilled
@value
@local
@data8
jeq %r0, 0, out
stxdw [%r10-24], %r0
stdw [%r10-16], 0
ldxdw %r0, [%r10-24]
ldxb %r1, [%r0+0]
@out
