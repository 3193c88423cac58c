/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A libbpf loader of kernel_objects.bpf.c, as a skeleton-style control
 * plane reads its programs' globals: loads the object, test-runs the tc
 * program on a short and a long frame, then reads the .bss counter and
 * the .rodata threshold where libbpf keeps the global data
 * (bpf_map__initial_value: with Debian 12's libbpf 1.1 and no skeleton,
 * the object file's image, which the runs do not change; newer libbpf
 * maps the maps there) and the tc program's HASH map through bpf().
 * Under `bpfjet exec` the tc program runs in the kernel, so its maps moved
 * there at its load.
 *
 * Then elements a control plane wrote before a kernel program's load (a
 * per-CPU array and a hash map) must be there after it.
 *
 * Then what newer libbpf does with global data (and libbpf 1.1 leaves to
 * skeletons): a BPF_F_MMAPABLE array created and mapped, a value written
 * through the mapping, then a tc program loaded that increments it; the
 * mapping must show the kernel's value after test runs (bpfjet moved the
 * array at the program's load and mapped the kernel's values in place).
 *
 * With PIN_ROOT (an object built with -DPINNED_MAP), libbpf pins the tc
 * program's tc_bytes map there when it creates it, before the program
 * loads; the sum is read back through the pin (BPF_OBJ_GET).
 *
 *   kernel_objects OBJECT [PIN_ROOT]
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

