// A small libbpf control plane for the `bpfjet exec` tests: the same binary
// runs against the kernel and under `bpfjet exec`, and must print the same
// lines. It prints only what both must agree on: values, return codes and
// errnos (never ids, times or verifier wording).
//
//   cp_demo OBJ        OBJ: xdp_count.bpf.o
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

static const char *err_name(int e)
{
	switch (e) {
	case 0: return "0";
	case ENOENT: return "ENOENT";
	case EEXIST: return "EEXIST";
	case E2BIG: return "E2BIG";
	case EBADF: return "EBADF";
	case EINVAL: return "EINVAL";
	case EACCES: return "EACCES";
	case EPERM: return "EPERM";
	case ENOSPC: return "ENOSPC";
	case EBUSY: return "EBUSY";
	default: return strerror(e);
	}
}

#define SHOW(what, call)                                                    \
	do {                                                                \
		int r_ = (call);                                            \
		printf("%s: %s\n", what, r_ < 0 ? err_name(errno) : "ok"); \
	} while (0)

static void maps(void)
{
	LIBBPF_OPTS(bpf_map_create_opts, o);
	int fd = bpf_map_create(BPF_MAP_TYPE_HASH, "cp_hash", 4, 8, 4, &o);
	__u32 k;
	__u64 v;

	if (fd < 0) {
		printf("map create: %s\n", err_name(errno));
		return;
	}
	for (k = 1; k <= 4; k++) {
		v = k * 100;
		SHOW("update", bpf_map_update_elem(fd, &k, &v, BPF_NOEXIST));
	}
	k = 5;
	SHOW("update over max_entries", bpf_map_update_elem(fd, &k, &v, BPF_ANY));
	k = 2;
	SHOW("update NOEXIST on existing", bpf_map_update_elem(fd, &k, &v, BPF_NOEXIST));
	k = 9;
	SHOW("update EXIST on missing", bpf_map_update_elem(fd, &k, &v, BPF_EXIST));
	SHOW("lookup missing", bpf_map_lookup_elem(fd, &k, &v));
	k = 3;
	v = 0;
	SHOW("lookup", bpf_map_lookup_elem(fd, &k, &v));
	printf("value of 3: %llu\n", (unsigned long long)v);
	SHOW("delete", bpf_map_delete_elem(fd, &k));
	SHOW("delete again", bpf_map_delete_elem(fd, &k));
	{
		/* Keys in iteration order differ between hash tables: sum them. */
		__u32 cur, next, sum = 0, n = 0;
		void *prev = NULL;
		while (bpf_map_get_next_key(fd, prev, &next) == 0) {
			sum += next;
			n++;
			cur = next;
			prev = &cur;
		}
		printf("keys: %u sum %u, end: %s\n", n, sum, err_name(errno));
	}
	k = 1;
	SHOW("lookup_and_delete", bpf_map_lookup_and_delete_elem(fd, &k, &v));
	printf("popped value: %llu\n", (unsigned long long)v);
	SHOW("freeze", bpf_map_freeze(fd));
	SHOW("freeze again", bpf_map_freeze(fd));
	SHOW("update frozen", bpf_map_update_elem(fd, &k, &v, BPF_ANY));
	close(fd);

	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "cp_arr", 4, 4, 8, &o);
	k = 8;
	SHOW("array index out of range", bpf_map_update_elem(fd, &k, &v, BPF_ANY));
	k = 7;
	SHOW("array NOEXIST", bpf_map_update_elem(fd, &k, &v, BPF_NOEXIST));
	close(fd);

	SHOW("bad map type", bpf_map_create(1000, "x", 4, 4, 1, &o));
	k = 0;
	SHOW("lookup on bad fd", bpf_map_lookup_elem(9999, &k, &v));
	{
		/* A bigger attr than the kernel knows, with a non-zero tail. */
		char attr[4096 + 16];
		memset(attr, 0, sizeof(attr));
		attr[4000] = 1;
		SHOW("oversized attr", (int)syscall(__NR_bpf, BPF_MAP_CREATE, attr, 4096));
	}
}

