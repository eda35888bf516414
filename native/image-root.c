/*
 * image-root: the root-only steps of running a sandbox on an image's layers (src/images/).
 *
 *   image-root marks TREE
 *     Reads NUL-terminated records on stdin, "w" or "o" and a path relative to TREE, and puts
 *     overlayfs's marks into a layer just unpacked: a 0/0 character device for a whiteout ("w",
 *     a name the layer deletes), trusted.overlay.opaque=y on an opaque directory ("o"). Node
 *     has neither mknod nor xattrs. Every component is opened beneath TREE with O_NOFOLLOW.
 *
 *   image-root mount --uid U --gid G --map INSIDE:HOST[:COUNT][,...] --upper-bytes N
 *                    --target DIR --layer DIR... -- PROGRAM ARGS...
 *     In a mount namespace of its own: a tmpfs of N bytes on DIR holding the sandbox's writable
 *     layer, each image layer bound there idmapped (the image's COUNT ids from INSIDE shown as
 *     the host's from HOST, so the sandbox's root owns the image's root files and copies them up
 *     on write, and apt's _apt or postgres own theirs), and
 *     DIR/merged, the overlay of them all. Then it becomes U:G with no groups and execs PROGRAM
 *     (bwrap, which binds DIR/merged as the sandbox's /). The mounts live only in that namespace:
 *     they go when the last process of the sandbox does, and the host never sees them.
 *     Every mount is nosuid and nodev: an image's setuid files raise no privilege, not even
 *     within the sandbox's own user namespace (bubblewrap's binds are nosuid as well).
 *     --upper-dir DIR: the writable layer is DIR/upper (DIR/work beside it), a directory of the
 *     host's disk that outlives the sandbox (a template build's step, a sandbox's disk kept by a
 *     pause), not a tmpfs; what an earlier run left there is taken up again. DIR/ids says
 *     the map back (HOST:IMAGE:COUNT ranges) for `shift` once the sandbox has ended.
 *     Layers are given bottom first.
 *     --system DIR (repeatable): the host's DIR (its /usr, say), idmapped as the layers are, is
 *     overlaid at DIR in the root with a writable layer of its own beside the root's
 *     (WRITABLE/system/N/upper): a root of the host's system the sandbox may change, as an
 *     image's, while the host's files stay untouched. The root's layers hold DIR, empty.
 *
 *   image-root as-user [--uid U --gid G] -- PROGRAM ARGS...
 *     Inside a sandbox, as its root: becomes U:G (the user, 1000:1000, if not given; no groups)
 *     and execs PROGRAM, which keeps no capability (a build's RUN after USER, in an image
 *     without su).
 *
 *   image-root idmap SOURCE TARGET --map FROM:TO[:COUNT][,...] [--read-only]
 *     Binds SOURCE at TARGET, writable (unless --read-only), nosuid and nodev, in the caller's mount namespace,
 *     idmapped: a file owned by a FROM id is shown as owned by the TO id, and one made through
 *     it by the TO id is stored as the FROM one (a sandbox's kept disk taken up by a sandbox of
 *     other host ids: no file is changed, whatever the tree holds). Ids not mapped show as the
 *     overflow id, and cannot make files there. A microVM's volume is bound so into the directory
 *     its VM shares with the guest (9p), FROM the ids the volume stores, TO the guest's ids of
 *     its job: QEMU, root here, stores what the guest's user makes as the volume's 1000.
 *
 *   image-root attach SOURCE PID TARGET [--read-only]
 *     Mounts SOURCE (a volume's file system, mounted on the host) at TARGET inside the running
 *     sandbox of process PID, idmapped through that sandbox's own user namespace: what the volume
 *     stores as uid 1000 is that sandbox's user's, uid 0 its root's, whatever host uids the sandbox
 *     runs as, so sandboxes of other uids share one volume's files. TARGET's missing directories
 *     are made beneath the sandbox's root (reached through /proc/PID/root), each component opened
 *     with O_NOFOLLOW: a link planted on the way is refused, never followed. The mount is nosuid
 *     and nodev; it lives in the sandbox's mount namespace alone and goes with it.
 *
 *   image-root shift DIR --map HOST:IMAGE[:COUNT][,...]
 *     Gives each file under DIR owned by a HOST uid (or gid) the IMAGE one instead: a build
 *     step's writable layer, written by the sandbox's host uids, made a layer of the image's ids.
 *     The tree is walked beneath DIR by descriptors, no link followed; the sandbox that wrote it
 *     has ended, so nothing moves under the walk.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/mount.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#define MAX_LAYERS 128
#define MAX_SYSTEM_DIRS 8
#define MAX_MAPS 8
#define RECORD_MAX 8192

static void fail(const char *format, ...) {
  va_list args;
  va_start(args, format);
  fputs("image-root: ", stderr);
  vfprintf(stderr, format, args);
  if (errno != 0) fprintf(stderr, ": %s", strerror(errno));
  fputc('\n', stderr);
  va_end(args);
  exit(125);
}

/*
 * The directory fd of `path` ('/'-separated, relative to `root`; a leading '/' is the same)
 * beneath `root`, no link followed. With `make`, missing directories on the way are made
 * (0755, owned by `owner`:`group`); without, a missing one fails.
 */
