# bpf_dynptr_from_mem (197) and bpf_dynptr_read (201) on a local dynptr:
# the data must be a map value; the dynptr is 16 bytes at an 8-aligned stack
# offset at or below fp-16, and only helpers touch its bytes: a stack write
# over it destroys it (and a helper may not write it)
# include: dynptr.inc
# maps: array 4 16 1
# expect: ok=accept whole_value=accept buf_too_big=reject var_size=accept flags_var=accept misaligned=reject at_fp8=reject read_bytes=reject read_second_slot=reject overwrite_then_use=reject overwrite_first_then_use=reject overwrite_byte_then_use=reject overwrite_unused=accept overwrite_half_read_other=accept reinit=accept reinit_shifted=accept reinit_shifted_old=reject helper_writes_dynptr=reject helper_writes_dynptr_partly=reject pass_inner=reject read_var_len=accept read_unbounded_len=reject read_dst_beside=accept read_var_off=accept src_map_value=reject spill_ptr_over=reject fp_as_data=reject
# expect-unpriv: ok=accept whole_value=accept buf_too_big=reject var_size=accept flags_var=accept misaligned=reject at_fp8=reject read_bytes=reject read_second_slot=reject overwrite_then_use=reject overwrite_first_then_use=reject overwrite_byte_then_use=reject overwrite_unused=accept overwrite_half_read_other=reject reinit=accept reinit_shifted=accept reinit_shifted_old=reject helper_writes_dynptr=reject helper_writes_dynptr_partly=reject pass_inner=reject read_var_len=reject read_unbounded_len=reject read_dst_beside=accept read_var_off=accept src_map_value=reject spill_ptr_over=reject fp_as_data=reject
--- ok
@value
@local
@read
@out
--- whole_value
@value
mov %r1, %r6
mov %r2, 16
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
@read
@out
--- buf_too_big
@value
mov %r1, %r6
mov %r2, 17
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
@out
--- var_size
@value
ldxw %r7, [%r6+0]
and %r7, 15
mov %r1, %r6
mov %r2, %r7
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
@out
--- flags_var
@value
ldxdw %r7, [%r6+0]
mov %r1, %r6
mov %r2, 8
mov %r3, %r7
mov %r4, %r10
add %r4, -16
call 197
@out
--- misaligned
@value
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -20
call 197
@out
--- at_fp8
@value
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -8
call 197
@out
--- read_bytes
@value
@local
ldxdw %r0, [%r10-16]
@out
--- read_second_slot
@value
@local
ldxdw %r0, [%r10-8]
@out
--- overwrite_then_use
@value
@local
stdw [%r10-8], 0
@read
@out
--- overwrite_first_then_use
@value
@local
stdw [%r10-16], 0
@read
@out
--- overwrite_byte_then_use
@value
@local
stb [%r10-3], 0
@read
@out
--- overwrite_unused
@value
@local
stdw [%r10-16], 0
stdw [%r10-8], 0
ldxdw %r0, [%r10-16]
@out
--- overwrite_half_read_other
@value
@local
stdw [%r10-8], 0
ldxdw %r0, [%r10-16]
@out
--- reinit
@value
@local
mov %r1, %r6
mov %r2, 4
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
mov %r1, %r10
add %r1, -32
mov %r2, 4
mov %r3, %r10
add %r3, -16
mov %r4, 0
mov %r5, 0
call 201
@out
--- reinit_shifted
@value
@local
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -24
call 197
mov %r1, %r10
add %r1, -40
mov %r2, 8
mov %r3, %r10
add %r3, -24
mov %r4, 0
mov %r5, 0
call 201
@out
--- reinit_shifted_old
@value
@local
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -24
call 197
mov %r1, %r10
add %r1, -40
mov %r2, 8
mov %r3, %r10
add %r3, -16
mov %r4, 0
mov %r5, 0
call 201
@out
--- helper_writes_dynptr
@value
@local
mov %r1, %r10
add %r1, -16
mov %r2, 8
mov %r3, %r10
add %r3, -16
mov %r4, 0
mov %r5, 0
call 201
@out
--- helper_writes_dynptr_partly
@value
@local
mov %r1, %r10
add %r1, -20
mov %r2, 8
mov %r3, %r10
add %r3, -16
mov %r4, 0
mov %r5, 0
call 201
@out
--- pass_inner
@value
@local
mov %r1, %r10
add %r1, -32
mov %r2, 8
mov %r3, %r10
add %r3, -8
mov %r4, 0
mov %r5, 0
call 201
@out
--- read_var_len
@value
ldxw %r7, [%r6+0]
and %r7, 7
@local
mov %r1, %r10
add %r1, -32
mov %r2, %r7
mov %r3, %r10
add %r3, -16
mov %r4, 0
mov %r5, 0
call 201
@out
--- read_unbounded_len
@value
ldxw %r7, [%r6+0]
@local
mov %r1, %r10
add %r1, -32
mov %r2, %r7
mov %r3, %r10
add %r3, -16
mov %r4, 0
mov %r5, 0
call 201
@out
--- read_dst_beside
@value
@local
mov %r1, %r10
add %r1, -32
mov %r2, 16
mov %r3, %r10
add %r3, -16
mov %r4, 0
mov %r5, 0
call 201
@out
--- read_var_off
@value
ldxdw %r7, [%r6+0]
@local
mov %r1, %r10
add %r1, -32
mov %r2, 8
mov %r3, %r10
add %r3, -16
mov %r4, %r7
mov %r5, 0
call 201
@out
--- src_map_value
@value
@local
mov %r1, %r10
add %r1, -32
mov %r2, 8
mov %r3, %r6
mov %r4, 0
mov %r5, 0
call 201
@out
--- spill_ptr_over
@value
@local
stxdw [%r10-16], %r6
@read
@out
--- fp_as_data
stdw [%r10-40], 0
mov %r1, %r10
add %r1, -40
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
mov %r0, 2
exit
