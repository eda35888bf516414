import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildOciConfig, type OciPlan } from '../../../src/isolation/gvisor/oci-bundle.js';
import { DENIED_SYSCALLS } from '../../../src/isolation/host/seccomp.js';

const plan: OciPlan = {
  layout: { symlinks: [{ path: '/bin', target: 'usr/bin' }], ownLinks: [], directories: ['/usr'], etc: ['/etc/ld.so.cache'] },
  identityFiles: { passwd: '/state/passwd', group: '/state/group' },
  loopbackHosts: '/state/hosts-loopback',
  argv: ['/usr/bin/python3', 'main.py'],
  cwd: '/workspace',
  env: { PATH: '/usr/bin', HOME: '/tmp' },
  mounts: [
    { host: '/state/work', sandbox: '/workspace', writable: true },
    { host: '/state/jobs/1/file-0', sandbox: '/tmp/job/main.py', writable: false },
  ],
  scratch: ['/tmp/job'],
  hidden: ['/usr/bin/dash'],
  emptyFile: '/state/empty',
  executable: 'any',
  tmpBytes: 1024,
  limits: { memoryBytes: 1 << 20, memoryMechanism: 'address-space', maxProcesses: 8, maxOpenFiles: 64, maxFileBytes: 4096, cpuCores: 1.5 },
  cgroup: { path: '/agent-runner/1-1-x', limits: { memoryBytes: 1 << 20, maxProcesses: 264, cpuCores: 1.5 } },
  netns: null,
  jobFilter: { helper: '/dist/native/seccomp-exec', filter: '/state/seccomp-x86_64.bpf' },
};

interface Config {
  process: {
    user: unknown;
    args: string[];
    cwd: string;
    env: string[];
    capabilities: Record<string, unknown[]>;
    noNewPrivileges: boolean;
    rlimits: Array<{ type: string; hard: number }>;
  };
  mounts: Array<{ destination: string; type: string; source: string; options: string[] }>;
  linux: { namespaces: Array<{ type: string; path?: string }>; cgroupsPath: string; resources: unknown; seccomp: Seccomp };
  root: unknown;
  hostname: string;
}

interface Seccomp {
  defaultAction: string;
  syscalls: Array<{ names: string[]; action: string; errnoRet: number; args?: Array<{ index: number; value: number; valueTwo: number; op: string }> }>;
}

const config = (overrides: Partial<OciPlan> = {}) => buildOciConfig({ ...plan, ...overrides }) as Config;