static int open_beneath(int root, const char *path, int make, uid_t owner, gid_t group) {
  char copy[RECORD_MAX];
  if (snprintf(copy, sizeof copy, "%s", path) >= (int)sizeof copy) fail("a path over %d bytes: %s", RECORD_MAX, path);
  int fd = dup(root);
  for (char *save = NULL, *part = strtok_r(copy, "/", &save); part != NULL; part = strtok_r(NULL, "/", &save)) {
    if (strcmp(part, "..") == 0 || strcmp(part, ".") == 0) {
      errno = EINVAL;
      fail("a path with . or ..: %s", path);
    }
    int next = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0 && errno == ENOENT && make) {
      if (mkdirat(fd, part, 0755) != 0 && errno != EEXIST) fail("mkdir %s (at %s)", path, part);
      next = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (next >= 0 && fchown(next, owner, group) != 0) fail("own %s (at %s)", path, part);
    }
    if (next < 0) fail("open %s (at %s)", path, part);
    close(fd);
    fd = next;
  }
  return fd;
}

static int marks(const char *tree) {
  int root = open(tree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root < 0) fail("open %s", tree);
  char record[RECORD_MAX];
  size_t length = 0;
  int c;
  while ((c = getchar()) != EOF) {
    if (length + 1 >= sizeof record) fail("a record over %d bytes", RECORD_MAX);
    record[length++] = (char)c;
    if (c != '\0') continue;
    length = 0;
    if (record[0] == '\0') continue;
    const char *path = record + 1;
    if (record[0] == 'o') {
      int dir = open_beneath(root, path, 0, 0, 0);
      if (fsetxattr(dir, "trusted.overlay.opaque", "y", 1, 0) != 0) fail("mark %s opaque", path);
      close(dir);
    } else if (record[0] == 'w') {
      char parent[RECORD_MAX];
      snprintf(parent, sizeof parent, "%s", path);
      char *slash = strrchr(parent, '/');
      const char *name = slash ? slash + 1 : parent;
      if (slash) *slash = '\0';
      int dir = open_beneath(root, slash ? parent : "", 0, 0, 0);
      if (*name == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        errno = EINVAL;
        fail("a whiteout of no name: %s", path);
      }
      /* A name the layer both deletes and holds keeps what it holds (tar's last word). */
      if (mknodat(dir, name, S_IFCHR | 0, makedev(0, 0)) != 0 && errno != EEXIST) fail("whiteout %s", path);
      close(dir);
    } else {
      errno = 0;
      fail("a record of unknown kind %c", record[0]);
    }
  }
  return 0;
}

