import { join } from 'node:path';
import { replaceFile } from './shared-files.js';
/**
 * The syscall filter every sandboxed process runs under, as a classic BPF program for
 * `bwrap --seccomp FD`. Modelled on Docker's default profile, written as a denylist (the
 * sandbox already holds no capabilities, so what is left to refuse is the kernel attack surface
 * an unprivileged process can still reach):
 *  - other ABIs (x32, i386) are killed outright: a filter for one ABI says nothing of another;
 *  - namespace, mount, module, kexec, keyring, bpf, perf, ptrace (and pidfd_getfd, its way to
 *    another process's descriptors) and io_uring calls fail EPERM;
 *  - clone with any CLONE_NEW* flag fails EPERM (threads and fork pass);
 *  - clone3 fails ENOSYS, so libc falls back to clone, whose flags we can inspect (clone3 keeps
 *    them in memory a filter cannot read);
 *  - ioctl TIOCSTI/TIOCLINUX (pushing keystrokes into a terminal) fail EPERM;
 *  - personality only with the values Docker allows (no ADDR_NO_RANDOMIZE).
 * x86_64 only; on another architecture the backend reports the filter unavailable.
 * The gvisor backend carries the same lists to gVisor as OCI rules (oci-bundle.ts), and the
 * filter itself, which its jobs put on themselves (native/seccomp-exec.c).
 */
// A table: several entries a line, grouped by what they do.
// prettier-ignore
export const SYSCALLS_X86_64 = {
  ioctl: 16, clone: 56, ptrace: 101, syslog: 103, uselib: 134, personality: 135, vhangup: 153,
  pivot_root: 155, _sysctl: 156, adjtimex: 159, acct: 163, settimeofday: 164, mount: 165,
  umount2: 166, swapon: 167, swapoff: 168, reboot: 169, sethostname: 170, setdomainname: 171,
  iopl: 172, ioperm: 173, create_module: 174, init_module: 175, delete_module: 176,
  get_kernel_syms: 177, query_module: 178, quotactl: 179, nfsservctl: 180, lookup_dcookie: 212,
  clock_settime: 227, kexec_load: 246, add_key: 248, request_key: 249, keyctl: 250, unshare: 272,
  perf_event_open: 298, fanotify_init: 300, name_to_handle_at: 303, open_by_handle_at: 304,
  clock_adjtime: 305, setns: 308, process_vm_readv: 310, process_vm_writev: 311, kcmp: 312,
  finit_module: 313, kexec_file_load: 320, bpf: 321, userfaultfd: 323, io_uring_setup: 425,
  io_uring_enter: 426, io_uring_register: 427, open_tree: 428, move_mount: 429, fsopen: 430,
  fsconfig: 431, fsmount: 432, fspick: 433, clone3: 435, pidfd_getfd: 438, mount_setattr: 442,
} as const;

type Syscall = keyof typeof SYSCALLS_X86_64;

// A table: several entries a line, grouped by what they do.
// prettier-ignore
export const DENIED_SYSCALLS: readonly Syscall[] = [
  'ptrace', 'process_vm_readv', 'process_vm_writev', 'kcmp', 'pidfd_getfd',
  'mount', 'umount2', 'pivot_root', 'move_mount', 'open_tree', 'fsopen', 'fsconfig', 'fsmount', 'fspick', 'mount_setattr',
  'unshare', 'setns',
  'init_module', 'finit_module', 'delete_module', 'create_module', 'query_module', 'get_kernel_syms',
  'kexec_load', 'kexec_file_load', 'reboot',
  'keyctl', 'add_key', 'request_key',
  'bpf', 'perf_event_open', 'userfaultfd', 'io_uring_setup', 'io_uring_enter', 'io_uring_register',
  'swapon', 'swapoff', 'acct', 'syslog', 'quotactl', 'lookup_dcookie', 'uselib', 'nfsservctl', '_sysctl',
  'settimeofday', 'clock_settime', 'adjtimex', 'clock_adjtime', 'sethostname', 'setdomainname',
  'iopl', 'ioperm', 'vhangup', 'fanotify_init', 'open_by_handle_at', 'name_to_handle_at',
];

