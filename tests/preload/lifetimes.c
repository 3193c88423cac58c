// Object lifetimes across processes, for tests/preload/lifetimes.sh: the
// same binary against the kernel and under `bpfjet exec`.
//
//   lifetimes create NAME SOCK   create a hash map NAME, store 1 -> 42, send
//                                its fd over the unix socket SOCK
//                                (SCM_RIGHTS), fork a child that keeps the
//                                inherited fd for 3 s, then exit at once
//   lifetimes receive SOCK       receive the fd, wait 1.5 s (the creator is
//                                gone by then), look 1 up, update 2 -> 7,
//                                print both, hold the fd 1 s more, exit
// Meanwhile the script lists maps by name with bpftool: the map must stay
// while any of the three holds an fd, and go when the last one ends.
#include <bpf/bpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int unix_socket(const char *path, int listen_side)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM, 0);

	strncpy(a.sun_path, path, sizeof(a.sun_path) - 1);
	if (listen_side) {
		unlink(path);
		if (bind(s, (struct sockaddr *)&a, sizeof(a)) || listen(s, 1))
			return -1;
		return accept(s, NULL, NULL);
	}
	for (int i = 0; i < 100; i++) {
		if (!connect(s, (struct sockaddr *)&a, sizeof(a)))
			return s;
		usleep(50000);
	}
	return -1;
}

static int create(const char *name, const char *sock)
{
	int fd = bpf_map_create(BPF_MAP_TYPE_HASH, name, 4, 8, 8, NULL);
	__u32 k = 1;
	__u64 v = 42;

	if (fd < 0 || bpf_map_update_elem(fd, &k, &v, BPF_ANY)) {
		printf("create: %s\n", strerror(errno));
		return 1;
	}
	int c = unix_socket(sock, 1);
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 }, byte = 'm';
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	if (c < 0 || sendmsg(c, &msg, 0) != 1) {
		printf("send: %s\n", strerror(errno));
		return 1;
	}
	printf("created and sent\n");
	fflush(stdout);
	if (fork() == 0) {
		// The child holds the inherited fd, then ends without closing it.
		sleep(3);
		_exit(0);
	}
	return 0;
}

static int receive(const char *sock)
{
	int c = unix_socket(sock, 0), fd = -1;
	char cbuf[CMSG_SPACE(sizeof(int))], byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };

	if (c < 0 || recvmsg(c, &msg, 0) != 1 || !CMSG_FIRSTHDR(&msg)) {
		printf("receive: %s\n", strerror(errno));
		return 1;
	}
	memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&msg)), sizeof(int));
	usleep(1500000);
	__u32 k = 1, k2 = 2;
	__u64 v = 0, v2 = 7;
	int err = bpf_map_lookup_elem(fd, &k, &v);
	printf("received: lookup 1 -> %s %llu\n", err ? strerror(errno) : "ok",
	       (unsigned long long)v);
	err = bpf_map_update_elem(fd, &k2, &v2, BPF_NOEXIST);
	printf("received: update 2 -> %s\n", err ? strerror(errno) : "ok");
	fflush(stdout);
	sleep(1);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "create"))
		return create(argv[2], argv[3]);
	if (argc == 3 && !strcmp(argv[1], "receive"))
		return receive(argv[2]);
	fprintf(stderr, "usage: %s create NAME SOCK | receive SOCK\n", argv[0]);
	return 2;
}