/* A user namespace whose uid and gid maps are `map`: held by a child that waits, then reaped. */
static int userns_of(const char *map) {
  int ready[2], done[2];
  if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(done, O_CLOEXEC) != 0) fail("pipe");
  pid_t child = fork();
  if (child < 0) fail("fork");
  if (child == 0) {
    char byte = 0;
    close(ready[0]);
    close(done[1]);
    if (unshare(CLONE_NEWUSER) != 0) _exit(1);
    if (write(ready[1], &byte, 1) != 1) _exit(1);
    if (read(done[0], &byte, 1) < 0) _exit(1);
    _exit(0);
  }
  close(ready[1]);
  close(done[0]);
  char byte;
  if (read(ready[0], &byte, 1) != 1) fail("the namespace holder did not start");
  close(ready[0]);
  char path[64];
  const char *files[] = {"uid_map", "gid_map"};
  for (int i = 0; i < 2; i++) {
    snprintf(path, sizeof path, "/proc/%d/%s", child, files[i]);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, map, strlen(map)) != (ssize_t)strlen(map)) fail("write %s", path);
    close(fd);
  }
  snprintf(path, sizeof path, "/proc/%d/ns/user", child);
  int ns = open(path, O_RDONLY | O_CLOEXEC);
  if (ns < 0) fail("open %s", path);
  close(done[1]);
  waitpid(child, NULL, 0);
  return ns;
}

static void idmapped_bind(const char *source, const char *target, int userns, int writable) {
  int tree = (int)syscall(SYS_open_tree, AT_FDCWD, source, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
  if (tree < 0) fail("open_tree %s", source);
  struct mount_attr attr = {.attr_set = MOUNT_ATTR_IDMAP | (writable ? 0 : MOUNT_ATTR_RDONLY) | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID, .userns_fd = (unsigned long long)userns};
  if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof attr) != 0) fail("idmap %s", source);
  if (syscall(SYS_move_mount, tree, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) != 0) fail("mount %s", target);
  close(tree);
}

static void make_dir(const char *path, uid_t uid, gid_t gid, mode_t mode) {
  if (mkdir(path, mode) != 0) fail("mkdir %s", path);
  if (chown(path, uid, gid) != 0 || chmod(path, mode) != 0) fail("own %s", path);
}

/*
 * A directory of a writable layer kept on the host's disk (--upper-dir): made, or found as an
 * earlier run of the same sandbox left it (a pause keeps its disk where it is). Only the host
 * writes at this level (the sandbox writes inside upper/), so what is there is a directory or
 * an error, never a link to follow.
 */
static void keep_dir(const char *path, uid_t uid, gid_t gid, mode_t mode) {
  if (mkdir(path, mode) != 0) {
    struct stat st;
    if (errno != EEXIST || lstat(path, &st) != 0 || !S_ISDIR(st.st_mode)) fail("mkdir %s", path);
  }
  if (chown(path, uid, gid) != 0 || chmod(path, mode) != 0) fail("own %s", path);
}

/* No index, no redirects, no metacopy: the simplest overlay, whose lowers are never written. */
static void mount_overlay(const char *at, const char *lower, const char *upper, const char *work) {
  char options[16384];
  if (snprintf(options, sizeof options, "lowerdir=%s,upperdir=%s,workdir=%s,index=off,redirect_dir=off,metacopy=off", lower, upper, work) >= (int)sizeof options) {
    errno = 0;
    fail("the overlay's paths are too long: %s", at);
  }
  if (mount("overlay", at, "overlay", MS_NODEV | MS_NOSUID, options) != 0) fail("mount the overlay on %s", at);
}

/* The host's `dir`, idmapped, at the same path in TARGET/merged, under WRITABLE/system/N: see --system. */
static void overlay_system_dir(const char *target, const char *writable, int n, const char *dir, uid_t owner, int userns) {
  char lower[4096], mine[4096], upper[4200], work[4200], at[8200];
  snprintf(lower, sizeof lower, "%s/system-%d", target, n);
  make_dir(lower, 0, 0, 0700);
  idmapped_bind(dir, lower, userns, 0);
  snprintf(mine, sizeof mine, "%s/system/%d", writable, n);
  keep_dir(mine, 0, 0, 0700);
  snprintf(work, sizeof work, "%s/work", mine);
  keep_dir(work, 0, 0, 0700);
  snprintf(upper, sizeof upper, "%s/upper", mine);
  /* The overlay's root takes its owner and mode from its upper: the host's dir's, as the sandbox sees it. */
  struct stat st;
  if (stat(dir, &st) != 0) fail("stat %s", dir);
  keep_dir(upper, st.st_uid == 0 ? owner : 0, st.st_gid == 0 ? owner : 0, st.st_mode & 07777);
  snprintf(at, sizeof at, "%s/merged%s", target, dir);
  mount_overlay(at, lower, upper, work);
}

