# bpf_skb_store_bytes (skb programs only) is not available to XDP
# expect: bad=reject good=accept
--- bad
call 9
mov %r0, 2
exit
--- good
call 5
mov %r0, 2
exit
