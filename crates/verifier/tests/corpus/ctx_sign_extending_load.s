# sign-extending loads from the context: refused for the pointer fields
# (data, data_end, data_meta), allowed for the scalar ones
# (rx_queue_index here), whose value is then sign-extended
# expect: data=reject data_end=reject queue=accept
--- data
ldxsw %r0, [%r1+0]
mov %r0, 2
exit
--- data_end
ldxsw %r0, [%r1+4]
mov %r0, 2
exit
--- queue
ldxsw %r0, [%r1+16]
mov %r0, 2
exit
