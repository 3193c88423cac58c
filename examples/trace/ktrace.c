// ktrace: runs a tracing tool of this directory in the KERNEL with libbpf,
// the reference `bpfjet trace` is compared against. Same command line and
// same output as `bpfjet trace`:
//
//   ktrace [--json] [--events FILE] OBJ -- CMD ARGS...
//
// It starts CMD stopped, sets the object's `targ_tgid` (if it has one) to
// CMD's pid so the programs see only CMD, loads and attaches every program
// by its section name (libbpf's auto-attach), lets CMD run, consumes every
// ring buffer while it runs, and when CMD exits prints every map:
//   text:   bpftrace style, `@MAP[KEY]: VALUE` (integers of 1-8 bytes in
//           decimal, per-CPU values summed; other sizes in hex);
//   --json: {"maps": {NAME: [{"key": HEX, "value": HEX} | {"key": HEX,
//           "values": [HEX per CPU]}]}, "ringbufs": {NAME: {"consumed": N}},
//           "exit_code": N, "cpu": {"consumer_s": X, "consumer_max_rss_kb": N,
//           "target_s": X}}; entries as `bpfjet map dump --json` prints them.
//           "cpu" is what the study reports: the consumer's (this process's)
//           CPU time and memory, and the traced command's CPU time.
// --events FILE: every ring-buffer record as consumed: a u32 length (host
// order) and the record's bytes.
// Exit status: CMD's (128+signal if killed); 2 on a usage or load error.
#define _GNU_SOURCE
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_RINGBUFS 16
#define MAX_LINKS 64

struct ringbuf_tally {
	const char *name;
	unsigned long long consumed;
};

static FILE *events_out;

static int on_record(void *ctx, void *data, size_t size)
{
	struct ringbuf_tally *t = ctx;
	unsigned int len = size;

	t->consumed++;
	if (events_out) {
		fwrite(&len, sizeof(len), 1, events_out);
		fwrite(data, size, 1, events_out);
	}
	return 0;
}

static double seconds(const struct rusage *u)
{
	return u->ru_utime.tv_sec + u->ru_stime.tv_sec +
	       (u->ru_utime.tv_usec + u->ru_stime.tv_usec) / 1e6;
}

static void usage(void)
{
	fprintf(stderr, "usage: ktrace [--json] [--events FILE] OBJ -- CMD ARGS...\n");
	exit(2);
}

/* Sets `targ_tgid` in the object's .rodata before load, found through the
 * .rodata DATASEC of the object's BTF. Objects without it trace every
 * process. */
static int set_target_tgid(struct bpf_object *obj, __u32 tgid)
{
	struct btf *btf = bpf_object__btf(obj);
	struct bpf_map *map;
	const struct btf_type *sec;
	const struct btf_var_secinfo *vs;
	size_t size;
	char *data;
	int id, i;

	if (!btf)
		return 0;
	bpf_object__for_each_map(map, obj) {
		const char *name = bpf_map__name(map);
		size_t n = strlen(name);

		if (n >= 7 && strcmp(name + n - 7, ".rodata") == 0)
			break;
	}
	if (!map)
		return 0;
	id = btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC);
	if (id < 0)
		return 0;
	sec = btf__type_by_id(btf, id);
	/* libbpf 1.1 declares it const; the bytes are writable until load. */
	data = (char *)bpf_map__initial_value(map, &size);
	if (!data)
		return -EINVAL;
	vs = btf_var_secinfos(sec);
	for (i = 0; i < btf_vlen(sec); i++, vs++) {
		const struct btf_type *var = btf__type_by_id(btf, vs->type);

		if (strcmp(btf__name_by_offset(btf, var->name_off), "targ_tgid") == 0) {
			if (vs->size != sizeof(tgid) || vs->offset + vs->size > size)
				return -EINVAL;
			memcpy(data + vs->offset, &tgid, sizeof(tgid));
		}
	}
	return 0;
}

static void print_hex(const unsigned char *b, size_t n)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++)
		printf("%c%c", digits[b[i] >> 4], digits[b[i] & 15]);
}