static void program(const char *path)
{
	struct bpf_object *obj = bpf_object__open_file(path, NULL);
	struct bpf_program *prog;
	int limit_fd, counts_fd, prog_fd;
	unsigned char pkt[100], out[128];
	__u32 zero = 0, lim = 80, len;
	__u64 n;

	if (!obj || bpf_object__load(obj)) {
		printf("object load: %s\n", err_name(errno));
		return;
	}
	prog = bpf_object__find_program_by_name(obj, "xdp_count");
	prog_fd = bpf_program__fd(prog);
	limit_fd = bpf_object__find_map_fd_by_name(obj, "limit");
	counts_fd = bpf_object__find_map_fd_by_name(obj, "counts");
	SHOW("set limit", bpf_map_update_elem(limit_fd, &zero, &lim, BPF_ANY));
	memset(pkt, 0xab, sizeof(pkt));
	for (len = 60; len <= 100; len += 20) {
		LIBBPF_OPTS(bpf_test_run_opts, t, .data_in = pkt, .data_size_in = len,
			    .data_out = out, .data_size_out = sizeof(out), .repeat = 3);
		int r = bpf_prog_test_run_opts(prog_fd, &t);
		printf("test_run len %u: %s retval %u size_out %u same %d\n", len,
		       r ? err_name(errno) : "ok", t.retval, t.data_size_out,
		       memcmp(out, pkt, len) == 0);
	}
	{
		LIBBPF_OPTS(bpf_test_run_opts, t, .data_in = pkt, .data_size_in = 60,
			    .data_out = out, .data_size_out = 10);
		int r = bpf_prog_test_run_opts(prog_fd, &t);
		printf("test_run small data_out: %s size_out %u\n", r ? err_name(errno) : "ok",
		       t.data_size_out);
	}
	{
		/* .bss mapped as a skeleton maps it: the program's live memory. */
		struct bpf_map *bss = bpf_object__find_map_by_name(obj, ".bss");
		long page = sysconf(_SC_PAGESIZE);
		const __u64 *packets = mmap(NULL, page, PROT_READ, MAP_SHARED, bpf_map__fd(bss), 0);
		__u32 k0 = 0;
		__u64 via_syscall = 0;

		if (packets == MAP_FAILED)
			printf(".bss mmap: %s\n", err_name(errno));
		else
			printf(".bss packets (mmap): %llu\n", (unsigned long long)*packets);
		bpf_map_lookup_elem(bpf_map__fd(bss), &k0, &via_syscall);
		printf(".bss packets (lookup): %llu\n", (unsigned long long)via_syscall);
	}
	for (len = 60; len <= 100; len += 20) {
		n = 0;
		bpf_map_lookup_elem(counts_fd, &len, &n);
		printf("count[%u] = %llu\n", len, (unsigned long long)n);
	}
	bpf_object__close(obj);
}

static void rejected(void)
{
	/* Reads an uninitialised register: every verifier refuses it. */
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = 0, .src_reg = 5 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	char log[4096] = "";
	LIBBPF_OPTS(bpf_prog_load_opts, o, .log_buf = log, .log_size = sizeof(log),
		    .log_level = 1);
	int fd = bpf_prog_load(BPF_PROG_TYPE_XDP, "bad", "GPL", insns, 2, &o);

	printf("bad program: %s, log %s\n", fd < 0 ? err_name(errno) : "loaded",
	       log[0] ? "explains" : "empty");

	/* Log buffers the kernel refuses or fills up. */
	{
		LIBBPF_OPTS(bpf_prog_load_opts, tiny, .log_buf = log, .log_size = 64,
			    .log_level = 1);
		fd = bpf_prog_load(BPF_PROG_TYPE_XDP, "bad", "GPL", insns, 2, &tiny);
		printf("bad program, 64-byte log: %s\n", fd < 0 ? err_name(errno) : "loaded");
	}
	{
		LIBBPF_OPTS(bpf_prog_load_opts, small, .log_buf = log, .log_size = 128,
			    .log_level = 1);
		log[0] = 0;
		fd = bpf_prog_load(BPF_PROG_TYPE_XDP, "bad", "GPL", insns, 2, &small);
		printf("bad program, 128-byte log: %s, terminated %d\n",
		       fd < 0 ? err_name(errno) : "loaded", memchr(log, 0, 128) != NULL);
	}
	{
		LIBBPF_OPTS(bpf_prog_load_opts, nolevel, .log_buf = log, .log_size = sizeof(log));
		fd = bpf_prog_load(BPF_PROG_TYPE_XDP, "bad", "GPL", insns, 2, &nolevel);
		printf("bad program, log without level: %s\n", fd < 0 ? err_name(errno) : "loaded");
	}
}

/* BPF_F_LOCK: a value with a struct bpf_spin_lock, described by BTF the
 * program loads itself. */
