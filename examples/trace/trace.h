/* Shared by the tracing tools in this directory (written as libbpf-tools
 * are: CO-RE against vmlinux.h, one .bpf.c per tool).
 *
 * Every tool runs unchanged in two places:
 *  - the kernel, loaded by ktrace.c (libbpf): its programs see every
 *    process, so `targ_tgid` (set by the loader before load) restricts them
 *    to the traced command;
 *  - bpfjet (`bpfjet trace`): the programs run inside the traced process, so
 *    `targ_tgid` stays 0 and the filter passes. */
#ifndef BPFJET_TRACE_H
#define BPFJET_TRACE_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define TASK_COMM_LEN 16

/* 0: trace every process; otherwise only this process (thread group). */
const volatile __u32 targ_tgid = 0;

static __always_inline int traced(void)
{
	return !targ_tgid || (bpf_get_current_pid_tgid() >> 32) == targ_tgid;
}

/* What a ring-buffer tool tried to send and what did not fit: the "lost"
 * axis of the eBPF-libraries study, counted by the program itself so the
 * kernel and bpfjet report it the same way. Index 0: records attempted,
 * 1: reservations that failed (ring full). */
enum { STAT_ATTEMPTED = 0, STAT_DROPPED = 1, STAT_MAX };

#define DECLARE_RB_STATS                                                  \
	struct {                                                          \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);                  \
		__uint(max_entries, STAT_MAX);                            \
		__type(key, __u32);                                       \
		__type(value, __u64);                                     \
	} rb_stats SEC(".maps");                                          \
	static __always_inline void rb_stat(__u32 which)                  \
	{                                                                 \
		__u64 *n = bpf_map_lookup_elem(&rb_stats, &which);        \
		if (n)                                                    \
			*n += 1;                                          \
	}

/* Operations of the read/write tools. */
enum rw_op { RW_READ = 0, RW_WRITE = 1, RW_OPS };

/* One read or write, as the study's rw-tracer records it (~156 bytes). */
struct rw_event {
	__u64 ts_ns;      /* bpf_ktime_get_ns() at the event */
	__u64 latency_ns; /* entry to exit of the system call */
	__u32 pid;        /* thread group */
	__u32 tid;
	__u32 uid;
	__u32 op;         /* enum rw_op */
	__s64 fd;
	__u64 buf;        /* user address of the buffer */
	__u64 count;      /* bytes asked for */
	__s64 ret;        /* bytes done, or -errno */
	__u32 data_len;   /* bytes of payload that follow (rw-tracer-all) */
	__u32 cpu;
	char comm[TASK_COMM_LEN];
	/* Fills the record to the study's rw-tracer event size (~156 bytes:
	 * 152 here), so the ring buffer carries the study's load. */
	__u8 reserved[64];
};

#define DATA_MAX 4096

/* rw-tracer-all: the event and up to 4 KiB of the data read or written
 * (4,248 bytes; the study's 4,252). */
struct rw_data_event {
	struct rw_event ev;
	__u8 data[DATA_MAX];
};

/* Arguments saved at a system call's entry for its exit, per thread. */
struct rw_args {
	__u64 ts_ns;
	__u64 buf;
	__u64 count;
	__s64 fd;
};

#define HIST_SLOTS 32

static __always_inline __u32 log2_slot(__u64 v)
{
	__u32 slot = 0;
	/* Binary search over the bit positions; unrolled by clang. */
#pragma unroll
	for (int i = 0; i < 6; i++) {
		__u32 shift = 32 >> i;
		if (v >= (1ULL << shift)) {
			v >>= shift;
			slot += shift;
		}
	}
	return slot < HIST_SLOTS ? slot : HIST_SLOTS - 1;
}

#endif