static unsigned long long as_uint(const unsigned char *b, size_t n)
{
	unsigned long long v = 0;

	memcpy(&v, b, n); /* little-endian host */
	return v;
}

/* One map, as JSON entries or bpftrace-style lines. */
static void dump_map(struct bpf_map *map, bool json, bool *first_map)
{
	const char *name = bpf_map__name(map);
	enum bpf_map_type type = bpf_map__type(map);
	bool percpu = type == BPF_MAP_TYPE_PERCPU_ARRAY || type == BPF_MAP_TYPE_PERCPU_HASH ||
		      type == BPF_MAP_TYPE_LRU_PERCPU_HASH;
	size_t ksz = bpf_map__key_size(map), vsz = bpf_map__value_size(map);
	int ncpu = percpu ? libbpf_num_possible_cpus() : 1;
	size_t stride = percpu ? (vsz + 7) / 8 * 8 : vsz;
	unsigned char *key = calloc(1, ksz), *next = calloc(1, ksz);
	unsigned char *val = calloc(ncpu, stride);
	int fd = bpf_map__fd(map), err;
	bool first = true;

	if (json) {
		printf("%s\"%s\": [", *first_map ? "" : ", ", name);
		*first_map = false;
	}
	for (err = bpf_map_get_next_key(fd, NULL, next); !err;
	     err = bpf_map_get_next_key(fd, key, next)) {
		memcpy(key, next, ksz);
		if (bpf_map_lookup_elem(fd, key, val))
			continue;
		if (json) {
			printf("%s{\"key\": \"", first ? "" : ", ");
			print_hex(key, ksz);
			if (percpu) {
				printf("\", \"values\": [");
				for (int c = 0; c < ncpu; c++) {
					printf("%s\"", c ? ", " : "");
					print_hex(val + c * stride, vsz);
					printf("\"");
				}
				printf("]}");
			} else {
				printf("\", \"value\": \"");
				print_hex(val, vsz);
				printf("\"}");
			}
		} else {
			printf("@%s[", name);
			if (ksz <= 8)
				printf("%llu", as_uint(key, ksz));
			else
				print_hex(key, ksz);
			printf("]: ");
			if (vsz <= 8) {
				unsigned long long sum = 0;

				for (int c = 0; c < ncpu; c++)
					sum += as_uint(val + c * stride, vsz);
				printf("%llu\n", sum);
			} else {
				print_hex(val, vsz);
				printf("\n");
			}
		}
		first = false;
	}
	if (json)
		printf("]");
	else
		printf("\n");
	free(key);
	free(next);
	free(val);
}