static unsigned long number(const char *text, const char *what) {
  char *end;
  errno = 0;
  unsigned long value = strtoul(text, &end, 10);
  if (errno != 0 || *end != '\0' || end == text) fail("%s is not a number: %s", what, text);
  return value;
}

/* FROM:TO[:COUNT]: the COUNT ids from FROM (1 if not given) are the ones from TO. */
struct id_range {
  unsigned long from, to, count;
};

static int parse_ranges(const char *text, struct id_range *ranges, int max) {
  char copy[256];
  if (snprintf(copy, sizeof copy, "%s", text) >= (int)sizeof copy) fail("--map is too long: %s", text);
  int count = 0;
  for (char *save = NULL, *range = strtok_r(copy, ",", &save); range != NULL; range = strtok_r(NULL, ",", &save)) {
    char *colon = strchr(range, ':');
    if (!colon || count == max) {
      errno = 0;
      fail("--map is FROM:TO[:COUNT] ranges: %s", text);
    }
    *colon = '\0';
    char *second = strchr(colon + 1, ':');
    if (second) *second = '\0';
    ranges[count].from = number(range, "--map");
    ranges[count].to = number(colon + 1, "--map");
    ranges[count].count = second ? number(second + 1, "--map") : 1;
    if (ranges[count].count == 0 || ranges[count].count > (1UL << 32)) fail("--map's count is out of range: %s", text);
    count++;
  }
  return count;
}

static long mapped(unsigned long id, const struct id_range *ranges, int count) {
  for (int i = 0; i < count; i++)
    if (id >= ranges[i].from && id - ranges[i].from < ranges[i].count) return (long)(ranges[i].to + (id - ranges[i].from));
  return -1;
}