const AUDIT_ARCH_X86_64 = 0xc000003e;
const X32_SYSCALL_BIT = 0x40000000;
/** CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME */
export const CLONE_NEW_FLAG_BITS: readonly number[] = [0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x00000080];
const CLONE_NEW_FLAGS = CLONE_NEW_FLAG_BITS.reduce((all, bit) => all | bit);
export const TIOCSTI = 0x5412;
export const TIOCLINUX = 0x541c;
const ALLOWED_PERSONALITIES = [0x0, 0x8, 0x20000, 0x20008, 0xffffffff];
export const EPERM = 1;
const ENOSYS = 38;

// Classic BPF, as seccomp reads it.
const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const JSET_K = 0x45;
const RET_K = 0x06;
const RET_ALLOW = 0x7fff0000;
const RET_KILL_PROCESS = 0x80000000;
const retErrno = (errno: number) => 0x00050000 | errno;

// Offsets in struct seccomp_data: nr, arch, instruction_pointer, args[6] (low words, little-endian).
const OFFSET_NR = 0;
const OFFSET_ARCH = 4;
const OFFSET_ARG0 = 16;
const OFFSET_ARG1 = 24;

interface Instruction {
  code: number;
  jt: number;
  jf: number;
  k: number;
}

const stmt = (code: number, k: number): Instruction => ({ code, jt: 0, jf: 0, k });
const jump = (code: number, k: number, jt: number, jf: number): Instruction => ({ code, jt, jf, k });

/** The filter as instructions, in order; readable and testable before it is encoded. */
export function buildFilter(): Instruction[] {
  const program: Instruction[] = [
    stmt(LD_W_ABS, OFFSET_ARCH),
    jump(JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
    stmt(RET_K, RET_KILL_PROCESS),
    stmt(LD_W_ABS, OFFSET_NR),
    jump(JGE_K, X32_SYSCALL_BIT, 0, 1),
    stmt(RET_K, RET_KILL_PROCESS),
  ];
  for (const name of DENIED_SYSCALLS) program.push(jump(JEQ_K, SYSCALLS_X86_64[name], 0, 1), stmt(RET_K, retErrno(EPERM)));
  program.push(jump(JEQ_K, SYSCALLS_X86_64.clone3, 0, 1), stmt(RET_K, retErrno(ENOSYS)));

  // clone: refuse new namespaces. A is reloaded, so this block ends in returns.
  program.push(jump(JEQ_K, SYSCALLS_X86_64.clone, 0, 4), stmt(LD_W_ABS, OFFSET_ARG0), jump(JSET_K, CLONE_NEW_FLAGS, 0, 1), stmt(RET_K, retErrno(EPERM)), stmt(RET_K, RET_ALLOW));
  // ioctl: refuse injecting input into a terminal.
  program.push(
    jump(JEQ_K, SYSCALLS_X86_64.ioctl, 0, 5),
    stmt(LD_W_ABS, OFFSET_ARG1),
    jump(JEQ_K, TIOCSTI, 1, 0),
    jump(JEQ_K, TIOCLINUX, 0, 1),
    stmt(RET_K, retErrno(EPERM)),
    stmt(RET_K, RET_ALLOW),
  );
  // personality: only the harmless values.
  const allowed = ALLOWED_PERSONALITIES.length;
  program.push(jump(JEQ_K, SYSCALLS_X86_64.personality, 0, allowed + 2), stmt(LD_W_ABS, OFFSET_ARG0));
  ALLOWED_PERSONALITIES.forEach((value, index) => program.push(jump(JEQ_K, value, allowed - index, 0)));
  program.push(stmt(RET_K, retErrno(EPERM)), stmt(RET_K, RET_ALLOW));

  program.push(stmt(RET_K, RET_ALLOW));
  return program;
}

/** struct sock_filter[] as bwrap reads it from its --seccomp fd. */
export function encodeFilter(program: readonly Instruction[]): Buffer {
  const bytes = Buffer.alloc(program.length * 8);
  program.forEach(({ code, jt, jf, k }, index) => {
    bytes.writeUInt16LE(code, index * 8);
    bytes.writeUInt8(jt, index * 8 + 2);
    bytes.writeUInt8(jf, index * 8 + 3);
    bytes.writeUInt32LE(k >>> 0, index * 8 + 4);
  });
  return bytes;
}

/** The filter as a file in `dir` (seccomp-x86_64.bpf), replaced atomically: what bwrap --seccomp and seccomp-exec read. */
export function writeFilterFile(dir: string): string {
  const path = join(dir, 'seccomp-x86_64.bpf');
  replaceFile(path, encodeFilter(buildFilter()));
  return path;
}

export function seccompSupported(): boolean {
  return process.arch === 'x64';
}