int main(int argc, char **argv)
{
	struct ringbuf_tally tallies[MAX_RINGBUFS];
	struct bpf_link *links[MAX_LINKS];
	struct ring_buffer *rb = NULL;
	struct bpf_program *prog;
	struct bpf_object *obj;
	struct bpf_map *map;
	const char *obj_path = NULL, *events_path = NULL;
	bool json = false, first;
	int nrb = 0, nlinks = 0, gate[2], status = 0, i;
	struct rusage target_usage = {}, self_usage;
	pid_t child;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = true;
		else if (strcmp(argv[i], "--events") == 0 && i + 1 < argc)
			events_path = argv[++i];
		else if (strcmp(argv[i], "--") == 0)
			break;
		else if (!obj_path && argv[i][0] != '-')
			obj_path = argv[i];
		else
			usage();
	}
	if (!obj_path || i + 1 >= argc)
		usage();
	if (events_path && !(events_out = fopen(events_path, "w"))) {
		fprintf(stderr, "ktrace: %s: %s\n", events_path, strerror(errno));
		return 2;
	}

	/* The command waits on the gate until the programs are attached. */
	if (pipe(gate)) {
		perror("ktrace: pipe");
		return 2;
	}
	child = fork();
	if (child < 0) {
		perror("ktrace: fork");
		return 2;
	}
	if (child == 0) {
		char go;

		close(gate[1]);
		if (read(gate[0], &go, 1) != 1)
			_exit(127); /* the loader failed: do not run untraced */
		close(gate[0]);
		execvp(argv[i + 1], argv + i + 1);
		fprintf(stderr, "ktrace: %s: %s\n", argv[i + 1], strerror(errno));
		_exit(127);
	}
	close(gate[0]);

	obj = bpf_object__open_file(obj_path, NULL);
	if (!obj) {
		fprintf(stderr, "ktrace: %s: open failed: %s\n", obj_path, strerror(errno));
		goto fail;
	}
	if (set_target_tgid(obj, child)) {
		fprintf(stderr, "ktrace: %s: cannot set targ_tgid\n", obj_path);
		goto fail;
	}
	if (bpf_object__load(obj)) {
		fprintf(stderr, "ktrace: %s: load failed: %s\n", obj_path, strerror(errno));
		goto fail;
	}
	bpf_object__for_each_program(prog, obj) {
		struct bpf_link *link = bpf_program__attach(prog);

		if (!link) {
			fprintf(stderr, "ktrace: %s: attach failed: %s\n", bpf_program__name(prog),
				strerror(errno));
			goto fail;
		}
		if (nlinks == MAX_LINKS) {
			fprintf(stderr, "ktrace: more than %d programs\n", MAX_LINKS);
			goto fail;
		}
		links[nlinks++] = link;
	}
	bpf_object__for_each_map(map, obj) {
		if (bpf_map__type(map) != BPF_MAP_TYPE_RINGBUF)
			continue;
		if (nrb == MAX_RINGBUFS) {
			fprintf(stderr, "ktrace: more than %d ring buffers\n", MAX_RINGBUFS);
			goto fail;
		}
		tallies[nrb] = (struct ringbuf_tally){ .name = bpf_map__name(map) };
		if (!rb)
			rb = ring_buffer__new(bpf_map__fd(map), on_record, &tallies[nrb], NULL);
		else if (ring_buffer__add(rb, bpf_map__fd(map), on_record, &tallies[nrb]))
			rb = NULL;
		if (!rb) {
			fprintf(stderr, "ktrace: ring buffer %s: %s\n", tallies[nrb].name,
				strerror(errno));
			goto fail;
		}
		nrb++;
	}

	if (write(gate[1], "g", 1) != 1) {
		perror("ktrace: start");
		goto fail;
	}
	close(gate[1]);
	for (;;) {
		pid_t done = wait4(child, &status, rb ? WNOHANG : 0, &target_usage);

		if (done == child)
			break;
		if (done < 0 && errno != EINTR) {
			perror("ktrace: wait4");
			return 2;
		}
		if (rb)
			ring_buffer__poll(rb, 50);
	}
	if (rb)
		ring_buffer__consume(rb);
	if (events_out)
		fclose(events_out);

	if (json)
		printf("{\"maps\": {");
	first = true;
	bpf_object__for_each_map(map, obj) {
		if (bpf_map__type(map) == BPF_MAP_TYPE_RINGBUF || bpf_map__is_internal(map))
			continue;
		dump_map(map, json, &first);
	}
	if (json) {
		printf("}, \"ringbufs\": {");
		for (i = 0; i < nrb; i++)
			printf("%s\"%s\": {\"consumed\": %llu}", i ? ", " : "", tallies[i].name,
			       tallies[i].consumed);
		getrusage(RUSAGE_SELF, &self_usage);
		printf("}, \"exit_code\": %d, \"cpu\": {\"consumer_s\": %.3f, "
		       "\"consumer_max_rss_kb\": %ld, \"target_s\": %.3f}}\n",
		       WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
		       seconds(&self_usage), self_usage.ru_maxrss, seconds(&target_usage));
	} else {
		for (i = 0; i < nrb; i++)
			printf("ringbuf %s: %llu records consumed\n", tallies[i].name,
			       tallies[i].consumed);
	}
	ring_buffer__free(rb);
	for (i = 0; i < nlinks; i++)
		bpf_link__destroy(links[i]);
	bpf_object__close(obj);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);

fail:
	/* Closing the gate without a byte makes the command exit untraced. */
	close(gate[1]);
	waitpid(child, NULL, 0);
	return 2;
}
