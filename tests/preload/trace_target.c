// The traced program of tests/preload/tracer.sh: everything that
// examples/control_plane/trace_tool observes happens here a known number of
// times, between the calls of target_begin and target_end (the tool's gate):
//   target_step(x) 20 times, x = i % 5 (each of 0..4 four times), returning
//     2x: the return values sum to 80;
//   the USDT probe trace_target:step(i, i % 5) for i in 0..19, and
//     trace_target:guarded(i) as often when its semaphore is raised;
//   openat 3 times: PATH, /nonexistent/bpfjet-trace (ENOENT), PATH again;
//   read 2, close 2, getpid 7, write 1.
//
//   trace_target PATH
//
// Built with `cc -O1 -g` (dynamically linked: the dynamic loader's own
// syscalls come before main and outside the gate).
#include <fcntl.h>
// USDT probes with semaphores: a tracer attached to a probe raises its
// semaphore (the kernel through the uprobe's reference counter, bpfjet in
// the traced process), and code guarded by it runs only then.
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

unsigned short trace_target_step_semaphore __attribute__((unused, section(".probes")));
unsigned short trace_target_guarded_semaphore __attribute__((unused, section(".probes")));
#include <stdio.h>
#include <string.h>
#include <unistd.h>

// The probed functions must stay real, separate calls. noinline keeps them
// out of line; the empty asm with a memory clobber gives them a side effect
// the compiler cannot see through, so calls with an unused result are not
// dropped as calls to a pure function; used keeps the symbols. Bodies that
// differ (the `phase` stores) keep identical-code folding from merging
// target_begin and target_end into one address. GCC could still clone or
// change the signature of a non-static function it sees called with known
// arguments; noipa forbids it (clang has no noipa, nor that optimization at
// -O1).
#if defined(__GNUC__) && !defined(__clang__)
#define PROBED __attribute__((noinline, noipa, used))
#else
#define PROBED __attribute__((noinline, used))
#endif

volatile int phase;

PROBED void target_begin(void)
{
	phase = 1;
	asm volatile("" ::: "memory");
}

// Counts its calls in a global too: a bare `return 2x` is 4 bytes of
// code, shorter than the 5-byte jump bpfjet patches a function's entry
// with (docs/TRACING.md, "Entry probes").
static volatile int steps;

PROBED int target_step(int x)
{
	steps = steps + 1;
	asm volatile("" ::: "memory");
	return x * 2;
}

PROBED void target_end(void)
{
	phase = 2;
	asm volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	// On the stack, not a literal: the kernel's tracepoint program reads the
	// path with bpf_probe_read_user_str, which cannot fault a page in, and
	// the .rodata page of a literal may not be mapped yet at the call (the
	// kernel then reports an empty path). The stack is.
	char missing[] = "/nonexistent/bpfjet-trace";
	char buf[8], line[64];
	int sum = 0, pid = 0, fd1, fd2, fd3, n;

	if (argc != 2) {
		fprintf(stderr, "usage: %s PATH\n", argv[0]);
		return 2;
	}

	target_begin();
	for (int i = 0; i < 20; i++) {
		// A USDT probe in the middle of main (a nop and a note).
		DTRACE_PROBE2(trace_target, step, i, i % 5);
		if (trace_target_guarded_semaphore)
			DTRACE_PROBE1(trace_target, guarded, i);
		sum += target_step(i % 5);
	}

	// open() is openat(AT_FDCWD, ...) in glibc and musl.
	fd1 = open(argv[1], O_RDONLY);
	fd2 = open(missing, O_RDONLY);
	fd3 = open(argv[1], O_RDONLY);
	n = 0;
	if (fd1 >= 0)
		n += read(fd1, buf, sizeof(buf)) > 0;
	if (fd3 >= 0)
		n += read(fd3, buf, sizeof(buf)) > 0;
	if (fd1 >= 0)
		close(fd1);
	if (fd2 >= 0)
		close(fd2);
	if (fd3 >= 0)
		close(fd3);

	// glibc since 2.25 does not cache the pid: each call is a syscall.
	for (int i = 0; i < 7; i++)
		pid ^= getpid();
	(void)pid;

	// write(2), not stdio: a buffered stdout (a file, /dev/null) would be
	// written at exit, after target_end has closed the gate.
	snprintf(line, sizeof(line), "steps sum %d, opened %d, read %d\n", sum,
		 (fd1 >= 0) + (fd2 >= 0) + (fd3 >= 0), n);
	if (write(STDOUT_FILENO, line, strlen(line)) < 0)
		return 1;

	target_end();
	return 0;
}