static int mount_root(int argc, char **argv) {
  const char *layers[MAX_LAYERS], *system_dirs[MAX_SYSTEM_DIRS];
  int layer_count = 0, system_count = 0;
  const char *target = NULL, *map_text = NULL, *upper_dir = NULL;
  long uid = -1, gid = -1;
  unsigned long upper_bytes = 0;
  int i = 2;
  for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
    const char *option = argv[i];
    if (i + 1 >= argc) fail("%s needs a value", option);
    const char *value = argv[++i];
    if (strcmp(option, "--uid") == 0) uid = (long)number(value, "--uid");
    else if (strcmp(option, "--gid") == 0) gid = (long)number(value, "--gid");
    else if (strcmp(option, "--map") == 0) map_text = value;
    else if (strcmp(option, "--upper-bytes") == 0) upper_bytes = number(value, "--upper-bytes");
    else if (strcmp(option, "--target") == 0) target = value;
    else if (strcmp(option, "--upper-dir") == 0) upper_dir = value;
    else if (strcmp(option, "--layer") == 0) {
      if (layer_count == MAX_LAYERS) fail("more than %d layers", MAX_LAYERS);
      layers[layer_count++] = value;
    } else if (strcmp(option, "--system") == 0) {
      if (system_count == MAX_SYSTEM_DIRS) fail("more than %d system dirs", MAX_SYSTEM_DIRS);
      if (value[0] != '/' || strstr(value, "..") != NULL) fail("a system dir is an absolute path without ..: %s", value);
      system_dirs[system_count++] = value;
    } else fail("unknown option %s", option);
  }
  if (i >= argc - 1 || uid < 0 || gid < 0 || !map_text || !target || (upper_bytes == 0) == (upper_dir == NULL) || layer_count == 0) {
    errno = 0;
    fail("usage: mount --uid U --gid G --map IN:HOST[:COUNT],... (--upper-bytes N | --upper-dir DIR) --target DIR --layer DIR... [--system DIR]... -- PROGRAM ARGS");
  }
  /* "0:100000:65536" as a map file: a range a line. Root inside owns the writable layer. */
  struct id_range ranges[MAX_MAPS];
  int range_count = parse_ranges(map_text, ranges, MAX_MAPS);
  char map[512] = "", back[512] = "";
  uid_t upper_owner = (uid_t)uid;
  for (int r = 0; r < range_count; r++) {
    if (ranges[r].from == 0) upper_owner = (uid_t)ranges[r].to;
    size_t used = strlen(map);
    snprintf(map + used, sizeof map - used, "%lu %lu %lu\n", ranges[r].from, ranges[r].to, ranges[r].count);
    used = strlen(back);
    snprintf(back + used, sizeof back - used, "%s%lu:%lu:%lu", used ? "," : "", ranges[r].to, ranges[r].from, ranges[r].count);
  }

  if (unshare(CLONE_NEWNS) != 0) fail("unshare the mount namespace");
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) fail("make mounts private");
  char options[4096], path[4096];
  snprintf(options, sizeof options, "size=%lu,mode=0755", upper_bytes ? upper_bytes : 1024 * 1024);
  if (mount("image-root", target, "tmpfs", MS_NOSUID | MS_NODEV, options) != 0) fail("mount a tmpfs on %s", target);
  int userns = userns_of(map);
  char lower[sizeof options] = "";
  for (int layer = layer_count - 1; layer >= 0; layer--) {
    snprintf(path, sizeof path, "%s/%d", target, layer);
    make_dir(path, 0, 0, 0700);
    idmapped_bind(layers[layer], path, userns, 0);
    size_t used = strlen(lower);
    if (used + strlen(path) + 2 >= sizeof lower) fail("the layers' paths are too long");
    snprintf(lower + used, sizeof lower - used, "%s%s", used ? ":" : "", path);
  }
  /* The writable layer: in the tmpfs, or a host directory of its own (--upper-dir). */
  const char *writable = upper_dir ? upper_dir : target;
  if (upper_dir) {
    snprintf(path, sizeof path, "%s/ids", upper_dir);
    int ids = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (ids < 0 || write(ids, back, strlen(back)) != (ssize_t)strlen(back) || close(ids) != 0) fail("write %s", path);
  }
  char upper[sizeof path], work[sizeof path];
  snprintf(upper, sizeof upper, "%s/upper", writable);
  (upper_dir ? keep_dir : make_dir)(upper, upper_owner, upper_owner, 0755);
  snprintf(work, sizeof work, "%s/work", writable);
  (upper_dir ? keep_dir : make_dir)(work, 0, 0, 0700);
  snprintf(path, sizeof path, "%s/merged", target);
  make_dir(path, 0, 0, 0755);
  mount_overlay(path, lower, upper, work);
  if (system_count > 0) {
    snprintf(path, sizeof path, "%s/system", writable);
    (upper_dir ? keep_dir : make_dir)(path, 0, 0, 0700);
  }
  for (int s = 0; s < system_count; s++) overlay_system_dir(target, writable, s, system_dirs[s], upper_owner, userns);

  if (setgroups(0, NULL) != 0 || setresgid((gid_t)gid, (gid_t)gid, (gid_t)gid) != 0 || setresuid((uid_t)uid, (uid_t)uid, (uid_t)uid) != 0) fail("become %ld:%ld", uid, gid);
  execvp(argv[i + 1], argv + i + 1);
  fail("exec %s", argv[i + 1]);
  return 125;
}

/*
 * The files of more than one name already shifted: a file's second name must not be shifted
 * again, where the ids it was given are among those mapped (a sandbox's disk taken up by one
 * whose user's uid was another's root: the user's file would become root's). An open-addressing
 * set of (device, inode), grown at half full, so a tree of many linked files costs linear time.
 */
struct file_id {
  dev_t dev;
  ino_t ino;
};
static struct file_id *shifted_links;
static size_t shifted_count, shifted_capacity;

static size_t slot_of(struct file_id id, size_t capacity) {
  return (size_t)((id.ino * 0x9E3779B97F4A7C15ULL) ^ id.dev) & (capacity - 1);
}

