// A libbpf tracing tool, written the way such tools are (skeleton, uprobes
// by function name, tracepoints, a ring buffer read with ring_buffer__poll),
// that must print the same lines against the kernel and under
// `bpfjet exec` with its programs run in `bpfjet trace` (tests/preload/
// tracer.sh). Built from trace_tool.bpf.c with `bpftool gen skeleton`.
//
//   trace_tool TARGET_PATH COMM
//
// Attaches to the functions target_begin, target_step, target_end of
// TARGET_PATH (all processes) and to the openat / sys_enter tracepoints,
// keeping only tasks named COMM. Prints "ready" once attached, then one
// line per ring buffer event:
//   enter PATH            an openat began
//   exit PATH ret=RET     it returned RET
// On SIGINT/SIGTERM it drains the ring buffer and prints the maps, each
// sorted so that two runs of the same target print the same text:
//   step X COUNT          calls of target_step(X)
//   ret_sum SUM           sum of target_step's return values
//   hits N                on_step hits, summed over the CPUs
//   cookie SLOT VALUE     the BPF cookie on_step (0) and on_step_ret (1)
//                         read: the ones attached, 0x7 and 0x5eed
//   sys NR COUNT          syscalls made between target_begin and target_end
//   guarded N             hits of the semaphore-guarded USDT probe
//   usdt I X              the USDT probe trace_target:step(I, X) fired
//   perf_ret RET COUNT    samples of target_step's return value read from
//                         the perf buffer (libbpf's perf_buffer), per value
//   perf_lost N           samples the perf buffer reported lost
// Any libbpf failure: "libbpf error: ..." on stderr, exit status 1.
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "trace_tool.skel.h"

#define PATH_LEN 64
#define MAX_KEYS 64

enum { EV_ENTER = 1, EV_EXIT = 2 };

struct event {
	__u32 kind;
	__s32 ret;
	char path[PATH_LEN];
};

static volatile sig_atomic_t exiting;

static void on_signal(int sig)
{
	(void)sig;
	exiting = 1;
}

// Perf buffer samples per return value (0..MAX_KEYS-1) and losses: samples
// of different CPUs arrive in any order, so they are counted, not listed.
static unsigned long long perf_rets[MAX_KEYS], perf_lost;

static void on_perf_sample(void *ctx, int cpu, void *data, __u32 size)
{
	__s32 ret;

	(void)ctx;
	(void)cpu;
	if (size < sizeof(ret))
		return;
	memcpy(&ret, data, sizeof(ret));
	if (ret >= 0 && ret < MAX_KEYS)
		perf_rets[ret]++;
}

static void on_perf_lost(void *ctx, int cpu, __u64 count)
{
	(void)ctx;
	(void)cpu;
	perf_lost += count;
}

static int fail(const char *what, int err)
{
	fprintf(stderr, "libbpf error: %s: %s\n", what, strerror(err < 0 ? -err : err));
	return 1;
}

static int on_event(void *ctx, void *data, size_t size)
{
	const struct event *e = data;

	(void)ctx;
	if (size < sizeof(*e)) {
		printf("event of %zu bytes\n", size);
		return 0;
	}
	// The program copies at most PATH_LEN - 1 bytes and a NUL; the bound
	// still protects against a record that lacks it.
	switch (e->kind) {
	case EV_ENTER:
		printf("enter %.*s\n", PATH_LEN, e->path);
		break;
	case EV_EXIT:
		printf("exit %.*s ret=%d\n", PATH_LEN, e->path, e->ret);
		break;
	default:
		printf("event of kind %u\n", e->kind);
	}
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	__u32 x = *(const __u32 *)a, y = *(const __u32 *)b;

	return x < y ? -1 : x > y;
}

