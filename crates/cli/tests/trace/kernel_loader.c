/* The kernel oracle of the trace tests: load a BPF object with libbpf,
 * attach every program the kernel's way (uprobes, tracepoints), run the
 * command, and print each slot of the `counts` array as "slot value"
 * (the first 16, or $LOADER_SLOTS).
 * A global `target_tgid` in .rodata, if present, is set to the command's
 * pid so that other processes are not counted.
 * A PERF_EVENT_ARRAY map named `events` is read with libbpf's perf buffer
 * (16 pages per CPU) while the command runs and drained after it ends;
 * each sample is written to $LOADER_EVENTS (if set) as a u32 length (host
 * order) then the bytes the kernel hands over (the data, padded so that
 * the length and the data take a multiple of 8 bytes), and
 * "perfbuf SAMPLES LOST" is printed on stderr.
 * With $LOADER_CGROUP (a cgroup v2 directory), the command is moved into
 * that cgroup before it starts and the directory is put into slot 0 of a
 * CGROUP_ARRAY map named `cgroup_filter`, so that a program can count the
 * command's process tree only (bpf_current_task_under_cgroup).
 * A perf_event program (no auto-attach in libbpf) is linked to a cpu-clock
 * event of the command sampling at $LOADER_SAMPLE_FREQ Hz (49 unless set),
 * inherited by its threads and children, as a profiler opens it for one
 * process.
 * Usage: kernel_loader OBJ CMD ARGS... */
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static FILE *events_out;
static unsigned long long samples, lost;

static void on_sample(void *ctx, int cpu, void *data, __u32 size)
{
	samples++;
	if (events_out) {
		fwrite(&size, sizeof(size), 1, events_out);
		fwrite(data, 1, size, events_out);
	}
}

static void on_lost(void *ctx, int cpu, __u64 n)
{
	lost += n;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s OBJ CMD ARGS...\n", argv[0]);
		return 2;
	}
	int go[2];
	if (pipe(go))
		return 2;
	pid_t child = fork();
	if (child == 0) {
		char c;
		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(126);
		execv(argv[2], argv + 2);
		_exit(127);
	}
	close(go[0]);
	struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
	if (!obj) {
		fprintf(stderr, "open %s failed\n", argv[1]);
		return 2;
	}
	struct bpf_map *rodata = bpf_object__find_map_by_name(obj, ".rodata");
	if (rodata) {
		size_t sz;
		void *init = (void *)bpf_map__initial_value(rodata, &sz);
		if (init && sz >= 4) {
			unsigned int tgid = (unsigned int)child;
			memcpy(init, &tgid, 4);
		}
	}
	if (bpf_object__load(obj)) {
		fprintf(stderr, "load failed\n");
		return 2;
	}
	struct bpf_program *prog;
	bpf_object__for_each_program(prog, obj)
	{
		if (bpf_program__type(prog) == BPF_PROG_TYPE_PERF_EVENT) {
			const char *freq = getenv("LOADER_SAMPLE_FREQ");
			struct perf_event_attr attr = {
				.type = PERF_TYPE_SOFTWARE,
				.size = sizeof(attr),
				.config = PERF_COUNT_SW_CPU_CLOCK,
				.freq = 1,
				.sample_freq = freq ? strtoull(freq, NULL, 0) : 49,
				.inherit = 1,
			};
			int pfd = syscall(__NR_perf_event_open, &attr, child, -1, -1,
					  PERF_FLAG_FD_CLOEXEC);
			if (pfd < 0 || !bpf_program__attach_perf_event(prog, pfd)) {
				fprintf(stderr, "attach %s to a cpu-clock event failed\n",
					bpf_program__name(prog));
				return 2;
			}
			continue;
		}
		if (!bpf_program__attach(prog)) {
			fprintf(stderr, "attach %s failed\n", bpf_program__name(prog));
			return 2;
		}
	}
	struct perf_buffer *pb = NULL;
	struct bpf_map *perf = bpf_object__find_map_by_name(obj, "events");
	if (perf && bpf_map__type(perf) == BPF_MAP_TYPE_PERF_EVENT_ARRAY) {
		const char *path = getenv("LOADER_EVENTS");
		if (path && !(events_out = fopen(path, "w"))) {
			fprintf(stderr, "open %s failed\n", path);
			return 2;
		}
		pb = perf_buffer__new(bpf_map__fd(perf), 16, on_sample, on_lost,
				      NULL, NULL);
		if (!pb) {
			fprintf(stderr, "perf_buffer__new failed\n");
			return 2;
		}
	}
	const char *cgroup = getenv("LOADER_CGROUP");
	if (cgroup) {
		char procs[4096];
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", cgroup);
		FILE *f = fopen(procs, "w");
		if (!f || fprintf(f, "%d\n", (int)child) < 0 || fclose(f)) {
			fprintf(stderr, "moving the command into %s failed\n", cgroup);
			return 2;
		}
		int dir = open(cgroup, O_RDONLY | O_DIRECTORY);
		int map = bpf_object__find_map_fd_by_name(obj, "cgroup_filter");
		unsigned int zero = 0;
		if (dir < 0 || map < 0 ||
		    bpf_map_update_elem(map, &zero, &dir, BPF_ANY)) {
			fprintf(stderr, "cgroup_filter: putting %s in failed\n", cgroup);
			return 2;
		}
	}
	if (write(go[1], "g", 1) != 1)
		return 2;
	int status;
	if (pb) {
		while (waitpid(child, &status, WNOHANG) == 0)
			perf_buffer__poll(pb, 10);
		perf_buffer__consume(pb);
		perf_buffer__free(pb);
		if (events_out)
			fclose(events_out);
		fprintf(stderr, "perfbuf %llu %llu\n", samples, lost);
	} else {
		waitpid(child, &status, 0);
	}
	int fd = bpf_object__find_map_fd_by_name(obj, "counts");
	/* LOADER_SLOTS: how many slots to print (16 unless set). */
	const char *slots_env = getenv("LOADER_SLOTS");
	unsigned int slots = slots_env ? (unsigned int)atoi(slots_env) : 16;
	for (unsigned int k = 0; k < slots; k++) {
		unsigned long long v;
		if (bpf_map_lookup_elem(fd, &k, &v))
			break;
		printf("%u %llu\n", k, v);
	}
	fprintf(stderr, "exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	return 0;
}
