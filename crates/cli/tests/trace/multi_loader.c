/* The kernel oracle of the uprobe.multi tests: loads a BPF object with
 * libbpf (1.1, which predates uprobe.multi sections: the programs are
 * given their type and BPF_TRACE_UPROBE_MULTI here), resolves each
 * `uprobe.multi/PATH:PATTERN` / `uretprobe.multi/...` section the way
 * libbpf 1.3+ does (STT_FUNC symbols of .symtab matching the glob, else of
 * .dynsym; aliases included; file offsets) — and for a stripped PATH
 * with none, from PATH.debug's .symtab, as bcc and bpftrace name the
 * functions of a stripped file — attaches each with one
 * BPF_LINK_CREATE uprobe-multi link restricted to the command's pid, runs
 * the command and prints `MAP KEY VALUE` for every entry of `counts` and
 * `by_ip` (keys and values as unsigned integers). Before that, each link's
 * info as BPF_OBJ_GET_INFO_BY_FD gives it: `link TYPE COUNT FLAGS PATH
 * OFFSET/COOKIE...` (the pid apart: `pid PID`). With MULTI_COOKIES=1 in the
 * environment each offset gets a cookie (1000 * program + 1 + its index),
 * which bpf_get_attach_cookie gives the program there.
 * Usage: multi_loader OBJ CMD ARGS...
 *
 * With --wait PID it runs no command: it attaches for process PID (0:
 * every process), prints the link lines and `attached`, waits for a line
 * on stdin and then prints the maps (a control plane under `bpfjet exec`
 * while the test runs the command under `bpfjet trace --instance`).
 * Usage: multi_loader --wait PID OBJ
 *
 * With --bad it makes links with one field wrong at a time and prints the
 * errno of each (`bad WHAT ERRNO`).
 * Usage: multi_loader --bad OBJ */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define TRACE_UPROBE_MULTI 48 /* enum bpf_attach_type, Linux 6.6 */
#define UPROBE_MULTI_RETURN 1 /* BPF_F_UPROBE_MULTI_RETURN */
#define MAX_OFFSETS 256

/* libbpf's glob: '*' any run, '?' any one character. */
static bool glob(const char *s, const char *p)
{
	if (!*p)
		return !*s;
	if (*p == '*')
		return glob(s, p + 1) || (*s && glob(s + 1, p));
	if (*s && (*p == '?' || *p == *s))
		return glob(s + 1, p + 1);
	return false;
}

/* The file offset of virtual address vaddr of ELF elf (its PT_LOAD
 * segments); 0 when no segment holds it. */
static unsigned long vaddr_offset(Elf *elf, unsigned long vaddr)
{
	size_t n = 0;
	elf_getphdrnum(elf, &n);
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(elf, i, &ph) && ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr &&
		    vaddr < ph.p_vaddr + ph.p_filesz)
			return vaddr - ph.p_vaddr + ph.p_offset;
	}
	return 0;
}

/* File offsets (in the file `elf`) of the functions matching PATTERN in
 * the symbol tables of `syms` (the file itself, or its debug file). */
static int resolve_in(Elf *elf, Elf *syms, const char *pattern, unsigned long *offs)
{
	int n = 0;
	int types[2] = { SHT_SYMTAB, SHT_DYNSYM };
	for (int t = 0; t < 2 && n == 0; t++) {
		Elf_Scn *scn = NULL;
		while ((scn = elf_nextscn(syms, scn))) {
			GElf_Shdr sh;
			gelf_getshdr(scn, &sh);
			if (sh.sh_type != (unsigned)types[t])
				continue;
			Elf_Data *data = elf_getdata(scn, NULL);
			for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
				GElf_Sym sym;
				gelf_getsym(data, i, &sym);
				const char *name = elf_strptr(syms, sh.sh_link, sym.st_name);
				if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF ||
				    !sym.st_value || !name || !glob(name, pattern))
					continue;
				unsigned long off = vaddr_offset(elf, sym.st_value);
				if (off && n < MAX_OFFSETS)
					offs[n++] = off;
			}
		}
	}
	return n;
}

/* File offsets of the functions of PATH matching PATTERN: its own
 * .symtab, else its .dynsym, else (a stripped file) PATH.debug's .symtab,
 * as bcc and bpftrace name functions from a detached debug file. */
