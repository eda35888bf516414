/*
 * seccomp-exec: the first program of a job in gVisor. It puts the sandbox's syscall filter
 * (src/isolation/host/seccomp.ts, the one bubblewrap gives the kernel) on itself, then becomes the
 * job's program: gVisor's own kernel enforces it as Linux does, for the job and all it starts.
 *
 *   seccomp-exec FILTER_FILE -- ARGV...
 *
 * Why not only the OCI rules runsc is given (oci-bundle.ts): a runsc before 2025 answers every
 * OCI refusal EPERM, whatever `errnoRet` says, and glibc falls back from clone3 to clone (whose
 * flags a filter can read) only on ENOSYS. A runsc that serves clone3 would let a job make new
 * namespaces through it. A filter of the job's own answers ENOSYS, as on bubblewrap.
 *
 * FILTER_FILE holds the classic BPF program, struct sock_filter after struct sock_filter. The
 * filter cannot be lifted from inside: no_new_privs holds, and filters only ever add up.
 * Exit codes (before the program runs): 126 the filter is missing, malformed or refused; 127 the
 * program does not exist. Static, so it needs nothing of the sandbox's libraries.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The kernel takes at most BPF_MAXINSNS instructions in one filter: one more read says it is longer. */
static struct sock_filter program[BPF_MAXINSNS + 1];

static int refuse(const char *what) {
  fprintf(stderr, "seccomp-exec: %s: %s\n", what, errno ? strerror(errno) : "malformed");
  return 126;
}

int main(int argc, char **argv) {
  if (argc < 4 || strcmp(argv[2], "--") != 0) {
    fputs("usage: seccomp-exec FILTER_FILE -- ARGV...\n", stderr);
    return 126;
  }
  int fd = open(argv[1], O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return refuse(argv[1]);
  ssize_t bytes = read(fd, program, sizeof program);
  close(fd);
  errno = 0;
  if (bytes <= 0 || bytes % (ssize_t)sizeof program[0] != 0 || bytes > BPF_MAXINSNS * (ssize_t)sizeof program[0]) return refuse(argv[1]);
  struct sock_fprog filter = {.len = (unsigned short)(bytes / (ssize_t)sizeof program[0]), .filter = program};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return refuse("no_new_privs");
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &filter) != 0) return refuse("seccomp");
  execvp(argv[3], argv + 3);
  int missing = errno == ENOENT || errno == ENOTDIR;
  fprintf(stderr, "seccomp-exec: %s: %s\n", argv[3], strerror(errno));
  return missing ? 127 : 126;
}
