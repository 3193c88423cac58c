/* The calls ksyscall.bpf.c counts: WRITES writes of 1..13 bytes to fd 77
 * (/dev/null) through libc's write, as many through syscall(2), BAD writes
 * to fd 78 (closed: -EBADF), PPIDS getppid calls and FORKS forks (glibc's
 * fork is a clone system call) whose children exit at once. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define WRITES 300
#define BAD 40
#define PPIDS 9
#define FORKS 3

int main(void)
{
	static const char text[] = "abcdefghijklm";
	int fd = open("/dev/null", O_WRONLY);

	if (fd < 0 || dup2(fd, 77) != 77)
		return 1;
	close(78);
	for (int i = 0; i < WRITES; i++) {
		size_t n = i % 13 + 1;
		if (write(77, text + i % 7, n) != (ssize_t)n)
			return 2;
		if (syscall(SYS_write, 77, text + i % 5, n) != (long)n)
			return 3;
	}
	for (int i = 0; i < BAD; i++)
		if (write(78, text, 1) != -1)
			return 4;
	for (int i = 0; i < PPIDS; i++)
		getppid();
	for (int i = 0; i < FORKS; i++) {
		pid_t child = fork();
		if (child == 0)
			_exit(0);
		if (child < 0 || waitpid(child, NULL, 0) != child)
			return 5;
	}
	return 0;
}