static int resolve(const char *path, const char *pattern, unsigned long *offs)
{
	int fd = open(path, O_RDONLY), n = 0;
	elf_version(EV_CURRENT);
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf)
		return -1;
	n = resolve_in(elf, elf, pattern, offs);
	if (n == 0) {
		char debug[600];
		snprintf(debug, sizeof(debug), "%s.debug", path);
		int dfd = open(debug, O_RDONLY);
		Elf *delf = dfd >= 0 ? elf_begin(dfd, ELF_C_READ, NULL) : NULL;
		if (delf) {
			n = resolve_in(elf, delf, pattern, offs);
			elf_end(delf);
		}
		if (dfd >= 0)
			close(dfd);
	}
	elf_end(elf);
	close(fd);
	return n;
}

struct uprobe_multi_attr {
	__u32 prog_fd, target_fd, attach_type, flags;
	__u64 path, offsets, ref_ctr_offsets, cookies;
	__u32 cnt, multi_flags, pid;
};

/* The link's info as the kernel reports it (struct bpf_link_info's
 * uprobe_multi member, Linux 6.8, laid out by hand: libbpf 1.1's header
 * predates it). */
static void print_link(int link_fd)
{
	unsigned char info[64] = { 0 };
	char path[4096] = { 0 };
	__u64 offs[MAX_OFFSETS] = { 0 }, cookies[MAX_OFFSETS] = { 0 };
	__u32 len = sizeof(info);
	*(__u64 *)(info + 16) = (unsigned long)path;
	*(__u64 *)(info + 24) = (unsigned long)offs;
	*(__u64 *)(info + 40) = (unsigned long)cookies;
	*(__u32 *)(info + 48) = sizeof(path);
	*(__u32 *)(info + 52) = MAX_OFFSETS;
	if (bpf_obj_get_info_by_fd(link_fd, info, &len)) {
		printf("link info error %d\n", errno);
		return;
	}
	__u32 count = *(__u32 *)(info + 52);
	printf("link %u %u %u %s", *(__u32 *)info, count, *(__u32 *)(info + 56), path);
	for (__u32 i = 0; i < count && i < MAX_OFFSETS; i++)
		printf(" %llx/%llu", (unsigned long long)offs[i], (unsigned long long)cookies[i]);
	printf("\npid %u\n", *(__u32 *)(info + 60));
}

static void dump(struct bpf_object *obj, const char *name, int key_size)
{
	int fd = bpf_object__find_map_fd_by_name(obj, name);
	__u64 key = 0, next = 0, value;
	void *prev = NULL;
	if (fd < 0)
		return;
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		if (bpf_map_lookup_elem(fd, &next, &value) == 0)
			printf("%s %llu %llu\n", name,
			       key_size == 4 ? (unsigned long long)(__u32)next : (unsigned long long)next,
			       (unsigned long long)value);
		key = next;
		prev = &key;
	}
}

/* Attach every program of OBJ with an uprobe-multi link for process pid
 * (0: every process). Returns 0 or prints why not. */
static int attach_all(struct bpf_object *obj, int pid)
{
	const char *with_cookies = getenv("MULTI_COOKIES");
	int nprog = 0;
	struct bpf_program *prog;
	bpf_object__for_each_program(prog, obj)
	{
		const char *sec = bpf_program__section_name(prog);
		bool ret = strncmp(sec, "uretprobe.multi/", 16) == 0;
		const char *spec = strchr(sec, '/') + 1;
		char path[512];
		const char *colon = strrchr(spec, ':');
		snprintf(path, sizeof(path), "%.*s", (int)(colon - spec), spec);
		unsigned long offs[MAX_OFFSETS];
		int n = resolve(path, colon + 1, offs);
		if (n <= 0) {
			fprintf(stderr, "%s: no function matches\n", sec);
			return -1;
		}
		struct uprobe_multi_attr attr;
		char buf[128] = { 0 };
		memset(&attr, 0, sizeof(attr));
		attr.prog_fd = bpf_program__fd(prog);
		attr.attach_type = TRACE_UPROBE_MULTI;
		attr.path = (unsigned long)path;
		attr.offsets = (unsigned long)offs;
		attr.cnt = n;
		attr.multi_flags = ret ? UPROBE_MULTI_RETURN : 0;
		attr.pid = pid;
		__u64 cookies[MAX_OFFSETS];
		nprog++;
		if (with_cookies && strcmp(with_cookies, "1") == 0) {
			for (int i = 0; i < n; i++)
				cookies[i] = 1000 * nprog + 1 + i;
			attr.cookies = (unsigned long)cookies;
		}
		memcpy(buf, &attr, sizeof(attr));
		int link = syscall(__NR_bpf, BPF_LINK_CREATE, buf, sizeof(buf));
		if (link < 0) {
			perror("BPF_LINK_CREATE uprobe_multi");
			return -1;
		}
		print_link(link);
	}
	return 0;
}

