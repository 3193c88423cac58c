# bpf_user_ringbuf_drain (209): a USER_RINGBUF map only; the callback
# gets a const local dynptr over each sample (helpers may read it and slice
# it, never initialise, release or dereference it) and returns 0 or 1
# maps: user_ringbuf 0 0 4096, array 4 8 1, ringbuf 0 0 4096
# expect: ok=accept data_slice=accept slice_past_size=reject deref_dynptr=reject release_sample=reject reinit_sample=reject bad_return=reject on_ringbuf=reject lookup_on_user_ringbuf=reject ctx_counter=accept spill_sample=reject spill_sample_unused=accept
--- @drain
lddw %r1, map_idx 0
lddw %r2, func cb
mov %r3, 0
mov %r4, 0
call 209
--- ok
@drain
mov %r0, 2
exit
cb:
mov %r6, %r1
mov %r1, %r10
add %r1, -8
mov %r2, 8
mov %r3, %r6
mov %r4, 0
mov %r5, 0
call 201
mov %r0, 0
exit
--- data_slice
@drain
mov %r0, 2
exit
cb:
mov %r2, 0
mov %r3, 8
call 203
jeq %r0, 0, out
ldxdw %r1, [%r0+0]
out:
mov %r0, 0
exit
--- slice_past_size
@drain
mov %r0, 2
exit
cb:
mov %r2, 0
mov %r3, 8
call 203
jeq %r0, 0, out
ldxdw %r1, [%r0+1]
out:
mov %r0, 0
exit
--- deref_dynptr
@drain
mov %r0, 2
exit
cb:
ldxdw %r0, [%r1+0]
mov %r0, 0
exit
--- release_sample
@drain
mov %r0, 2
exit
cb:
mov %r2, 0
call 199
mov %r0, 0
exit
--- reinit_sample
stw [%r10-4], 0
lddw %r1, map_idx 1
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, done
stxdw [%r10-16], %r0
lddw %r1, map_idx 0
lddw %r2, func cb
mov %r3, %r10
add %r3, -16
mov %r4, 0
call 209
done:
mov %r0, 2
exit
cb:
ldxdw %r6, [%r2+0]
mov %r4, %r1
mov %r1, %r6
mov %r2, 8
mov %r3, 0
call 197
mov %r0, 0
exit
--- bad_return
@drain
mov %r0, 2
exit
cb:
mov %r0, 2
exit
--- on_ringbuf
lddw %r1, map_idx 2
lddw %r2, func cb
mov %r3, 0
mov %r4, 0
call 209
mov %r0, 2
exit
cb:
mov %r0, 0
exit
--- lookup_on_user_ringbuf
stw [%r10-4], 0
lddw %r1, map_idx 0
mov %r2, %r10
add %r2, -4
call 1
mov %r0, 2
exit
--- ctx_counter
stdw [%r10-8], 0
lddw %r1, map_idx 0
lddw %r2, func cb
mov %r3, %r10
add %r3, -8
mov %r4, 0
call 209
ldxdw %r0, [%r10-8]
mov %r0, 2
exit
cb:
ldxdw %r3, [%r2+0]
add %r3, 1
stxdw [%r2+0], %r3
mov %r0, 0
exit
--- spill_sample
@drain
mov %r0, 2
exit
cb:
stxdw [%r10-8], %r1
ldxdw %r3, [%r10-8]
mov %r1, %r10
add %r1, -16
mov %r2, 8
mov %r4, 0
mov %r5, 0
call 201
mov %r0, 0
exit
--- spill_sample_unused
@drain
mov %r0, 2
exit
cb:
stxdw [%r10-8], %r1
ldxdw %r3, [%r10-8]
mov %r0, 0
exit
