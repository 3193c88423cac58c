// Map update + lookup from a control plane: bpfjet's interposed bpf()
// against the kernel's bpf(), side by side in one process.
//
// Run it under `bpfjet exec`: calls through libbpf (syscall(__NR_bpf))
// reach bpfjet, while the kernel side issues the `syscall` instruction
// directly, bypassing the interposer. Both use the same map type, key and
// value sizes, keys and flags.
//
//   bpfjet exec -- map_bench [ITERATIONS]
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>

#define ENTRIES 1024

#if defined(__x86_64__)
static long raw_bpf(int cmd, union bpf_attr *attr, unsigned int size)
{
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(321L), "D"((long)cmd), "S"(attr), "d"((long)size)
			 : "rcx", "r11", "memory");
	return ret;
}
#else
#error "map_bench issues the raw bpf() system call for x86-64 only"
#endif

static int kernel_map_create(void)
{
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.map_type = BPF_MAP_TYPE_HASH;
	a.key_size = 4;
	a.value_size = 8;
	a.max_entries = ENTRIES;
	strcpy(a.map_name, "bench_kernel");
	return (int)raw_bpf(BPF_MAP_CREATE, &a, sizeof(a));
}

static long kernel_elem(int cmd, int fd, const void *key, void *value, __u64 flags)
{
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.map_fd = fd;
	a.key = (__u64)(unsigned long)key;
	a.value = (__u64)(unsigned long)value;
	a.flags = flags;
	return raw_bpf(cmd, &a, sizeof(a));
}

/* CPU time of this thread, user and kernel: a system call's time counts,
 * other processes' time on a loaded machine does not. */
static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 1000000;
	int kfd = kernel_map_create();
	int jfd = bpf_map_create(BPF_MAP_TYPE_HASH, "bench_jet", 4, 8, ENTRIES, NULL);
	__u64 v = 0, sum = 0;
	double t0, kernel_ns, jet_ns;
	long i;

	if (kfd < 0 || jfd < 0) {
		fprintf(stderr, "map create failed: kernel %d, interposed %d\n", kfd, jfd);
		return 1;
	}
	if (!getenv("BPFJET_INSTANCE"))
		fprintf(stderr, "warning: not under `bpfjet exec`: both sides are the kernel\n");
	for (int round = 0; round < 2; round++) { /* round 0 warms up */
		t0 = now_ns();
		for (i = 0; i < iters; i++) {
			__u32 k = i % ENTRIES;
			v = i;
			kernel_elem(BPF_MAP_UPDATE_ELEM, kfd, &k, &v, BPF_ANY);
			kernel_elem(BPF_MAP_LOOKUP_ELEM, kfd, &k, &v, 0);
			sum += v;
		}
		kernel_ns = (now_ns() - t0) / iters;
		t0 = now_ns();
		for (i = 0; i < iters; i++) {
			__u32 k = i % ENTRIES;
			v = i;
			bpf_map_update_elem(jfd, &k, &v, BPF_ANY);
			bpf_map_lookup_elem(jfd, &k, &v);
			sum += v;
		}
		jet_ns = (now_ns() - t0) / iters;
	}
	printf("hash map, 4-byte key, 8-byte value, %d keys, %ld iterations\n", ENTRIES, iters);
	printf("kernel bpf()           update+lookup: %8.1f ns CPU\n", kernel_ns);
	printf("interposed bpf()       update+lookup: %8.1f ns CPU\n", jet_ns);
	printf("speedup: %.2fx (checksum %llu)\n", kernel_ns / jet_ns, (unsigned long long)sum);
	return 0;
}