// "PREFIX KEY COUNT" for each entry of a u32 -> u64 hash map, by key.
static int print_counts(const struct bpf_map *map, const char *prefix)
{
	__u32 keys[MAX_KEYS], key, *prev = NULL;
	int n = 0, err;

	while (n < MAX_KEYS &&
	       !bpf_map__get_next_key(map, prev, &key, sizeof(key))) {
		keys[n] = key;
		prev = &keys[n++];
	}
	// Hash order is an implementation detail of the map; sort for a
	// comparable output.
	qsort(keys, n, sizeof(keys[0]), cmp_u32);
	for (int i = 0; i < n; i++) {
		__u64 v;

		err = bpf_map__lookup_elem(map, &keys[i], sizeof(keys[i]), &v, sizeof(v), 0);
		if (err)
			return fail(bpf_map__name(map), err);
		printf("%s %u %llu\n", prefix, keys[i], (unsigned long long)v);
	}
	return 0;
}

static int print_maps(struct trace_tool *skel)
{
	__u32 zero = 0;
	__s64 sum;
	__u64 *per_cpu, hits = 0, v;
	int ncpus, err;

	if (print_counts(skel->maps.steps, "step"))
		return 1;

	err = bpf_map__lookup_elem(skel->maps.ret_sum, &zero, sizeof(zero), &sum, sizeof(sum), 0);
	if (err)
		return fail("ret_sum", err);
	printf("ret_sum %lld\n", (long long)sum);

	// A per-CPU lookup returns one value per possible CPU (each rounded
	// up to 8 bytes; a u64 already is).
	ncpus = libbpf_num_possible_cpus();
	if (ncpus <= 0)
		return fail("libbpf_num_possible_cpus", ncpus);
	per_cpu = calloc(ncpus, sizeof(*per_cpu));
	if (!per_cpu)
		return fail("calloc", ENOMEM);
	err = bpf_map__lookup_elem(skel->maps.hits, &zero, sizeof(zero), per_cpu,
				   ncpus * sizeof(*per_cpu), 0);
	if (err) {
		free(per_cpu);
		return fail("hits", err);
	}
	for (int i = 0; i < ncpus; i++)
		hits += per_cpu[i];
	free(per_cpu);
	printf("hits %llu\n", (unsigned long long)hits);

	for (__u32 slot = 0; slot < 2; slot++) {
		__u64 c;

		err = bpf_map__lookup_elem(skel->maps.cookies, &slot, sizeof(slot), &c, sizeof(c), 0);
		if (err)
			return fail("cookies", err);
		printf("cookie %u %#llx\n", slot, (unsigned long long)c);
	}

	if (print_counts(skel->maps.sys_counts, "sys"))
		return 1;
	err = bpf_map__lookup_elem(skel->maps.guarded, &zero, sizeof(zero), &v, sizeof(v), 0);
	if (err)
		return fail("guarded", err);
	printf("guarded %llu\n", (unsigned long long)v);
	return print_counts(skel->maps.usdt_steps, "usdt");
}