describe('OCI config of a gvisor job', () => {
  it('runs the job as uid 1000 with no capabilities, no_new_privs, its env exactly, and rlimits', () => {
    const { process, hostname, root } = config();
    assert.deepEqual(process.user, { uid: 1000, gid: 1000, additionalGids: [] });
    // The job puts the sandbox's own syscall filter on itself first (seccomp-exec), then runs.
    assert.deepEqual(process.args, ['/.agent-runner/seccomp-exec', '/.agent-runner/seccomp.bpf', '--', '/usr/bin/python3', 'main.py']);
    assert.deepEqual(process.env, ['PATH=/usr/bin', 'HOME=/tmp']);
    assert.ok(Object.values(process.capabilities).every((set) => set.length === 0));
    assert.equal(process.noNewPrivileges, true);
    assert.deepEqual(
      process.rlimits.map(({ type, hard }) => `${type}=${hard}`),
      ['RLIMIT_NOFILE=64', 'RLIMIT_FSIZE=4096', 'RLIMIT_CORE=0', 'RLIMIT_AS=1048576'],
    );
    assert.equal(hostname, 'sandbox');
    assert.deepEqual(root, { path: 'rootfs', readonly: true });
  });

  it('mounts the system read-only, hides files with an empty one, and puts the job mounts last', () => {
    const { mounts } = config();
    assert.deepEqual(
      mounts.map(({ destination, source, options }) => `${destination} <- ${source} ${options.includes('ro') ? 'ro' : 'rw'}`),
      [
        '/proc <- proc rw',
        '/sys <- tmpfs ro',
        '/usr <- /usr ro',
        '/usr/bin/dash <- /state/empty ro',
        '/etc/ld.so.cache <- /etc/ld.so.cache ro',
        '/etc/passwd <- /state/passwd ro',
        '/etc/group <- /state/group ro',
        '/etc/hosts <- /state/hosts-loopback ro',
        '/.agent-runner/seccomp-exec <- /dist/native/seccomp-exec ro',
        '/.agent-runner/seccomp.bpf <- /state/seccomp-x86_64.bpf ro',
        '/tmp <- tmpfs rw',
        '/tmp/job <- tmpfs rw',
        '/workspace <- /state/work rw',
        '/tmp/job/main.py <- /state/jobs/1/file-0 ro',
      ],
    );
    assert.deepEqual(
      mounts.filter(({ options }) => options.includes('noexec')).map(({ destination }) => destination),
      ['/proc'],
      'writable paths stay executable unless the exec rules say otherwise',
    );
  });

  it('makes every writable mount noexec when nothing written may be executed', () => {
    const writable = config({ executable: 'system' }).mounts.filter(({ options }) => !options.includes('ro'));
    assert.deepEqual(
      writable.filter(({ options }) => !options.includes('noexec')).map(({ destination }) => destination),
      [],
    );
    assert.deepEqual(
      writable.map(({ destination }) => destination),
      ['/proc', '/tmp', '/tmp/job', '/workspace'],
    );
  });

  it('with an exec allowlist, every mount is noexec but the listed paths, each bound over itself last; a hidden shell stays hidden', () => {
    const { mounts } = config({ executable: { only: ['/usr/bin/python3.11', '/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2', '/usr/bin/dash'] } });
    const executable = mounts.filter(({ options }) => !options.includes('noexec'));
    assert.deepEqual(
      executable.map(({ destination, source, options }) => [destination, source, options.includes('ro')]),
      [
        ['/sys', 'tmpfs', true],
        ['/.agent-runner/seccomp-exec', '/dist/native/seccomp-exec', true],
        ['/usr/bin/python3.11', '/usr/bin/python3.11', true],
        ['/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2', '/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2', true],
      ],
    );
    assert.deepEqual(mounts.slice(-2), executable.slice(2), 'after the mounts they land on');
    // A listed file inside a bound mount comes from that mount's source.
    const bound = config({
      mounts: [{ host: '/state/toolchains/node', sandbox: '/opt/toolchains/node', writable: false }],
      executable: { only: ['/opt/toolchains/node/bin/node'] },
    });
    assert.equal(bound.mounts.at(-1)!.source, '/state/toolchains/node/bin/node');
  });

  it('names the cgroup made for the job with its limits, and new namespaces including the network', () => {
    const { linux } = config();
    assert.equal(linux.cgroupsPath, '/agent-runner/1-1-x');
    assert.deepEqual(linux.resources, { memory: { limit: 1 << 20 }, pids: { limit: 264 }, cpu: { quota: 150_000, period: 100_000 } });
    assert.deepEqual(
      linux.namespaces.map(({ type }) => type),
      ['pid', 'network', 'ipc', 'uts', 'mount'],
    );
    assert.ok(linux.namespaces.every((namespace) => !('path' in namespace)));
  });

  it('joins the network namespace the host made for a job with egress, and only that one', () => {
    const { linux } = config({ netns: '/proc/1/fd/9' });
    assert.deepEqual(linux.namespaces, [{ type: 'pid' }, { type: 'network', path: '/proc/1/fd/9' }, { type: 'ipc' }, { type: 'uts' }, { type: 'mount' }]);
  });

  it("carries the bubblewrap backend's seccomp denylist: every refusal EPERM, the rest allowed", () => {
    const { seccomp } = config().linux;
    assert.equal(seccomp.defaultAction, 'SCMP_ACT_ALLOW');
    assert.ok(seccomp.syscalls.every(({ action, errnoRet }) => action === 'SCMP_ACT_ERRNO' && errnoRet === 1));
    const unconditional = seccomp.syscalls.filter(({ args }) => args === undefined).flatMap(({ names }) => names);
    assert.deepEqual(unconditional, [...DENIED_SYSCALLS]);
    assert.ok(!seccomp.syscalls.some(({ names }) => names.includes('clone3')), 'this runsc would answer it EPERM, not ENOSYS');
  });

  it('refuses clone with any CLONE_NEW* flag, terminal injection and device nodes, one comparison a rule', () => {
    const conditional = config()
      .linux.seccomp.syscalls.filter(({ args }) => args !== undefined)
      .map(({ names, args }) => `${names.join()} ${args!.map(({ index, op, value, valueTwo }) => `arg${index} & ${value.toString(16)} ${op} ${valueTwo.toString(16)}`).join()}`);
    assert.deepEqual(conditional, [
      'clone arg0 & 20000 SCMP_CMP_MASKED_EQ 20000',
      'clone arg0 & 2000000 SCMP_CMP_MASKED_EQ 2000000',
      'clone arg0 & 4000000 SCMP_CMP_MASKED_EQ 4000000',
      'clone arg0 & 8000000 SCMP_CMP_MASKED_EQ 8000000',
      'clone arg0 & 10000000 SCMP_CMP_MASKED_EQ 10000000',
      'clone arg0 & 20000000 SCMP_CMP_MASKED_EQ 20000000',
      'clone arg0 & 40000000 SCMP_CMP_MASKED_EQ 40000000',
      'clone arg0 & 80 SCMP_CMP_MASKED_EQ 80',
      'ioctl arg1 & ffffffff SCMP_CMP_MASKED_EQ 5412',
      'ioctl arg1 & ffffffff SCMP_CMP_MASKED_EQ 541c',
      'mknod arg1 & f000 SCMP_CMP_MASKED_EQ 2000',
      'mknodat arg2 & f000 SCMP_CMP_MASKED_EQ 2000',
      'mknod arg1 & f000 SCMP_CMP_MASKED_EQ 6000',
      'mknodat arg2 & f000 SCMP_CMP_MASKED_EQ 6000',
    ]);
  });
});
