import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildFilter, DENIED_SYSCALLS, encodeFilter, SYSCALLS_X86_64 } from '../../../src/isolation/host/seccomp.js';

/** Runs the filter's classic BPF over a seccomp_data, as the kernel would: the decision it returns. */
function decide(nr: number, args: number[] = [], arch = 0xc000003e): number {
  const program = buildFilter();
  const load = (offset: number) => (offset === 0 ? nr : offset === 4 ? arch : (args[(offset - 16) / 8] ?? 0));
  let accumulator = 0;
  for (let pc = 0; pc < program.length;) {
    const { code, jt, jf, k } = program[pc]!;
    if (code === 0x20) accumulator = load(k) >>> 0;
    else if (code === 0x06) return k >>> 0;
    else if (code === 0x15) {
      pc += 1 + (accumulator === k >>> 0 ? jt : jf);
      continue;
    } else if (code === 0x35) {
      pc += 1 + (accumulator >= k >>> 0 ? jt : jf);
      continue;
    } else if (code === 0x45) {
      pc += 1 + ((accumulator & k) !== 0 ? jt : jf);
      continue;
    } else throw new Error(`unknown BPF opcode ${code}`);
    pc += 1;
  }
  throw new Error('fell off the end of the filter');
}

const ALLOW = 0x7fff0000;
const EPERM = 0x00050001;
const ENOSYS = 0x00050026;
const KILL = 0x80000000;

describe('seccomp filter', () => {
  it('denies every listed syscall with EPERM and allows ordinary ones', () => {
    for (const name of DENIED_SYSCALLS) assert.equal(decide(SYSCALLS_X86_64[name]), EPERM, name);
    for (const nr of [0, 1, 2, 3, 9, 57, 59, 60, 231, 257]) assert.equal(decide(nr), ALLOW, `syscall ${nr}`);
  });

  it('allows clone for threads and fork, denies it with any CLONE_NEW* flag; clone3 is ENOSYS', () => {
    assert.equal(decide(SYSCALLS_X86_64.clone, [0x3d0f00]), ALLOW);
    assert.equal(decide(SYSCALLS_X86_64.clone, [0x10000000 | 0x11]), EPERM);
    assert.equal(decide(SYSCALLS_X86_64.clone, [0x00020000]), EPERM);
    assert.equal(decide(SYSCALLS_X86_64.clone3), ENOSYS);
  });

  it('denies TIOCSTI and TIOCLINUX ioctls only', () => {
    assert.equal(decide(SYSCALLS_X86_64.ioctl, [0, 0x5412]), EPERM);
    assert.equal(decide(SYSCALLS_X86_64.ioctl, [0, 0x541c]), EPERM);
    assert.equal(decide(SYSCALLS_X86_64.ioctl, [0, 0x5401]), ALLOW);
  });

  it('allows only harmless personality values', () => {
    assert.equal(decide(SYSCALLS_X86_64.personality, [0]), ALLOW);
    assert.equal(decide(SYSCALLS_X86_64.personality, [0xffffffff]), ALLOW);
    assert.equal(decide(SYSCALLS_X86_64.personality, [0x0040000]), EPERM);
  });

  it('kills other ABIs: x32 syscall numbers and non-x86_64 architectures', () => {
    assert.equal(decide(0x40000000 | 59), KILL);
    assert.equal(decide(59, [], 0x40000003), KILL);
  });

  it('encodes 8 bytes per instruction', () => {
    assert.equal(encodeFilter(buildFilter()).length, buildFilter().length * 8);
  });
});
