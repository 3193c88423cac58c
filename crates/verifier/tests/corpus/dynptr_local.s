# bpf_dynptr_from_mem (197) and bpf_dynptr_read (201) on a local dynptr:
# the data must be a map value; the dynptr is 16 bytes at an 8-aligned stack
# offset at or below fp-16, and only helpers touch its bytes: a stack write
# over it destroys it (and a helper may not write it)
# maps: array 4 16 1
# expect: ok=accept whole_value=accept buf_too_big=reject var_size=accept flags_var=accept misaligned=reject at_fp8=reject read_bytes=reject read_second_slot=reject overwrite_then_use=reject overwrite_first_then_use=reject overwrite_byte_then_use=reject overwrite_unused=accept overwrite_half_read_other=accept reinit=accept reinit_shifted=accept reinit_shifted_old=reject helper_writes_dynptr=reject helper_writes_dynptr_partly=reject pass_inner=reject read_var_len=accept read_unbounded_len=reject read_dst_beside=accept read_var_off=accept src_map_value=reject spill_ptr_over=reject fp_as_data=reject
# expect-unpriv: ok=accept whole_value=accept buf_too_big=reject var_size=accept flags_var=accept misaligned=reject at_fp8=reject read_bytes=reject read_second_slot=reject overwrite_then_use=reject overwrite_first_then_use=reject overwrite_byte_then_use=reject overwrite_unused=accept overwrite_half_read_other=reject reinit=accept reinit_shifted=accept reinit_shifted_old=reject helper_writes_dynptr=reject helper_writes_dynptr_partly=reject pass_inner=reject read_var_len=reject read_unbounded_len=reject read_dst_beside=accept read_var_off=accept src_map_value=reject spill_ptr_over=reject fp_as_data=reject
--- ok
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
mov %r1, %r10
add %r1, -32
mov %r2, 8
mov %r3, %r10
add %r3, -16
mov %r4, 0
mov %r5, 0
call 201
out:
mov %r0, 2
exit
--- whole_value
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
mov %r2, 16
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
mov %r1, %r10
add %r1, -32
mov %r2, 8
mov %r3, %r10
add %r3, -16
mov %r4, 0
mov %r5, 0
call 201
out:
mov %r0, 2
exit
--- buf_too_big
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
mov %r2, 17
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
out:
mov %r0, 2
exit
--- var_size
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
ldxw %r7, [%r6+0]
and %r7, 15
mov %r1, %r6
mov %r2, %r7
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
out:
mov %r0, 2
exit
--- flags_var
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
ldxdw %r7, [%r6+0]
mov %r1, %r6
mov %r2, 8
mov %r3, %r7
mov %r4, %r10
add %r4, -16
call 197
out:
mov %r0, 2
exit
--- misaligned
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -20
call 197
out:
mov %r0, 2
exit
--- at_fp8
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -8
call 197
out:
mov %r0, 2
exit
--- read_bytes
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
ldxdw %r0, [%r10-16]
out:
mov %r0, 2
exit
--- read_second_slot
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
ldxdw %r0, [%r10-8]
out:
mov %r0, 2
exit
--- overwrite_then_use
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
stdw [%r10-8], 0
mov %r1, %r10
add %r1, -32
mov %r2, 8
mov %r3, %r10
add %r3, -16
mov %r4, 0
mov %r5, 0
call 201
out:
mov %r0, 2
exit
--- overwrite_first_then_use
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
stdw [%r10-16], 0
mov %r1, %r10
add %r1, -32
mov %r2, 8
mov %r3, %r10
add %r3, -16
mov %r4, 0
mov %r5, 0
call 201
out:
mov %r0, 2
exit
--- overwrite_byte_then_use
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
stb [%r10-3], 0
mov %r1, %r10
add %r1, -32
mov %r2, 8
mov %r3, %r10
add %r3, -16
mov %r4, 0
mov %r5, 0
call 201
out:
mov %r0, 2
exit
--- overwrite_unused
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
stdw [%r10-16], 0
stdw [%r10-8], 0
ldxdw %r0, [%r10-16]
out:
mov %r0, 2
exit
--- overwrite_half_read_other
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
stdw [%r10-8], 0
ldxdw %r0, [%r10-16]
out:
mov %r0, 2
exit
--- reinit
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
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
out:
mov %r0, 2
exit
--- reinit_shifted
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
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
out:
mov %r0, 2
exit
--- reinit_shifted_old
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
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
out:
mov %r0, 2
exit
--- helper_writes_dynptr
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
mov %r1, %r10
add %r1, -16
mov %r2, 8
mov %r3, %r10
add %r3, -16
mov %r4, 0
mov %r5, 0
call 201
out:
mov %r0, 2
exit
--- helper_writes_dynptr_partly
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
mov %r1, %r10
add %r1, -20
mov %r2, 8
mov %r3, %r10
add %r3, -16
mov %r4, 0
mov %r5, 0
call 201
out:
mov %r0, 2
exit
--- pass_inner
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
mov %r1, %r10
add %r1, -32
mov %r2, 8
mov %r3, %r10
add %r3, -8
mov %r4, 0
mov %r5, 0
call 201
out:
mov %r0, 2
exit
--- read_var_len
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
ldxw %r7, [%r6+0]
and %r7, 7
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
mov %r1, %r10
add %r1, -32
mov %r2, %r7
mov %r3, %r10
add %r3, -16
mov %r4, 0
mov %r5, 0
call 201
out:
mov %r0, 2
exit
--- read_unbounded_len
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
ldxw %r7, [%r6+0]
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
mov %r1, %r10
add %r1, -32
mov %r2, %r7
mov %r3, %r10
add %r3, -16
mov %r4, 0
mov %r5, 0
call 201
out:
mov %r0, 2
exit
--- read_dst_beside
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
mov %r1, %r10
add %r1, -32
mov %r2, 16
mov %r3, %r10
add %r3, -16
mov %r4, 0
mov %r5, 0
call 201
out:
mov %r0, 2
exit
--- read_var_off
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
ldxdw %r7, [%r6+0]
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
mov %r1, %r10
add %r1, -32
mov %r2, 8
mov %r3, %r10
add %r3, -16
mov %r4, %r7
mov %r5, 0
call 201
out:
mov %r0, 2
exit
--- src_map_value
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
mov %r1, %r10
add %r1, -32
mov %r2, 8
mov %r3, %r6
mov %r4, 0
mov %r5, 0
call 201
out:
mov %r0, 2
exit
--- spill_ptr_over
stw [%r10-36], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -36
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
mov %r2, 8
mov %r3, 0
mov %r4, %r10
add %r4, -16
call 197
stxdw [%r10-16], %r6
mov %r1, %r10
add %r1, -32
mov %r2, 8
mov %r3, %r10
add %r3, -16
mov %r4, 0
mov %r5, 0
call 201
out:
mov %r0, 2
exit
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