static struct bpf_map *map_ending(struct bpf_object *obj, const char *suffix)
{
	struct bpf_map *m;
	bpf_object__for_each_map(m, obj) {
		const char *n = bpf_map__name(m);
		size_t a = strlen(n), b = strlen(suffix);
		if (a >= b && !strcmp(n + a - b, suffix))
			return m;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: %s OBJECT [PIN_ROOT]\n", argv[0]);
		return 2;
	}
	LIBBPF_OPTS(bpf_object_open_opts, oopts, .pin_root_path = argc == 3 ? argv[2] : NULL);
	struct bpf_object *obj = bpf_object__open_file(argv[1], &oopts);
	if (!obj || bpf_object__load(obj)) {
		fprintf(stderr, "cannot load %s\n", argv[1]);
		return 1;
	}
	struct bpf_program *tc = bpf_object__find_program_by_name(obj, "drop_long");
	unsigned char frame[1200] = {0};
	frame[12] = 0x08;
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 3; i++) {
			LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame,
				    .data_size_in = round ? 1200 : 64);
			int err = bpf_prog_test_run_opts(bpf_program__fd(tc), &opts);
			printf("test run %s %d: err %d retval %u\n", round ? "long" : "short", i, err,
			       opts.retval);
		}
	}
	size_t sz;
	const unsigned long long *runs = bpf_map__initial_value(map_ending(obj, ".bss"), &sz);
	const unsigned int *limit = bpf_map__initial_value(map_ending(obj, ".rodata"), &sz);
	printf("tc_runs at bpf_map__initial_value: %llu\n", runs ? *runs : ~0ull);
	printf("long_frame at bpf_map__initial_value: %u\n", limit ? *limit : ~0u);
	int fd = bpf_map__fd(bpf_object__find_map_by_name(obj, "tc_verdicts"));
	for (unsigned int k = 0; k < 2; k++) {
		unsigned long long v = 0;
		int err = bpf_map_lookup_elem(fd, &k, &v);
		printf("tc_verdicts[%u]: err %d value %llu\n", k, err, v);
	}
	bpf_object__close(obj);
	if (argc == 3) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/tc_bytes", argv[2]);
		int pinned = bpf_obj_get(path);
		unsigned int k = 0;
		unsigned long long v = 0;
		int err = bpf_map_lookup_elem(pinned, &k, &v);
		printf("tc_bytes through its pin: fd %s, err %d value %llu\n", pinned >= 0 ? "ok" : "bad",
		       err, v);
	}

	LIBBPF_OPTS(bpf_map_create_opts, mopts, .map_flags = BPF_F_MMAPABLE);
	int map = bpf_map_create(BPF_MAP_TYPE_ARRAY, "counted", 4, 8, 1, &mopts);
	unsigned long long *value =
		mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, map, 0);
	if (map < 0 || value == MAP_FAILED) {
		fprintf(stderr, "cannot create and map the array\n");
		return 1;
	}
	*value = 41;
	/* r2 = &counted[0]; r1 = *r2; r1 += 1; *r2 = r1; r0 = 0; exit */
	struct bpf_insn insns[] = {
		{.code = BPF_LD | BPF_DW | BPF_IMM, .dst_reg = 2, .src_reg = BPF_PSEUDO_MAP_VALUE, .imm = map},
		{.imm = 0},
		{.code = BPF_LDX | BPF_MEM | BPF_DW, .dst_reg = 1, .src_reg = 2},
		{.code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = 1, .imm = 1},
		{.code = BPF_STX | BPF_MEM | BPF_DW, .dst_reg = 2, .src_reg = 1},
		{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0, .imm = 0},
		{.code = BPF_JMP | BPF_EXIT},
	};
	int prog = bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, "count", "GPL", insns, 7, NULL);
	for (int i = 0; i < 3; i++) {
		LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame, .data_size_in = 64);
		bpf_prog_test_run_opts(prog, &opts);
	}
	unsigned int zero = 0;
	unsigned long long looked_up = 0;
	int err = bpf_map_lookup_elem(map, &zero, &looked_up);
	printf("mapped array after 3 runs: mapping %llu, lookup err %d value %llu\n", *value, err,
	       looked_up);

	/* Elements a control plane wrote before the kernel program's load:
	 * a PERCPU_ARRAY (a value per possible CPU) and a HASH, both named by
	 * a program that only reads them, so the move must carry them. */
	int ncpus = libbpf_num_possible_cpus();
	unsigned long long percpu[ncpus > 0 ? ncpus : 1];
	int pc = bpf_map_create(BPF_MAP_TYPE_PERCPU_ARRAY, "pc_vals", 4, 8, 2, NULL);
	int h = bpf_map_create(BPF_MAP_TYPE_HASH, "h_vals", 4, 8, 8, NULL);
	for (int c = 0; c < ncpus; c++)
		percpu[c] = 100 + c;
	unsigned int one = 1, seven = 7;
	unsigned long long v7 = 77;
	bpf_map_update_elem(pc, &one, percpu, 0);
	bpf_map_update_elem(h, &seven, &v7, 0);
	/* r2 = &pc_vals[0]; r3 = &h_vals[0]; r0 = 0; exit */
	struct bpf_insn reads[] = {
		{.code = BPF_LD | BPF_DW | BPF_IMM, .dst_reg = 2, .src_reg = BPF_PSEUDO_MAP_FD, .imm = pc},
		{.imm = 0},
		{.code = BPF_LD | BPF_DW | BPF_IMM, .dst_reg = 3, .src_reg = BPF_PSEUDO_MAP_FD, .imm = h},
		{.imm = 0},
		{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0, .imm = 0},
		{.code = BPF_JMP | BPF_EXIT},
	};
	int reader = bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, "reads", "GPL", reads, 6, NULL);
	memset(percpu, 0, sizeof(percpu));
	int e1 = bpf_map_lookup_elem(pc, &one, percpu);
	int ok = 1;
	for (int c = 0; c < ncpus; c++)
		ok &= percpu[c] == 100ull + c;
	unsigned long long got7 = 0;
	int e2 = bpf_map_lookup_elem(h, &seven, &got7);
	printf("written before the load: program %s, per-CPU values err %d %s, hash err %d value %llu\n",
	       reader >= 0 ? "loaded" : "refused", e1, ok ? "all kept" : "lost", e2, got7);
	return 0;
}