static void remember(struct file_id id) {
  size_t slot = slot_of(id, shifted_capacity);
  while (shifted_links[slot].ino != 0) slot = (slot + 1) & (shifted_capacity - 1);
  shifted_links[slot] = id;
}

static int shifted_before(dev_t dev, ino_t ino) {
  struct file_id id = {dev, ino};
  if (shifted_capacity > 0)
    for (size_t slot = slot_of(id, shifted_capacity); shifted_links[slot].ino != 0; slot = (slot + 1) & (shifted_capacity - 1))
      if (shifted_links[slot].ino == ino && shifted_links[slot].dev == dev) return 1;
  if (2 * (shifted_count + 1) > shifted_capacity) {
    struct file_id *old = shifted_links;
    size_t old_capacity = shifted_capacity;
    shifted_capacity = old_capacity ? 2 * old_capacity : 64;
    shifted_links = calloc(shifted_capacity, sizeof *shifted_links);
    if (!shifted_links) fail("out of memory");
    for (size_t slot = 0; slot < old_capacity; slot++)
      if (old[slot].ino != 0) remember(old[slot]);
    free(old);
  }
  remember(id);
  shifted_count++;
  return 0;
}

/* Shifts the owner of `name` in `dir` (and, for a directory, of all under it). */
static void shift_at(int dir, const char *name, const struct id_range *ranges, int count, int depth) {
  if (depth > 4096) {
    errno = 0;
    fail("a tree deeper than 4096 levels");
  }
  struct stat st;
  if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0) fail("stat %s", name);
  if (!S_ISDIR(st.st_mode) && st.st_nlink > 1 && shifted_before(st.st_dev, st.st_ino)) return;
  long uid = mapped(st.st_uid, ranges, count), gid = mapped(st.st_gid, ranges, count);
  if (uid >= 0 || gid >= 0) {
    /* A chown clears setuid and setgid bits: put them back as they were. */
    if (fchownat(dir, name, uid >= 0 ? (uid_t)uid : (uid_t)-1, gid >= 0 ? (gid_t)gid : (gid_t)-1, AT_SYMLINK_NOFOLLOW) != 0) fail("chown %s", name);
    if (!S_ISLNK(st.st_mode) && (st.st_mode & (S_ISUID | S_ISGID)) && fchmodat(dir, name, st.st_mode & 07777, 0) != 0) fail("chmod %s", name);
  }
  if (!S_ISDIR(st.st_mode)) return;
  int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) fail("open %s", name);
  DIR *listing = fdopendir(dup(fd));
  if (!listing) fail("list %s", name);
  for (struct dirent *entry; (entry = readdir(listing)) != NULL;) {
    if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
    shift_at(fd, entry->d_name, ranges, count, depth + 1);
  }
  closedir(listing);
  close(fd);
}

/* A subcommand's ranges, its last two arguments `--map RANGES`, its argument count checked. */
static int map_argument(int argc, char **argv, int expected, const char *usage, struct id_range *ranges) {
  if (argc != expected || strcmp(argv[expected - 2], "--map") != 0) {
    errno = 0;
    fail("usage: %s", usage);
  }
  return parse_ranges(argv[expected - 1], ranges, MAX_MAPS);
}

static int shift(int argc, char **argv) {
  struct id_range ranges[MAX_MAPS];
  int count = map_argument(argc, argv, 5, "shift DIR --map HOST:IMAGE[:COUNT][,...]", ranges);
  shift_at(AT_FDCWD, argv[2], ranges, count, 0);
  return 0;
}

/* SOURCE bound writable at TARGET, in the caller's mount namespace, its files' FROM ids shown as TO. */
static int idmap(int argc, char **argv) {
  struct id_range ranges[MAX_MAPS];
  int read_only = argc == 7 && strcmp(argv[6], "--read-only") == 0;
  int count = map_argument(read_only ? 6 : argc, argv, 6, "idmap SOURCE TARGET --map FROM:TO[:COUNT][,...] [--read-only]", ranges);
  char map[512] = "";
  for (int r = 0; r < count; r++) {
    size_t used = strlen(map);
    snprintf(map + used, sizeof map - used, "%lu %lu %lu\n", ranges[r].from, ranges[r].to, ranges[r].count);
  }
  idmapped_bind(argv[2], argv[3], userns_of(map), !read_only);
  return 0;
}

