# which helpers take a packet pointer for a memory argument in an XDP
# program (the kernel's `pkt_access` prototypes) and which refuse it
# ("helper access to the packet is not allowed"): each passes a
# bounds-checked pointer to the packet's first 64 bytes
# include: dynptr.inc
# maps: array 4 8 1, perf_event_array 4 4 2, ringbuf 0 0 4096, queue 0 8 4, rodata 4 8 1, percpu_array 4 8 1
# expect: trace_printk_fmt=reject perf_event_output_data=reject ringbuf_output_data=reject xdp_load_bytes_into_pkt=reject xdp_store_bytes_from_pkt=reject csum_diff_pkt=accept map_push_pkt_value=accept map_lookup_pkt_key=accept get_current_comm_into_pkt=reject strncmp_pkt=reject check_mtu_len_in_pkt=reject fib_lookup_params_in_pkt=reject map_pop_into_pkt=reject map_peek_into_pkt=reject map_update_pkt_key_value=accept map_delete_pkt_key=accept lookup_percpu_pkt_key=accept raw_gen_syncookie_pkt=accept raw_check_syncookie_pkt=accept snprintf_out_pkt=reject probe_read_kernel_into_pkt=reject
--- @pkt
ldxw %r7, [%r1+0]
ldxw %r8, [%r1+4]
mov %r6, %r1
mov %r2, %r7
add %r2, 64
jgt %r2, %r8, out
--- trace_printk_fmt
@pkt
stb [%r7+7], 0
mov %r1, %r7
mov %r2, 8
call 6
@out
--- perf_event_output_data
@pkt
mov %r1, %r6
lddw %r2, map_idx 1
lddw %r3, 0xffffffff
mov %r4, %r7
mov %r5, 8
call 25
@out
--- ringbuf_output_data
@pkt
lddw %r1, map_idx 2
mov %r2, %r7
mov %r3, 8
mov %r4, 0
call 130
@out
--- xdp_load_bytes_into_pkt
@pkt
mov %r1, %r6
mov %r2, 0
mov %r3, %r7
mov %r4, 8
call 189
@out
--- xdp_store_bytes_from_pkt
@pkt
mov %r1, %r6
mov %r2, 16
mov %r3, %r7
mov %r4, 8
call 190
@out
--- csum_diff_pkt
@pkt
mov %r1, %r7
mov %r2, 8
mov %r3, 0
mov %r4, 0
mov %r5, 0
call 28
@out
--- map_push_pkt_value
@pkt
lddw %r1, map_idx 3
mov %r2, %r7
mov %r3, 0
call 87
@out
--- map_lookup_pkt_key
@pkt
lddw %r1, map_idx 0
mov %r2, %r7
call 1
@out
--- get_current_comm_into_pkt
@pkt
mov %r1, %r7
mov %r2, 16
call 16
@out
--- strncmp_pkt
@pkt
stb [%r7+7], 0
mov %r1, %r7
mov %r2, 8
lddw %r3, map_idx_value 4, 0
call 182
@out
--- check_mtu_len_in_pkt
@pkt
stw [%r7+0], 0
mov %r1, %r6
mov %r2, 0
mov %r3, %r7
mov %r4, 0
mov %r5, 0
call 163
@out
--- fib_lookup_params_in_pkt
@pkt
mov %r1, %r6
mov %r2, %r7
mov %r3, 64
mov %r4, 0
call 69
@out
--- map_pop_into_pkt
@pkt
lddw %r1, map_idx 3
mov %r2, %r7
call 88
@out
--- map_peek_into_pkt
@pkt
lddw %r1, map_idx 3
mov %r2, %r7
call 89
@out
--- map_update_pkt_key_value
@pkt
lddw %r1, map_idx 0
mov %r2, %r7
mov %r3, %r7
mov %r4, 0
call 2
@out
--- map_delete_pkt_key
@pkt
lddw %r1, map_idx 0
mov %r2, %r7
call 3
@out
--- lookup_percpu_pkt_key
@pkt
lddw %r1, map_idx 5
mov %r2, %r7
mov %r3, 0
call 195
@out
--- raw_gen_syncookie_pkt
@pkt
mov %r1, %r7
mov %r2, %r7
add %r2, 20
mov %r3, 20
call 204
@out
--- raw_check_syncookie_pkt
@pkt
mov %r1, %r7
mov %r2, %r7
add %r2, 20
call 206
@out
--- snprintf_out_pkt
@pkt
mov %r1, %r7
mov %r2, 8
lddw %r3, map_idx_value 4, 0
mov %r4, 0
mov %r5, 0
call 165
@out
--- probe_read_kernel_into_pkt
@pkt
mov %r1, %r7
mov %r2, 8
mov %r3, 0
call 113
@out