static void locked(void)
{
	struct btf *btf = btf__new_empty();
	int u32_id, lock_id, val_id, btf_fd, fd;
	struct { __u32 lock; __u32 v; } val = { 0, 5 }, got = { 0, 0 };
	__u32 k = 1;

	u32_id = btf__add_int(btf, "unsigned int", 4, 0);
	lock_id = btf__add_struct(btf, "bpf_spin_lock", 4);
	btf__add_field(btf, "val", u32_id, 0, 0);
	val_id = btf__add_struct(btf, "locked_val", 8);
	btf__add_field(btf, "lock", lock_id, 0, 0);
	btf__add_field(btf, "v", u32_id, 32, 0);
	if (btf__load_into_kernel(btf)) {
		printf("btf load: %s\n", err_name(errno));
		return;
	}
	btf_fd = btf__fd(btf);
	{
		LIBBPF_OPTS(bpf_map_create_opts, o, .btf_fd = btf_fd, .btf_key_type_id = u32_id,
			    .btf_value_type_id = val_id);
		fd = bpf_map_create(BPF_MAP_TYPE_HASH, "cp_locked", 4, 8, 4, &o);
	}
	if (fd < 0) {
		printf("locked map create: %s\n", err_name(errno));
		btf__free(btf);
		return;
	}
	SHOW("update BPF_F_LOCK on a new key", bpf_map_update_elem(fd, &k, &val, BPF_F_LOCK));
	SHOW("update plain", bpf_map_update_elem(fd, &k, &val, BPF_ANY));
	val.v = 6;
	SHOW("update BPF_F_LOCK", bpf_map_update_elem(fd, &k, &val, BPF_F_LOCK));
	SHOW("lookup BPF_F_LOCK", bpf_map_lookup_elem_flags(fd, &k, &got, BPF_F_LOCK));
	printf("locked value: %u\n", got.v);
	close(fd);
	fd = bpf_map_create(BPF_MAP_TYPE_HASH, "cp_nolock", 4, 8, 4, NULL);
	SHOW("BPF_F_LOCK without a lock", bpf_map_update_elem(fd, &k, &val, BPF_F_LOCK));
	close(fd);
	btf__free(btf);
}

/* Map fds are real fds: dup, fork, /proc/self/fd behave as the kernel's. */
static void fds(void)
{
	int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "cp_fds", 4, 8, 2, NULL);
	int copy = dup(fd);
	__u32 k = 1;
	__u64 v = 77, got = 0;
	char path[64], link[64] = "";
	pid_t child;
	int status;

	SHOW("update through dup", bpf_map_update_elem(copy, &k, &v, BPF_ANY));
	close(copy);
	SHOW("lookup after closing the dup", bpf_map_lookup_elem(fd, &k, &got));
	printf("value: %llu\n", (unsigned long long)got);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (readlink(path, link, sizeof(link) - 1) < 0)
		strcpy(link, strerror(errno));
	printf("fd link: %s\n", link);
	child = fork();
	if (child == 0) {
		v = 99;
		_exit(bpf_map_update_elem(fd, &k, &v, BPF_EXIST) ? 1 : 0);
	}
	waitpid(child, &status, 0);
	printf("child update: exit %d\n", WEXITSTATUS(status));
	SHOW("lookup after the child", bpf_map_lookup_elem(fd, &k, &got));
	printf("value: %llu\n", (unsigned long long)got);
	close(fd);
	SHOW("lookup on the closed fd", bpf_map_lookup_elem(fd, &k, &got));
}

/* Other system calls pass through syscall() unchanged, all six slots. */
static void passthrough(void)
{
	char buf[8] = "";
	int p[2];
	void *m;

	printf("getpid matches: %d\n", syscall(SYS_getpid) == getpid());
	if (pipe(p) == 0) {
		syscall(SYS_write, p[1], "abcdef", 6);
		printf("read through syscall(): %ld\n", syscall(SYS_read, p[0], buf, 3));
		printf("data: %.3s\n", buf);
		close(p[0]);
		close(p[1]);
	}
	m = (void *)syscall(SYS_mmap, NULL, 4096, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	printf("six-argument mmap through syscall(): %s\n", m == MAP_FAILED ? strerror(errno) : "ok");
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s xdp_count.bpf.o\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	libbpf_set_print(NULL);
	maps();
	locked();
	fds();
	passthrough();
	program(argv[1]);
	rejected();
	return 0;
}
