/* exec_target PROG: `fexecve` of PROG (glibc issues execveat with
 * AT_EMPTY_PATH): the one exec whose system-call number is not execve's.
 * exec_target spawn: `posix_spawn` (a CLONE_VM|CLONE_VFORK child on its
 * own stack, as glibc's system() and many runtimes start programs) of a
 * program that does not exist, then of /bin/true. */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int spawn(char *path)
{
	char *argv[] = {path, 0};
	pid_t pid;
	int r = posix_spawn(&pid, path, 0, 0, argv, environ);
	if (r)
		return r;
	int st;
	waitpid(pid, &st, 0);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	if (strcmp(argv[1], "spawn") == 0) {
		/* ENOENT, as untraced; then a program that runs. */
		if (spawn("/nonexistent/spawned") != 2)
			return 5;
		return spawn("/bin/true");
	}
	int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 3;
	fexecve(fd, argv + 1, environ);
	perror("fexecve");
	return 4;
}
