/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What an NF of examples/nf needs to build as a native x86-64 function
 * (scripts/bench-eiffel-native.sh): the kernel's types and XDP constants,
 * libbpf's map-definition macros as plain members, and bpfjet's bit kfuncs
 * as compiler builtins. Map lookups are rewritten by the script into
 * direct array indexing, as the JIT inlines them.
 */
#ifndef NATIVE_SHIM_H
#define NATIVE_SHIM_H
#include <stdint.h>
typedef uint8_t __u8;
typedef uint16_t __u16;
typedef uint32_t __u32;
typedef uint64_t __u64;
typedef int64_t __s64;
struct xdp_md {
	__u64 data, data_end;
};
#define SEC(x)
#define XDP_ABORTED 0
#define XDP_DROP 1
#define XDP_PASS 2
#define XDP_TX 3
#define bpf_htons(x) __builtin_bswap16(x)
#define ETH_P_IP 0x0800
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
struct ethhdr {
	__u8 h_dest[6], h_source[6];
	__u16 h_proto;
} __attribute__((packed));
struct iphdr {
	__u8 ihl : 4, version : 4;
	__u8 tos;
	__u16 tot_len, id, frag_off;
	__u8 ttl, protocol;
	__u16 check;
	__u32 saddr, daddr;
};
#define __uint(name, val) int(*name)[val]
#define __type(name, val) typeof(val) *name
#define BPF_MAP_TYPE_PERCPU_ARRAY 6
#define bpfjet_ctz64(x) ((__u64)__builtin_ctzll(x))
#endif