/* SOURCE mounted at TARGET in the sandbox of PID, idmapped by its user namespace (see the top). */
static int attach(int argc, char **argv) {
  int writable = argc == 5;
  if (argc < 5 || argc > 6 || (argc == 6 && strcmp(argv[5], "--read-only") != 0)) {
    errno = 0;
    fail("usage: attach SOURCE PID TARGET [--read-only]");
  }
  unsigned long pid = number(argv[3], "PID");
  char path[64];
  snprintf(path, sizeof path, "/proc/%lu/ns/user", pid);
  int userns = open(path, O_RDONLY | O_CLOEXEC);
  if (userns < 0) fail("open %s", path);
  snprintf(path, sizeof path, "/proc/%lu/ns/mnt", pid);
  int mntns = open(path, O_RDONLY | O_CLOEXEC);
  if (mntns < 0) fail("open %s", path);
  snprintf(path, sizeof path, "/proc/%lu/root", pid);
  int root = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) fail("open %s", path);
  /* The mount point's new directories belong to whom the sandbox's process runs as (its root inside, or its user). */
  struct stat process;
  snprintf(path, sizeof path, "/proc/%lu", pid);
  if (stat(path, &process) != 0) fail("stat %s", path);
  int tree = (int)syscall(SYS_open_tree, AT_FDCWD, argv[2], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
  if (tree < 0) fail("open_tree %s", argv[2]);
  struct mount_attr attr = {.attr_set = MOUNT_ATTR_IDMAP | (writable ? 0 : MOUNT_ATTR_RDONLY) | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID, .userns_fd = (unsigned long long)userns};
  if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof attr) != 0) fail("idmap %s", argv[2]);
  /* move_mount attaches only within the caller's own mount namespace: the sandbox's, from here on. */
  if (setns(mntns, CLONE_NEWNS) != 0) fail("setns %s", path);
  if (argv[4][0] != '/') {
    errno = EINVAL;
    fail("the mount point is not an absolute path: %s", argv[4]);
  }
  int at = open_beneath(root, argv[4], 1, process.st_uid, process.st_gid);
  if (syscall(SYS_move_mount, tree, "", at, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) fail("mount at %s", argv[4]);
  return 0;
}

static int as_user(int argc, char **argv) {
  unsigned long uid = 1000, gid = 1000;
  int i = 2;
  for (; i + 1 < argc && strcmp(argv[i], "--") != 0; i += 2) {
    if (strcmp(argv[i], "--uid") == 0) uid = number(argv[i + 1], "--uid");
    else if (strcmp(argv[i], "--gid") == 0) gid = number(argv[i + 1], "--gid");
    else break;
  }
  if (i + 1 >= argc || strcmp(argv[i], "--") != 0) {
    errno = 0;
    fail("usage: as-user [--uid U --gid G] -- PROGRAM ARGS");
  }
  if (setgroups(0, NULL) != 0 || setresgid((gid_t)gid, (gid_t)gid, (gid_t)gid) != 0 || setresuid((uid_t)uid, (uid_t)uid, (uid_t)uid) != 0) fail("become %lu:%lu", uid, gid);
  execvp(argv[i + 1], argv + i + 1);
  fail("exec %s", argv[i + 1]);
  return 125;
}

int main(int argc, char **argv) {
  if (argc >= 3 && strcmp(argv[1], "marks") == 0) return marks(argv[2]);
  if (argc >= 2 && strcmp(argv[1], "mount") == 0) return mount_root(argc, argv);
  if (argc >= 3 && strcmp(argv[1], "shift") == 0) return shift(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "idmap") == 0) return idmap(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "as-user") == 0) return as_user(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "attach") == 0) return attach(argc, argv);
  errno = 0;
  fail("usage: image-root marks TREE | image-root mount ... -- PROGRAM ARGS | image-root shift DIR --map ... | image-root idmap SOURCE TARGET --map ... [--read-only] | image-root attach SOURCE PID TARGET [--read-only]");
  return 125;
}
