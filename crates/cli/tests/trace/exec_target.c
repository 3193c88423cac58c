/* `fexecve` of the program named in argv[1] (glibc issues execveat with
 * AT_EMPTY_PATH): the one exec whose system-call number is not execve's. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 3;
	fexecve(fd, argv + 1, environ);
	perror("fexecve");
	return 4;
}
