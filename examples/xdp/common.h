/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Shared helpers for the bpfjet XDP corpus: a packet cursor with bounds-checked
 * header parsing, a lookup3-style flow hash and Internet checksum arithmetic.
 *
 * Everything here is `static __always_inline`: the programs stay single-function
 * unless they ask for a subprogram on purpose (router_tailcall.c does).
 */
#ifndef BPFJET_XDP_COMMON_H
#define BPFJET_XDP_COMMON_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <linux/icmp.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#ifndef __noinline
#define __noinline __attribute__((noinline))
#endif

/* Not in <linux/if_ether.h> of every libc-dev; kept local to avoid <linux/if_vlan.h>. */
#define ETH_P_8021Q_ 0x8100
#define ETH_P_8021AD_ 0x88A8

/* IPv4 frag_off bits (host order after bpf_ntohs). */
#define IP_MF_ 0x2000
#define IP_OFFSET_ 0x1FFF

struct vlan_hdr_ {
	__be16 tci;
	__be16 encap_proto;
};

/* Parse position inside the packet. Every parse_* helper checks the bound against
 * data_end before touching a byte, which is exactly what the verifier asks for. */
struct cursor {
	void *pos;
	void *end;
};

static __always_inline void cursor_init(struct cursor *c, struct xdp_md *ctx)
{
	c->pos = (void *)(long)ctx->data;
	c->end = (void *)(long)ctx->data_end;
}

/* Returns the EtherType in network order after at most one 802.1Q/802.1ad tag,
 * or 0 if the frame is too short. */
static __always_inline __be16 parse_eth(struct cursor *c, struct ethhdr **eth_out)
{
	struct ethhdr *eth = c->pos;
	__be16 proto;

	if ((void *)(eth + 1) > c->end)
		return 0;
	c->pos = eth + 1;
	proto = eth->h_proto;
	if (proto == bpf_htons(ETH_P_8021Q_) || proto == bpf_htons(ETH_P_8021AD_)) {
		struct vlan_hdr_ *vh = c->pos;

		if ((void *)(vh + 1) > c->end)
			return 0;
		c->pos = vh + 1;
		proto = vh->encap_proto;
	}
	if (eth_out)
		*eth_out = eth;
	return proto;
}

/* IPv4 header with full ihl validation; options are skipped. */
static __always_inline struct iphdr *parse_ipv4(struct cursor *c)
{
	struct iphdr *iph = c->pos;
	__u32 hlen;

	if ((void *)(iph + 1) > c->end)
		return NULL;
	if (iph->version != 4 || iph->ihl < 5)
		return NULL;
	hlen = iph->ihl * 4;
	if (c->pos + hlen > c->end)
		return NULL;
	c->pos += hlen;
	return iph;
}

static __always_inline struct ipv6hdr *parse_ipv6(struct cursor *c)
{
	struct ipv6hdr *ip6h = c->pos;

	if ((void *)(ip6h + 1) > c->end)
		return NULL;
	if (ip6h->version != 6)
		return NULL;
	c->pos = ip6h + 1;
	return ip6h;
}

static __always_inline struct tcphdr *parse_tcp(struct cursor *c)
{
	struct tcphdr *th = c->pos;

	if ((void *)(th + 1) > c->end)
		return NULL;
	if (th->doff < 5)
		return NULL;
	c->pos = th + 1;
	return th;
}

static __always_inline struct udphdr *parse_udp(struct cursor *c)
{
	struct udphdr *uh = c->pos;

	if ((void *)(uh + 1) > c->end)
		return NULL;
	c->pos = uh + 1;
	return uh;
}

/* ---- flow hashing ---------------------------------------------------------
 * A Bob Jenkins lookup3-style hash over 32-bit words. Same mixing schedule as the
 * kernel's jhash, written here from the published algorithm so that userspace
 * tools can reproduce ring positions. */
#define FH_INIT 0xdeadbeefU

static __always_inline __u32 fh_rol(__u32 w, __u32 s)
{
	return (w << s) | (w >> (32 - s));
}

#define FH_MIX(a, b, c)                                   \
	do {                                                  \
		a -= c; a ^= fh_rol(c, 4);  c += b;               \
		b -= a; b ^= fh_rol(a, 6);  a += c;               \
		c -= b; c ^= fh_rol(b, 8);  b += a;               \
		a -= c; a ^= fh_rol(c, 16); c += b;               \
		b -= a; b ^= fh_rol(a, 19); a += c;               \
		c -= b; c ^= fh_rol(b, 4);  b += a;               \
	} while (0)

#define FH_FINAL(a, b, c)                                 \
	do {                                                  \
		c ^= b; c -= fh_rol(b, 14);                       \
		a ^= c; a -= fh_rol(c, 11);                       \
		b ^= a; b -= fh_rol(a, 25);                       \
		c ^= b; c -= fh_rol(b, 16);                       \
		a ^= c; a -= fh_rol(c, 4);                        \
		b ^= a; b -= fh_rol(a, 14);                       \
		c ^= b; c -= fh_rol(b, 24);                       \
	} while (0)

/* Hash of three words (the tail of lookup3). */
static __always_inline __u32 flow_hash_3w(__u32 a, __u32 b, __u32 c, __u32 seed)
{
	a += FH_INIT + (3 << 2) + seed;
	b += FH_INIT + (3 << 2) + seed;
	c += FH_INIT + (3 << 2) + seed;
	FH_FINAL(a, b, c);
	return c;
}

/* Hash of four words: one full mix round, then the final avalanche of the 4th. */
static __always_inline __u32 flow_hash_4w(const __u32 *k, __u32 seed)
{
	__u32 a, b, c;

	a = b = c = FH_INIT + (4 << 2) + seed;
	a += k[0];
	b += k[1];
	c += k[2];
	FH_MIX(a, b, c);
	a += k[3];
	FH_FINAL(a, b, c);
	return c;
}

/* ---- Internet checksum ----------------------------------------------------- */

/* Fold a 32-bit (or 64-bit-accumulated) one's-complement sum into 16 bits.
 * Two rounds are always enough for a 32-bit input. */
static __always_inline __u16 csum_fold32(__u64 sum)
{
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

/* Checksum of a 20-byte IPv4 header that lives on the stack or in the packet.
 * The check field must be zero (or the caller wants to validate: result 0). */
static __always_inline __u16 ipv4_hdr_csum(const struct iphdr *iph)
{
	const __u16 *w = (const __u16 *)iph;
	__u64 sum = 0;

#pragma unroll
	for (int i = 0; i < (int)(sizeof(*iph) / 2); i++)
		sum += w[i];
	return csum_fold32(sum);
}

/* RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m') for one 16-bit word changing from
 * old_w to new_w (all values in network order, as stored in the packet). */
static __always_inline __u16 csum_replace2(__u16 check, __u16 old_w, __u16 new_w)
{
	__u32 sum = (__u16)~check;

	sum += (__u16)~old_w;
	sum += new_w;
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

static __always_inline void mac_copy(__u8 *dst, const __u8 *src)
{
	__builtin_memcpy(dst, src, ETH_ALEN);
}

#endif /* BPFJET_XDP_COMMON_H */