// A uprobe or uretprobe on FUNC of the target, for every process: the link
// goes to the skeleton's slot so that trace_tool__destroy detaches it.
static int attach_uprobe(struct bpf_program *prog, struct bpf_link **slot,
			 const char *target, const char *func, bool retprobe, __u64 cookie)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = func, .retprobe = retprobe,
		    .bpf_cookie = cookie);
	char what[128];

	*slot = bpf_program__attach_uprobe_opts(prog, -1, target, 0, &opts);
	if (!*slot) {
		int err = -errno;

		snprintf(what, sizeof(what), "attaching %s to %s:%s", bpf_program__name(prog),
			 target, func);
		return fail(what, err);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct ring_buffer *rb = NULL;
	struct perf_buffer *pb = NULL;
	struct trace_tool *skel;
	struct sigaction sa;
	int err, status = 1;

	if (argc != 3) {
		fprintf(stderr, "usage: %s TARGET_PATH COMM\n", argv[0]);
		return 2;
	}

	skel = trace_tool__open();
	if (!skel)
		return fail("opening the skeleton", errno);
	// .rodata is frozen at load: the filter is set before.
	strncpy(skel->rodata->targ_comm, argv[2], sizeof(skel->rodata->targ_comm) - 1);

	// Bare SEC("uprobe") names no binary: these are attached below, by
	// hand, and trace_tool__attach must leave them alone.
	bpf_program__set_autoattach(skel->progs.on_begin, false);
	bpf_program__set_autoattach(skel->progs.on_end, false);
	bpf_program__set_autoattach(skel->progs.on_step, false);
	bpf_program__set_autoattach(skel->progs.on_step_ret, false);
	bpf_program__set_autoattach(skel->progs.on_usdt_step, false);
	bpf_program__set_autoattach(skel->progs.on_usdt_guarded, false);

	err = trace_tool__load(skel);
	if (err) {
		fail("loading the skeleton", err);
		goto out;
	}

	if (attach_uprobe(skel->progs.on_begin, &skel->links.on_begin, argv[1],
			  "target_begin", false, 0) ||
	    attach_uprobe(skel->progs.on_end, &skel->links.on_end, argv[1],
			  "target_end", false, 0) ||
	    attach_uprobe(skel->progs.on_step, &skel->links.on_step, argv[1],
			  "target_step", false, 7) ||
	    attach_uprobe(skel->progs.on_step_ret, &skel->links.on_step_ret, argv[1],
			  "target_step", true, 0x5eed))
		goto out;

	// libbpf's USDT attach: a uprobe at the probe's nop with the spec's id
	// as its cookie.
	skel->links.on_usdt_step = bpf_program__attach_usdt(skel->progs.on_usdt_step, -1, argv[1],
							    "trace_target", "step", NULL);
	if (!skel->links.on_usdt_step) {
		fail("attaching the USDT probe trace_target:step", errno);
		goto out;
	}
	skel->links.on_usdt_guarded = bpf_program__attach_usdt(
		skel->progs.on_usdt_guarded, -1, argv[1], "trace_target", "guarded", NULL);
	if (!skel->links.on_usdt_guarded) {
		fail("attaching the USDT probe trace_target:guarded", errno);
		goto out;
	}

	// The tracepoint and raw tracepoint programs, from their sections.
	err = trace_tool__attach(skel);
	if (err) {
		fail("attaching the tracepoints", err);
		goto out;
	}

	rb = ring_buffer__new(bpf_map__fd(skel->maps.events), on_event, NULL, NULL);
	if (!rb) {
		fail("creating the ring buffer consumer", errno);
		goto out;
	}
	// 8 pages per CPU, as libbpf-tools size theirs.
	pb = perf_buffer__new(bpf_map__fd(skel->maps.perf_rets), 8, on_perf_sample, on_perf_lost,
			      NULL, NULL);
	if (!pb) {
		fail("creating the perf buffer consumer", errno);
		goto out;
	}

	// No SA_RESTART: the signal must interrupt the poll's epoll_wait.
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	printf("ready\n");
	fflush(stdout);

	while (!exiting) {
		err = ring_buffer__poll(rb, 100);
		if (err == -EINTR)
			continue;
		if (err < 0) {
			fail("ring_buffer__poll", err);
			goto out;
		}
		err = perf_buffer__poll(pb, 0);
		if (err < 0 && err != -EINTR) {
			fail("perf_buffer__poll", err);
			goto out;
		}
		// Lines as they arrive, for a reader of a pipe or a log.
		fflush(stdout);
	}

	// Records submitted after the last poll.
	err = ring_buffer__consume(rb);
	if (err < 0) {
		fail("ring_buffer__consume", err);
		goto out;
	}
	err = perf_buffer__consume(pb);
	if (err < 0) {
		fail("perf_buffer__consume", err);
		goto out;
	}
	status = print_maps(skel);
	for (int i = 0; i < MAX_KEYS; i++)
		if (perf_rets[i])
			printf("perf_ret %d %llu\n", i, perf_rets[i]);
	printf("perf_lost %llu\n", perf_lost);
	fflush(stdout);
out:
	perf_buffer__free(pb);
	ring_buffer__free(rb);
	trace_tool__destroy(skel);
	return status;
}
