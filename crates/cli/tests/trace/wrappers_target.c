/* The libc wrappers of the system-call fast path, each called once
 * succeeding and once failing, inside a window a tracer sees between two
 * getpriority calls (tests/trace/wrappers.bpf.c,
 * crates/cli/tests/trace_wrappers.rs). For each call the program keeps its
 * own record, by the number of the system call the wrapper issues: calls,
 * and the sum of the raw results as the kernel reports them (the result,
 * or -errno for -1). It checks what it sees (errno of each failure, data
 * read back) and writes "nr calls sum" lines to RECORD after the window;
 * exit status 0 if every check held.
 * Usage: wrappers_target DIR RECORD */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "raw_syscall.h"

#define NR 512
static long calls[NR], sums[NR];
static int failures;
static char why[64][96];

static void note(const char *what, long ret, int err)
{
	if (failures < 64)
		snprintf(why[failures], sizeof why[0], "%s: ret %ld errno %d", what, ret, err);
	failures++;
}

static void record(int nr, long ret, int err)
{
	calls[nr]++;
	sums[nr] += ret == -1 ? -(long)err : ret;
}

/* A call expected to succeed: counted, -1 noted. */
#define OK(nr, expr)                                                           \
	({                                                                     \
		errno = 0;                                                     \
		long r_ = (long)(expr);                                        \
		int e_ = errno;                                                \
		record(nr, r_, e_);                                            \
		if (r_ == -1)                                                  \
			note(#expr, r_, e_);                                   \
		r_;                                                            \
	})

/* A call expected to fail with errno `want`. */
#define FAILS(nr, want, expr)                                                  \
	do {                                                                   \
		errno = 0;                                                     \
		long r_ = (long)(expr);                                        \
		int e_ = errno;                                                \
		record(nr, r_, e_);                                            \
		if (r_ != -1 || e_ != (want))                                  \
			note(#expr, r_, e_);                                   \
	} while (0)

/* A call whose outcome depends on the caller (recorded, not checked). */
#define TRY(nr, expr)                                                          \
	do {                                                                   \
		errno = 0;                                                     \
		long r_ = (long)(expr);                                        \
		record(nr, r_, errno);                                         \
	} while (0)

/* The window's markers: the only getpriority calls of the program. */
static void marker(void)
{
	syscall(SYS_getpriority, PRIO_PROCESS, 0);
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	const char *dir = argv[1];
	/* Set up outside the window: memory, a child to wait for. */
	char *pages = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pages == MAP_FAILED)
		return 2;
	memset(pages, 1, 4 * 4096);
	pid_t kid = fork();
	if (kid == 0)
		_exit(3);
	/* Exited before the window (not reaped: wait4 does it inside). */
	siginfo_t info;
	if (waitid(P_PID, kid, &info, WEXITED | WNOWAIT))
		return 2;
	void *volatile bad = (void *)8;
	char buf[4096];
	struct stat st;
	int p[2], q[2], sv[2];
	struct iovec iov = { buf, 5 };
	off_t o1 = 0, o2 = 0;

	marker();
	/* Files and directories. */
	OK(SYS_chdir, chdir(dir));
	FAILS(SYS_chdir, ENOENT, chdir("no/such/dir"));
	int fd = OK(SYS_openat, open("f", O_CREAT | O_RDWR | O_TRUNC, 0644));
	FAILS(SYS_openat, ENOENT, open("no/such", O_RDONLY));
	int fd2 = OK(SYS_openat, openat(AT_FDCWD, "g", O_CREAT | O_RDWR | O_TRUNC, 0600));
	FAILS(SYS_openat, EBADF, openat(-5, "f", O_RDONLY));
	OK(SYS_write, write(fd, "hello world", 11));
	FAILS(SYS_write, EBADF, write(-1, "x", 1));
	OK(SYS_pwrite64, pwrite64(fd, "HE", 2, 0));
	FAILS(SYS_pwrite64, EBADF, pwrite64(-1, "x", 1, 0));
	OK(SYS_lseek, lseek(fd, 0, SEEK_SET));
	FAILS(SYS_lseek, EINVAL, lseek(fd, -5, SEEK_SET));
	OK(SYS_read, read(fd, buf, 11));
	if (memcmp(buf, "HEllo world", 11))
		note("read back", 0, 0);
	FAILS(SYS_read, EBADF, read(-1, buf, 1));
	OK(SYS_pread64, pread64(fd, buf, 5, 6));
	FAILS(SYS_pread64, EINVAL, pread64(fd, buf, 5, -1));
	OK(SYS_readv, readv(fd, &iov, 1));
	FAILS(SYS_readv, EBADF, readv(-1, &iov, 1));
	OK(SYS_writev, writev(fd2, &iov, 1));
	FAILS(SYS_writev, EBADF, writev(-1, &iov, 1));
	OK(SYS_fsync, fsync(fd));
	FAILS(SYS_fsync, EBADF, fsync(-1));
	OK(SYS_fdatasync, fdatasync(fd));
	FAILS(SYS_fdatasync, EBADF, fdatasync(-1));
	OK(SYS_newfstatat, fstatat(AT_FDCWD, "f", &st, 0));
	FAILS(SYS_newfstatat, ENOENT, fstatat(AT_FDCWD, "no/such", &st, 0));
	/* fstat and stat tail-call fstatat: its probe sees them. */
	OK(SYS_newfstatat, fstat(fd, &st));
	if (st.st_size != 11)
		note("fstat size", st.st_size, 0);
	OK(SYS_newfstatat, stat("f", &st));
	FAILS(SYS_newfstatat, EFAULT, stat("f", bad));
	int dfd = OK(SYS_openat, open(".", O_RDONLY | O_DIRECTORY));
	OK(SYS_getdents64, getdents64(dfd, buf, sizeof buf));
	FAILS(SYS_getdents64, EBADF, getdents64(-1, buf, sizeof buf));
	OK(SYS_dup, dup(fd));
	FAILS(SYS_dup, EBADF, dup(-1));
	OK(SYS_dup2, dup2(fd, 200));
	FAILS(SYS_dup2, EBADF, dup2(-1, 200));
	OK(SYS_dup3, dup3(fd, 201, O_CLOEXEC));
	FAILS(SYS_dup3, EINVAL, dup3(fd, fd, 0));
	OK(SYS_pipe2, pipe(p));
	FAILS(SYS_pipe2, EFAULT, pipe(bad));
	OK(SYS_pipe2, pipe2(q, O_CLOEXEC));
	FAILS(SYS_pipe2, EINVAL, pipe2(q, 0x12345678));
	int n = 0;
	OK(SYS_write, write(p[1], "abc", 3));
	OK(SYS_ioctl, ioctl(p[0], FIONREAD, &n));
	if (n != 3)
		note("FIONREAD", n, 0);
	FAILS(SYS_ioctl, EBADF, ioctl(-1, FIONREAD, &n));
	OK(SYS_mkdir, mkdir("d1", 0755));
	FAILS(SYS_mkdir, EEXIST, mkdir("d1", 0755));
	OK(SYS_mkdirat, mkdirat(AT_FDCWD, "d2", 0755));
	FAILS(SYS_mkdirat, EEXIST, mkdirat(AT_FDCWD, "d2", 0755));
	OK(SYS_rmdir, rmdir("d1"));
	FAILS(SYS_rmdir, ENOENT, rmdir("d1"));
	OK(SYS_link, link("f", "l1"));
	FAILS(SYS_link, EEXIST, link("f", "l1"));
	OK(SYS_linkat, linkat(AT_FDCWD, "f", AT_FDCWD, "l2", 0));
	FAILS(SYS_linkat, EEXIST, linkat(AT_FDCWD, "f", AT_FDCWD, "l2", 0));
	OK(SYS_symlink, symlink("f", "s1"));
	FAILS(SYS_symlink, EEXIST, symlink("f", "s1"));
	OK(SYS_symlinkat, symlinkat("f", AT_FDCWD, "s2"));
	FAILS(SYS_symlinkat, EEXIST, symlinkat("f", AT_FDCWD, "s2"));
	OK(SYS_readlink, readlink("s1", buf, 64));
	FAILS(SYS_readlink, EINVAL, readlink("f", buf, 64));
	OK(SYS_readlinkat, readlinkat(AT_FDCWD, "s2", buf, 64));
	FAILS(SYS_readlinkat, EINVAL, readlinkat(AT_FDCWD, "f", buf, 64));
	OK(SYS_rename, rename("l1", "l3"));
	FAILS(SYS_rename, ENOENT, rename("l1", "l3"));
	OK(SYS_renameat, renameat(AT_FDCWD, "l3", AT_FDCWD, "l4"));
	FAILS(SYS_renameat, ENOENT, renameat(AT_FDCWD, "l3", AT_FDCWD, "l4"));
	OK(SYS_unlink, unlink("l4"));
	FAILS(SYS_unlink, ENOENT, unlink("l4"));
	OK(SYS_unlinkat, unlinkat(AT_FDCWD, "d2", AT_REMOVEDIR));
	FAILS(SYS_unlinkat, EBADF, unlinkat(-5, "x", 0));
	OK(SYS_access, access("f", R_OK));
	FAILS(SYS_access, ENOENT, access("no/such", R_OK));
	OK(SYS_fchdir, fchdir(dfd));
	FAILS(SYS_fchdir, EBADF, fchdir(-1));
	OK(SYS_chmod, chmod("f", 0600));
	FAILS(SYS_chmod, ENOENT, chmod("no/such", 0600));
	OK(SYS_fchmod, fchmod(fd, 0644));
	FAILS(SYS_fchmod, EBADF, fchmod(-1, 0644));
	OK(SYS_chown, chown("f", -1, -1));
	FAILS(SYS_chown, ENOENT, chown("no/such", -1, -1));
	OK(SYS_fchown, fchown(fd, -1, -1));
	FAILS(SYS_fchown, EBADF, fchown(-1, -1, -1));
	OK(SYS_lchown, lchown("s1", -1, -1));
	FAILS(SYS_lchown, ENOENT, lchown("no/such", -1, -1));
	OK(SYS_umask, umask(022));
	OK(SYS_umask, umask(027));
	OK(SYS_truncate, truncate("g", 100));
	FAILS(SYS_truncate, ENOENT, truncate("no/such", 100));
	OK(SYS_ftruncate, ftruncate(fd2, 200));
	FAILS(SYS_ftruncate, EBADF, ftruncate(-1, 200));
	OK(SYS_fallocate, fallocate(fd2, 0, 0, 4096));
	FAILS(SYS_fallocate, EBADF, fallocate(-1, 0, 0, 4096));
	OK(SYS_flock, flock(fd, LOCK_SH));
	FAILS(SYS_flock, EBADF, flock(-1, LOCK_SH));
	OK(SYS_syncfs, syncfs(fd));
	FAILS(SYS_syncfs, EBADF, syncfs(-1));
	o1 = 0;
	OK(SYS_sendfile, sendfile(p[1], fd, &o1, 4));
	FAILS(SYS_sendfile, EBADF, sendfile(-1, fd, &o1, 4));
	o1 = 0;
	OK(SYS_splice, splice(fd, &o1, p[1], NULL, 4, 0));
	FAILS(SYS_splice, EBADF, splice(-1, &o1, p[1], NULL, 4, 0));
	o1 = 0;
	o2 = 0;
	OK(SYS_copy_file_range, copy_file_range(fd, &o1, fd2, &o2, 5, 0));
	FAILS(SYS_copy_file_range, EBADF, copy_file_range(-1, &o1, fd2, &o2, 5, 0));
	/* Memory. */
	void *m = (void *)OK(SYS_mmap, mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	FAILS(SYS_mmap, EINVAL, mmap(NULL, 4096, PROT_READ, MAP_ANONYMOUS, -1, 0));
	/* An unaligned offset: glibc fails it without a system call. */
	errno = 0;
	if (mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 1) != MAP_FAILED || errno != EINVAL)
		note("mmap unaligned offset", 0, errno);
	OK(SYS_munmap, munmap(m, 4096));
	OK(SYS_mprotect, mprotect(pages, 4096, PROT_READ));
	FAILS(SYS_mprotect, EINVAL, mprotect(pages + 1, 4096, PROT_READ));
	OK(SYS_madvise, madvise(pages + 4096, 4096, MADV_DONTNEED));
	FAILS(SYS_madvise, EINVAL, madvise(pages + 1, 4096, MADV_DONTNEED));
	OK(SYS_msync, msync(pages, 4096, MS_ASYNC));
	FAILS(SYS_msync, EINVAL, msync(pages + 1, 4096, MS_ASYNC));
	OK(SYS_mlock, mlock(pages, 4096));
	OK(SYS_munlock, munlock(pages, 4096));
	OK(SYS_munmap, munmap(pages + 3 * 4096, 4096));
	FAILS(SYS_munmap, EINVAL, munmap(pages + 1, 4096));
	OK(SYS_memfd_create, memfd_create("w", 0));
	FAILS(SYS_memfd_create, EINVAL, memfd_create("w", 0xffff));
	/* Waiting and events. */
	struct pollfd pfd = { p[0], POLLIN, 0 };
	OK(SYS_poll, poll(&pfd, 1, 0));
	FAILS(SYS_poll, EFAULT, poll(bad, 1, 0));
	int ep = OK(SYS_epoll_create1, epoll_create1(0));
	FAILS(SYS_epoll_create1, EINVAL, epoll_create1(-1));
	struct epoll_event ev = { .events = EPOLLIN }, evs[4];
	OK(SYS_epoll_ctl, epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev));
	FAILS(SYS_epoll_ctl, EBADF, epoll_ctl(-1, EPOLL_CTL_ADD, p[0], &ev));
	OK(SYS_epoll_wait, epoll_wait(ep, evs, 4, 0));
	FAILS(SYS_epoll_wait, EBADF, epoll_wait(-1, evs, 4, 0));
	OK(SYS_epoll_pwait, epoll_pwait(ep, evs, 4, 0, NULL));
	FAILS(SYS_epoll_pwait, EBADF, epoll_pwait(-1, evs, 4, 0, NULL));
	OK(SYS_eventfd2, eventfd(3, 0));
	FAILS(SYS_eventfd2, EINVAL, eventfd(0, 0xffff));
	int tfd = OK(SYS_timerfd_create, timerfd_create(CLOCK_MONOTONIC, 0));
	FAILS(SYS_timerfd_create, EINVAL, timerfd_create(12345, 0));
	struct itimerspec its = { { 0, 0 }, { 100, 0 } };
	OK(SYS_timerfd_settime, timerfd_settime(tfd, 0, &its, NULL));
	FAILS(SYS_timerfd_settime, EBADF, timerfd_settime(-1, 0, &its, NULL));
	OK(SYS_timerfd_gettime, timerfd_gettime(tfd, &its));
	FAILS(SYS_timerfd_gettime, EBADF, timerfd_gettime(-1, &its));
	int ifd = OK(SYS_inotify_init1, inotify_init1(0));
	FAILS(SYS_inotify_init1, EINVAL, inotify_init1(-1));
	int wd = OK(SYS_inotify_add_watch, inotify_add_watch(ifd, ".", IN_MODIFY));
	FAILS(SYS_inotify_add_watch, ENOENT, inotify_add_watch(ifd, "no/such", IN_MODIFY));
	OK(SYS_inotify_rm_watch, inotify_rm_watch(ifd, wd));
	FAILS(SYS_inotify_rm_watch, EINVAL, inotify_rm_watch(ifd, wd));
	/* Sockets. */
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s/sock", dir);
	socklen_t sl = sizeof sa;
	int ls = OK(SYS_socket, socket(AF_UNIX, SOCK_STREAM, 0));
	FAILS(SYS_socket, EAFNOSUPPORT, socket(12345, SOCK_STREAM, 0));
	OK(SYS_socketpair, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	FAILS(SYS_socketpair, EAFNOSUPPORT, socketpair(12345, SOCK_STREAM, 0, sv));
	int one = 1;
	OK(SYS_setsockopt, setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one));
	FAILS(SYS_setsockopt, EBADF, setsockopt(-1, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one));
	socklen_t ol = sizeof one;
	OK(SYS_getsockopt, getsockopt(ls, SOL_SOCKET, SO_TYPE, &one, &ol));
	FAILS(SYS_getsockopt, EBADF, getsockopt(-1, SOL_SOCKET, SO_TYPE, &one, &ol));
	OK(SYS_bind, bind(ls, (struct sockaddr *)&sa, sizeof sa));
	FAILS(SYS_bind, EBADF, bind(-1, (struct sockaddr *)&sa, sizeof sa));
	OK(SYS_listen, listen(ls, 4));
	FAILS(SYS_listen, EBADF, listen(-1, 4));
	int c1 = OK(SYS_socket, socket(AF_UNIX, SOCK_STREAM, 0));
	OK(SYS_connect, connect(c1, (struct sockaddr *)&sa, sizeof sa));
	FAILS(SYS_connect, EBADF, connect(-1, (struct sockaddr *)&sa, sizeof sa));
	int a1 = OK(SYS_accept, accept(ls, NULL, NULL));
	FAILS(SYS_accept, EBADF, accept(-1, NULL, NULL));
	int c2 = OK(SYS_socket, socket(AF_UNIX, SOCK_STREAM, 0));
	OK(SYS_connect, connect(c2, (struct sockaddr *)&sa, sizeof sa));
	OK(SYS_accept4, accept4(ls, NULL, NULL, SOCK_CLOEXEC));
	FAILS(SYS_accept4, EBADF, accept4(-1, NULL, NULL, SOCK_CLOEXEC));
	OK(SYS_getsockname, getsockname(ls, (struct sockaddr *)&sa, &sl));
	FAILS(SYS_getsockname, EBADF, getsockname(-1, (struct sockaddr *)&sa, &sl));
	sl = sizeof sa;
	OK(SYS_getpeername, getpeername(c1, (struct sockaddr *)&sa, &sl));
	FAILS(SYS_getpeername, EBADF, getpeername(-1, (struct sockaddr *)&sa, &sl));
	OK(SYS_sendto, send(c1, "ping", 4, 0));
	FAILS(SYS_sendto, EBADF, send(-1, "ping", 4, 0));
	OK(SYS_recvfrom, recv(a1, buf, 4, MSG_DONTWAIT));
	if (memcmp(buf, "ping", 4))
		note("recv data", 0, 0);
	FAILS(SYS_recvfrom, EBADF, recv(-1, buf, 4, 0));
	OK(SYS_sendto, sendto(sv[0], "pong", 4, 0, NULL, 0));
	FAILS(SYS_sendto, EBADF, sendto(-1, "pong", 4, 0, NULL, 0));
	OK(SYS_recvfrom, recvfrom(sv[1], buf, 4, MSG_DONTWAIT, NULL, NULL));
	FAILS(SYS_recvfrom, EBADF, recvfrom(-1, buf, 4, 0, NULL, NULL));
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	OK(SYS_sendmsg, sendmsg(sv[0], &mh, 0));
	FAILS(SYS_sendmsg, EBADF, sendmsg(-1, &mh, 0));
	OK(SYS_recvmsg, recvmsg(sv[1], &mh, MSG_DONTWAIT));
	FAILS(SYS_recvmsg, EBADF, recvmsg(-1, &mh, 0));
	OK(SYS_shutdown, shutdown(sv[0], SHUT_WR));
	FAILS(SYS_shutdown, EBADF, shutdown(-1, SHUT_WR));
	/* Processes. */
	pid_t me = OK(SYS_getpid, getpid());
	/* Through glibc's syscall() (its fast path under bpfjet), and raw
	 * (no libc code at all: the signal path under bpfjet). */
	if (me != OK(SYS_getpid, syscall(SYS_getpid)))
		note("getpid", me, 0);
	if (me != OK(SYS_getpid, raw_syscall(SYS_getpid, 0, 0, 0)))
		note("getpid", me, 0);
	OK(SYS_getppid, getppid());
	OK(SYS_gettid, gettid());
	OK(SYS_getuid, getuid());
	OK(SYS_geteuid, geteuid());
	OK(SYS_getgid, getgid());
	OK(SYS_getegid, getegid());
	OK(SYS_getsid, getsid(0));
	FAILS(SYS_getsid, ESRCH, getsid(999999999));
	OK(SYS_getpgid, getpgid(0));
	FAILS(SYS_getpgid, ESRCH, getpgid(999999999));
	FAILS(SYS_setpgid, ESRCH, setpgid(999999999, 0));
	/* Succeeds unless the process already leads a process group. */
	TRY(SYS_setsid, setsid());
	OK(SYS_kill, kill(me, 0));
	FAILS(SYS_kill, ESRCH, kill(999999999, 0));
	OK(SYS_sched_yield, sched_yield());
	int status = 0;
	OK(SYS_wait4, wait4(kid, &status, 0, NULL));
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 3)
		note("wait4 status", status, 0);
	FAILS(SYS_wait4, ECHILD, wait4(-1, &status, WNOHANG, NULL));
	struct utsname un;
	OK(SYS_uname, uname(&un));
	FAILS(SYS_uname, EFAULT, uname(bad));
	struct sysinfo si;
	OK(SYS_sysinfo, sysinfo(&si));
	FAILS(SYS_sysinfo, EFAULT, sysinfo(bad));
	struct rusage ru;
	OK(SYS_getrusage, getrusage(RUSAGE_SELF, &ru));
	FAILS(SYS_getrusage, EINVAL, getrusage(12345, &ru));
	OK(SYS_getrandom, getrandom(buf, 16, 0));
	FAILS(SYS_getrandom, EINVAL, getrandom(buf, 16, 0xffff));
	OK(SYS_close, close(fd));
	FAILS(SYS_close, EBADF, close(fd));
	marker();

	FILE *out = fopen(argv[2], "w");
	if (!out)
		return 2;
	for (int nr = 0; nr < NR; nr++)
		if (calls[nr])
			fprintf(out, "%d %ld %ld\n", nr, calls[nr], sums[nr]);
	fclose(out);
	for (int i = 0; i < failures && i < 64; i++)
		fprintf(stderr, "unexpected: %s\n", why[i]);
	return failures ? 1 : 0;
}
