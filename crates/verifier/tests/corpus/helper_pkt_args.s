# which helpers take a packet pointer for a memory argument in an XDP
# program (the kernel's `pkt_access` prototypes) and which refuse it
# ("helper access to the packet is not allowed"): each passes a
# bounds-checked pointer to the packet's first 64 bytes
# maps: array 4 8 1, perf_event_array 4 4 2, ringbuf 0 0 4096, queue 0 8 4, rodata 4 8 1, percpu_array 4 8 1
# expect: trace_printk_fmt=reject perf_event_output_data=reject ringbuf_output_data=reject xdp_load_bytes_into_pkt=reject xdp_store_bytes_from_pkt=reject csum_diff_pkt=accept map_push_pkt_value=accept map_lookup_pkt_key=accept get_current_comm_into_pkt=reject strncmp_pkt=reject check_mtu_len_in_pkt=reject fib_lookup_params_in_pkt=reject map_pop_into_pkt=reject map_peek_into_pkt=reject map_update_pkt_key_value=accept map_delete_pkt_key=accept lookup_percpu_pkt_key=accept raw_gen_syncookie_pkt=accept raw_check_syncookie_pkt=accept snprintf_out_pkt=reject probe_read_kernel_into_pkt=reject
--- trace_printk_fmt
ldxw %r7, [%r1+0]
ldxw %r8, [%r1+4]
mov %r6, %r1
mov %r2, %r7
add %r2, 64
jgt %r2, %r8, out
stb [%r7+7], 0
mov %r1, %r7
mov %r2, 8
call 6
out:
mov %r0, 2
exit
--- perf_event_output_data
ldxw %r7, [%r1+0]
ldxw %r8, [%r1+4]
mov %r6, %r1
mov %r2, %r7
add %r2, 64
jgt %r2, %r8, out
mov %r1, %r6
lddw %r2, map_idx 1
lddw %r3, 0xffffffff
mov %r4, %r7
mov %r5, 8
call 25
out:
mov %r0, 2
exit
--- ringbuf_output_data
ldxw %r7, [%r1+0]
ldxw %r8, [%r1+4]
mov %r6, %r1
mov %r2, %r7
add %r2, 64
jgt %r2, %r8, out
lddw %r1, map_idx 2
mov %r2, %r7
mov %r3, 8
mov %r4, 0
call 130
out:
mov %r0, 2
exit
--- xdp_load_bytes_into_pkt
ldxw %r7, [%r1+0]
ldxw %r8, [%r1+4]
mov %r6, %r1
mov %r2, %r7
add %r2, 64
jgt %r2, %r8, out
mov %r1, %r6
mov %r2, 0
mov %r3, %r7
mov %r4, 8
call 189
out:
mov %r0, 2
exit
--- xdp_store_bytes_from_pkt
ldxw %r7, [%r1+0]
ldxw %r8, [%r1+4]
mov %r6, %r1
mov %r2, %r7
add %r2, 64
jgt %r2, %r8, out
mov %r1, %r6
mov %r2, 16
mov %r3, %r7
mov %r4, 8
call 190
out:
mov %r0, 2
exit
--- csum_diff_pkt
ldxw %r7, [%r1+0]
ldxw %r8, [%r1+4]
mov %r6, %r1
mov %r2, %r7
add %r2, 64
jgt %r2, %r8, out
mov %r1, %r7
mov %r2, 8
mov %r3, 0
mov %r4, 0
mov %r5, 0
call 28
out:
mov %r0, 2
exit
--- map_push_pkt_value
ldxw %r7, [%r1+0]
ldxw %r8, [%r1+4]
mov %r6, %r1
mov %r2, %r7
add %r2, 64
jgt %r2, %r8, out
lddw %r1, map_idx 3
mov %r2, %r7
mov %r3, 0
call 87
out:
mov %r0, 2
exit
--- map_lookup_pkt_key
ldxw %r7, [%r1+0]
ldxw %r8, [%r1+4]
mov %r6, %r1
mov %r2, %r7
add %r2, 64
jgt %r2, %r8, out
lddw %r1, map_idx 0
mov %r2, %r7
call 1
out:
mov %r0, 2
exit
--- get_current_comm_into_pkt
ldxw %r7, [%r1+0]
ldxw %r8, [%r1+4]
mov %r6, %r1
mov %r2, %r7
add %r2, 64
jgt %r2, %r8, out
mov %r1, %r7
mov %r2, 16
call 16
out:
mov %r0, 2
exit
--- strncmp_pkt
ldxw %r7, [%r1+0]
ldxw %r8, [%r1+4]
mov %r6, %r1
mov %r2, %r7
add %r2, 64
jgt %r2, %r8, out
stb [%r7+7], 0
mov %r1, %r7
mov %r2, 8
lddw %r3, map_idx_value 4, 0
call 182
out:
mov %r0, 2
exit
--- check_mtu_len_in_pkt
ldxw %r7, [%r1+0]
ldxw %r8, [%r1+4]
mov %r6, %r1
mov %r2, %r7
add %r2, 64
jgt %r2, %r8, out
stw [%r7+0], 0
mov %r1, %r6
mov %r2, 0
mov %r3, %r7
mov %r4, 0
mov %r5, 0
call 163
out:
mov %r0, 2
exit
--- fib_lookup_params_in_pkt
ldxw %r7, [%r1+0]
ldxw %r8, [%r1+4]
mov %r6, %r1
mov %r2, %r7
add %r2, 64
jgt %r2, %r8, out
mov %r1, %r6
mov %r2, %r7
mov %r3, 64
mov %r4, 0
call 69
out:
mov %r0, 2
exit
--- map_pop_into_pkt
ldxw %r7, [%r1+0]
ldxw %r8, [%r1+4]
mov %r6, %r1
mov %r2, %r7
add %r2, 64
jgt %r2, %r8, out
lddw %r1, map_idx 3
mov %r2, %r7
call 88
out:
mov %r0, 2
exit
--- map_peek_into_pkt
ldxw %r7, [%r1+0]
ldxw %r8, [%r1+4]
mov %r6, %r1
mov %r2, %r7
add %r2, 64
jgt %r2, %r8, out
lddw %r1, map_idx 3
mov %r2, %r7
call 89
out:
mov %r0, 2
exit
--- map_update_pkt_key_value
ldxw %r7, [%r1+0]
ldxw %r8, [%r1+4]
mov %r6, %r1
mov %r2, %r7
add %r2, 64
jgt %r2, %r8, out
lddw %r1, map_idx 0
mov %r2, %r7
mov %r3, %r7
mov %r4, 0
call 2
out:
mov %r0, 2
exit
--- map_delete_pkt_key
ldxw %r7, [%r1+0]
ldxw %r8, [%r1+4]
mov %r6, %r1
mov %r2, %r7
add %r2, 64
jgt %r2, %r8, out
lddw %r1, map_idx 0
mov %r2, %r7
call 3
out:
mov %r0, 2
exit
--- lookup_percpu_pkt_key
ldxw %r7, [%r1+0]
ldxw %r8, [%r1+4]
mov %r6, %r1
mov %r2, %r7
add %r2, 64
jgt %r2, %r8, out
lddw %r1, map_idx 5
mov %r2, %r7
mov %r3, 0
call 195
out:
mov %r0, 2
exit
--- raw_gen_syncookie_pkt
ldxw %r7, [%r1+0]
ldxw %r8, [%r1+4]
mov %r6, %r1
mov %r2, %r7
add %r2, 64
jgt %r2, %r8, out
mov %r1, %r7
mov %r2, %r7
add %r2, 20
mov %r3, 20
call 204
out:
mov %r0, 2
exit
--- raw_check_syncookie_pkt
ldxw %r7, [%r1+0]
ldxw %r8, [%r1+4]
mov %r6, %r1
mov %r2, %r7
add %r2, 64
jgt %r2, %r8, out
mov %r1, %r7
mov %r2, %r7
add %r2, 20
call 206
out:
mov %r0, 2
exit
--- snprintf_out_pkt
ldxw %r7, [%r1+0]
ldxw %r8, [%r1+4]
mov %r6, %r1
mov %r2, %r7
add %r2, 64
jgt %r2, %r8, out
mov %r1, %r7
mov %r2, 8
lddw %r3, map_idx_value 4, 0
mov %r4, 0
mov %r5, 0
call 165
out:
mov %r0, 2
exit
--- probe_read_kernel_into_pkt
ldxw %r7, [%r1+0]
ldxw %r8, [%r1+4]
mov %r6, %r1
mov %r2, %r7
add %r2, 64
jgt %r2, %r8, out
mov %r1, %r7
mov %r2, 8
mov %r3, 0
call 113
out:
mov %r0, 2
exit
