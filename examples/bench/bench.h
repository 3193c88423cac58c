/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Shared by the microbenchmarks: includes and the iteration counts. */
#ifndef BPFJET_BENCH_H
#define BPFJET_BENCH_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* Map lookups per invocation (the Demystifying-eBPF setup: 100k via bpf_loop). */
#define LOOKUPS 100000
/* 1 KiB copies per invocation. */
#define COPIES 100
#define COPY_BYTES 1024
/* Passes over the first 64 packet bytes per invocation. */
#define SUM_PASSES 100
/* Calls per invocation in the call-cost benchmarks. */
#define CALLS 32

#endif