/* One uprobe-multi BPF_LINK_CREATE of prog_fd from attr's fields: 0 or
 * the errno. */
static int try_link(struct uprobe_multi_attr attr)
{
	char buf[128] = { 0 };
	attr.attach_type = TRACE_UPROBE_MULTI;
	memcpy(buf, &attr, sizeof(attr));
	int fd = syscall(__NR_bpf, BPF_LINK_CREATE, buf, sizeof(buf));
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	return errno;
}

/* Bad input, one field wrong at a time from a good link of the first
 * program at the first matching offset; prints `bad WHAT ERRNO`. */
static int bad_input(struct bpf_object *obj)
{
	struct bpf_program *prog = bpf_object__next_program(obj, NULL);
	const char *sec = bpf_program__section_name(prog);
	const char *spec = strchr(sec, '/') + 1, *colon = strrchr(spec, ':');
	char path[512];
	snprintf(path, sizeof(path), "%.*s", (int)(colon - spec), spec);
	unsigned long offs[MAX_OFFSETS], neg = (unsigned long)-8;
	if (resolve(path, colon + 1, offs) <= 0)
		return 2;
	struct uprobe_multi_attr good = { 0 }, a;
	good.prog_fd = bpf_program__fd(prog);
	good.path = (unsigned long)path;
	good.offsets = (unsigned long)offs;
	good.cnt = 1;
#define BAD(what, field, value)                                        \
	do {                                                           \
		a = good;                                              \
		a.field = value;                                       \
		printf("bad %s %d\n", what, try_link(a));              \
	} while (0)
	printf("good %d\n", try_link(good));
	BAD("flags", multi_flags, 2);
	BAD("no-path", path, 0);
	BAD("no-offsets", offsets, 0);
	BAD("no-count", cnt, 0);
	BAD("huge-count", cnt, (1u << 20) + 1);
	BAD("missing-file", path, (unsigned long)"/nonexistent/bpfjet-file");
	BAD("directory", path, (unsigned long)"/tmp");
	BAD("no-process", pid, 0x3fffffff);
	BAD("negative-pid", pid, (__u32)-1);
	BAD("negative-offset", offsets, (unsigned long)&neg);
	BAD("unreadable-offsets", offsets, 8);
	BAD("unreadable-cookies", cookies, 8);
	return 0;
}

static struct bpf_object *load(const char *file)
{
	struct bpf_object *obj = bpf_object__open_file(file, NULL);
	if (!obj) {
		fprintf(stderr, "open %s failed\n", file);
		return NULL;
	}
	struct bpf_program *prog;
	bpf_object__for_each_program(prog, obj)
	{
		bpf_program__set_type(prog, BPF_PROG_TYPE_KPROBE);
		bpf_program__set_expected_attach_type(prog, TRACE_UPROBE_MULTI);
	}
	if (bpf_object__load(obj)) {
		fprintf(stderr, "load failed (a kernel without uprobe-multi links?)\n");
		return NULL;
	}
	return obj;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--bad") == 0) {
		struct bpf_object *obj = load(argv[2]);
		return obj ? bad_input(obj) : 2;
	}
	if (argc == 4 && strcmp(argv[1], "--wait") == 0) {
		struct bpf_object *obj = load(argv[3]);
		if (!obj || attach_all(obj, atoi(argv[2])))
			return 2;
		printf("attached\n");
		fflush(stdout);
		char line[16];
		if (!fgets(line, sizeof(line), stdin))
			return 2;
		dump(obj, "counts", 4);
		dump(obj, "by_ip", 8);
		return 0;
	}
	if (argc < 3) {
		fprintf(stderr, "usage: %s OBJ CMD ARGS... | --wait PID OBJ\n", argv[0]);
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
	struct bpf_object *obj = load(argv[1]);
	if (!obj || attach_all(obj, child))
		return 2;
	fflush(stdout);
	if (write(go[1], "g", 1) != 1)
		return 2;
	int status;
	waitpid(child, &status, 0);
	dump(obj, "counts", 4);
	dump(obj, "by_ip", 8);
	fprintf(stderr, "exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	return 0;
}
