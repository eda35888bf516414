import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildOciConfig, type OciPlan } from '../../../src/sandbox/oci-bundle.js';

const plan: OciPlan = {
  layout: { symlinks: [{ path: '/bin', target: 'usr/bin' }], directories: ['/usr'], etc: ['/etc/ld.so.cache'] },
  identityFiles: { passwd: '/state/passwd', group: '/state/group' },
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
  noexecWritable: false,
  tmpBytes: 1024,
  limits: { memoryBytes: 1 << 20, memoryMechanism: 'address-space', maxProcesses: 8, maxOpenFiles: 64, maxFileBytes: 4096, cpuCores: 1.5 },
  cgroup: { path: '/agent-runner/1-1-x', limits: { memoryBytes: 1 << 20, maxProcesses: 264, cpuCores: 1.5 } },
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
  linux: { namespaces: Array<{ type: string }>; cgroupsPath: string; resources: unknown };
  root: unknown;
  hostname: string;
}

const config = (overrides: Partial<OciPlan> = {}) => buildOciConfig({ ...plan, ...overrides }) as Config;

describe('OCI config of a gvisor job', () => {
  it('runs the job as uid 1000 with no capabilities, no_new_privs, its env exactly, and rlimits', () => {
    const { process, hostname, root } = config();
    assert.deepEqual(process.user, { uid: 1000, gid: 1000, additionalGids: [] });
    assert.deepEqual(process.args, ['/usr/bin/python3', 'main.py']);
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
    const writable = config({ noexecWritable: true }).mounts.filter(({ options }) => !options.includes('ro'));
    assert.deepEqual(
      writable.filter(({ options }) => !options.includes('noexec')).map(({ destination }) => destination),
      [],
    );
    assert.deepEqual(
      writable.map(({ destination }) => destination),
      ['/proc', '/tmp', '/tmp/job', '/workspace'],
    );
  });

  it('names the cgroup made for the job with its limits, and new namespaces including the network', () => {
    const { linux } = config();
    assert.equal(linux.cgroupsPath, '/agent-runner/1-1-x');
    assert.deepEqual(linux.resources, { memory: { limit: 1 << 20 }, pids: { limit: 264 }, cpu: { quota: 150_000, period: 100_000 } });
    assert.deepEqual(
      linux.namespaces.map(({ type }) => type),
      ['pid', 'network', 'ipc', 'uts', 'mount'],
    );
  });
});
