/* The kernel oracle of the uprobe.multi tests: loads a BPF object with
 * libbpf (1.1, which predates uprobe.multi sections: the programs are
 * given their type and BPF_TRACE_UPROBE_MULTI here), resolves each
 * `uprobe.multi/PATH:PATTERN` / `uretprobe.multi/...` section the way
 * libbpf 1.3+ does (STT_FUNC symbols of .symtab matching the glob, else of
 * .dynsym; aliases included; file offsets), attaches each with one
 * BPF_LINK_CREATE uprobe-multi link restricted to the command's pid, runs
 * the command and prints `MAP KEY VALUE` for every entry of `counts` and
 * `by_ip` (keys and values as unsigned integers).
 * Usage: multi_loader OBJ CMD ARGS... */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
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

/* File offsets of the functions of PATH matching PATTERN. */
static int resolve(const char *path, const char *pattern, unsigned long *offs)
{
	int fd = open(path, O_RDONLY), n = 0;
	elf_version(EV_CURRENT);
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf)
		return -1;
	int types[2] = { SHT_SYMTAB, SHT_DYNSYM };
	for (int t = 0; t < 2 && n == 0; t++) {
		Elf_Scn *scn = NULL;
		while ((scn = elf_nextscn(elf, scn))) {
			GElf_Shdr sh;
			gelf_getshdr(scn, &sh);
			if (sh.sh_type != (unsigned)types[t])
				continue;
			Elf_Data *data = elf_getdata(scn, NULL);
			for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
				GElf_Sym sym;
				gelf_getsym(data, i, &sym);
				const char *name = elf_strptr(elf, sh.sh_link, sym.st_name);
				if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF ||
				    !sym.st_value || !name || !glob(name, pattern))
					continue;
				GElf_Shdr home;
				gelf_getshdr(elf_getscn(elf, sym.st_shndx), &home);
				if (n < MAX_OFFSETS)
					offs[n++] = sym.st_value - home.sh_addr + home.sh_offset;
			}
		}
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
	struct bpf_program *prog;
	bpf_object__for_each_program(prog, obj)
	{
		bpf_program__set_type(prog, BPF_PROG_TYPE_KPROBE);
		bpf_program__set_expected_attach_type(prog, TRACE_UPROBE_MULTI);
	}
	if (bpf_object__load(obj)) {
		fprintf(stderr, "load failed (a kernel without uprobe-multi links?)\n");
		return 2;
	}
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
			return 2;
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
		attr.pid = child;
		memcpy(buf, &attr, sizeof(attr));
		if (syscall(__NR_bpf, BPF_LINK_CREATE, buf, sizeof(buf)) < 0) {
			perror("BPF_LINK_CREATE uprobe_multi");
			return 2;
		}
	}
	if (write(go[1], "g", 1) != 1)
		return 2;
	int status;
	waitpid(child, &status, 0);
	dump(obj, "counts", 4);
	dump(obj, "by_ip", 8);
	fprintf(stderr, "exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	return 0;
}
