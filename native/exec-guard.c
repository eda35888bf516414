/*
 * exec-guard: the first program of a run job inside its sandbox. It reads the job's exec rules
 * (staged by the host after the command was resolved), confines itself and every descendant
 * with Landlock, then becomes the job's program by absolute path.
 *
 *   exec-guard RULES_FILE -- ARGV...    run ARGV[0]'s resolved file under the rules
 *   exec-guard --abi                    print the kernel's Landlock ABI (0: none) and exit
 *
 * RULES_FILE holds NUL-terminated key/value pairs:
 *   exec  PATH    the file to execute (argv is passed as given, argv[0] included)
 *   allow PATH    a file or directory tree whose files may be executed (Landlock EXECUTE)
 *   any   -       nothing restricts execution (only the scopes below apply)
 * Without `any`, only `allow`ed paths can be executed by the job or anything it starts, and
 * this cannot be undone from inside: Landlock domains only ever narrow, and no_new_privs holds.
 *
 * Where the kernel has Landlock ABI 6, the job is also scoped: it cannot signal processes
 * outside its domain or connect to abstract unix sockets created outside it.
 *
 * Exit codes (before the program runs): 126 rules missing, malformed or not enforceable;
 * 127 the program does not exist. Static, so it needs nothing of the sandbox's libraries.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule 445
#define __NR_landlock_restrict_self 446
#endif

/* The ABI 6 struct layout, declared here so older kernel headers still build it. */
struct ruleset_attr_v6 {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};
#define SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define SCOPE_SIGNAL (1ULL << 1)
#define ACCESS_FS_EXECUTE (1ULL << 0)

#define MAX_RULES_BYTES (1 << 20)

static void fail(int code, const char *what, const char *detail) {
  fprintf(stderr, "exec-guard: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  exit(code);
}

static int landlock_abi(void) {
  long abi = syscall(__NR_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi < 0 ? 0 : (int)abi;
}

static char *read_rules(const char *path, size_t *size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) fail(126, "cannot open the rules", strerror(errno));
  char *buffer = malloc(MAX_RULES_BYTES);
  if (!buffer) fail(126, "out of memory", NULL);
  size_t used = 0;
  for (;;) {
    ssize_t got = read(fd, buffer + used, MAX_RULES_BYTES - used);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail(126, "cannot read the rules", strerror(errno));
    if (got == 0) break;
    used += (size_t)got;
    if (used == MAX_RULES_BYTES) fail(126, "the rules are too large", NULL);
  }
  close(fd);
  *size = used;
  return buffer;
}

static void allow(int ruleset, const char *path) {
  int target = open(path, O_PATH | O_CLOEXEC);
  /* A path that does not exist in this sandbox holds nothing to execute. */
  if (target < 0) return;
  struct landlock_path_beneath_attr rule = {.allowed_access = ACCESS_FS_EXECUTE, .parent_fd = target};
  if (syscall(__NR_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) != 0) fail(126, "cannot add a Landlock rule", path);
  close(target);
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--abi") == 0) {
    printf("%d\n", landlock_abi());
    return 0;
  }
  if (argc < 4 || strcmp(argv[2], "--") != 0) fail(126, "usage: exec-guard RULES_FILE -- ARGV...", NULL);

  size_t size;
  char *rules = read_rules(argv[1], &size);
  if (size == 0 || rules[size - 1] != '\0') fail(126, "no rules were staged for this job", NULL);
  const char *program = NULL;
  int unrestricted = 0;
  for (size_t at = 0; at < size;) {
    const char *key = rules + at;
    at += strlen(key) + 1;
    if (at >= size) fail(126, "malformed rules", key);
    const char *value = rules + at;
    at += strlen(value) + 1;
    if (strcmp(key, "exec") == 0) program = value;
    else if (strcmp(key, "any") == 0) unrestricted = 1;
    else if (strcmp(key, "allow") != 0) fail(126, "unknown rule", key);
  }
  if (!program) fail(126, "the rules name no program", NULL);

  /* Also set by bwrap; said again so no descendant can gain privileges through a setuid file. */
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail(126, "cannot set no_new_privs", strerror(errno));
  int abi = landlock_abi();
  if (!unrestricted && abi < 1) fail(126, "exec rules need Landlock, which this kernel does not offer", NULL);
  struct ruleset_attr_v6 attr = {
      .handled_access_fs = unrestricted ? 0 : ACCESS_FS_EXECUTE,
      .scoped = abi >= 6 ? SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL : 0,
  };
  if (attr.handled_access_fs != 0 || attr.scoped != 0) {
    /* Kernels before ABI 6 know only the first two fields. */
    size_t attr_size = abi >= 6 ? sizeof attr : 2 * sizeof(uint64_t);
    int ruleset = (int)syscall(__NR_landlock_create_ruleset, &attr, attr_size, 0);
    if (ruleset < 0) fail(126, "cannot create a Landlock ruleset", strerror(errno));
    if (!unrestricted) {
      for (size_t at = 0; at < size;) {
        const char *key = rules + at;
        at += strlen(key) + 1;
        const char *value = rules + at;
        at += strlen(value) + 1;
        if (strcmp(key, "allow") == 0) allow(ruleset, value);
      }
    }
    if (syscall(__NR_landlock_restrict_self, ruleset, 0) != 0) fail(126, "cannot enforce the Landlock ruleset", strerror(errno));
    close(ruleset);
  }
  execv(program, argv + 3);
  fail(errno == ENOENT ? 127 : 126, "cannot execute the program", strerror(errno));
  return 126;
}
