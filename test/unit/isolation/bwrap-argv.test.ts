import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildBwrapArgs, type BwrapPlan } from '../../../src/isolation/bubblewrap/bwrap-argv.js';
import { bwrapFlags } from '../../helpers/bwrap-flags.js';

const plan: BwrapPlan = {
  layout: { symlinks: [{ path: '/bin', target: 'usr/bin' }], ownLinks: [], directories: ['/usr'], etc: ['/etc/ld.so.cache'] },
  identityFiles: { passwd: '/state/passwd', group: '/state/group' },
  meminfo: '/state/meminfo',
  bootId: '/state/jobs/1/boot_id',
  argv: ['/usr/bin/python3', 'script.py'],
  cwd: '/tmp/job-1',
  env: { PATH: '/usr/bin', HOME: '/tmp' },
  mounts: [{ host: '/state/jobs/1/script.py', sandbox: '/tmp/job-1/script.py', writable: false }],
  networkFiles: null,
  loopbackHosts: '/state/hosts-loopback',
  vmNetwork: false,
  hidden: ['/usr/bin/dash'],
  terminals: false,
  tmpBytes: 1024,
  shmBytes: 512,
};

describe('bubblewrap argv', () => {
  it('is one readable list: namespaces, identity, environment, read-only system, scratch, job', () => {
    const args = buildBwrapArgs(plan);
    // The expected flags, read as a table.
    // prettier-ignore
    assert.deepEqual(bwrapFlags(args), [
      '--unshare-user', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup', '--unshare-net',
      '--uid 1000', '--gid 1000', '--disable-userns', '--cap-drop ALL', '--hostname sandbox', '--die-with-parent', '--new-session',
      '--clearenv', '--setenv PATH /usr/bin', '--setenv HOME /tmp',
      '--ro-bind /usr /usr', '--symlink usr/bin /bin', '--ro-bind /dev/null /usr/bin/dash', '--perms 0755', '--dir /etc', '--ro-bind /etc/ld.so.cache /etc/ld.so.cache',
      '--ro-bind /state/hosts-loopback /etc/hosts',
      '--ro-bind /state/passwd /etc/passwd', '--ro-bind /state/group /etc/group',
      '--proc /proc', '--ro-bind /state/meminfo /proc/meminfo', '--ro-bind /state/jobs/1/boot_id /proc/sys/kernel/random/boot_id',
      '--size 65536', '--tmpfs /dev',
      '--dev-bind /dev/null /dev/null', '--dev-bind /dev/zero /dev/zero', '--dev-bind /dev/full /dev/full',
      '--dev-bind /dev/random /dev/random', '--dev-bind /dev/urandom /dev/urandom',
      '--symlink /proc/self/fd /dev/fd', '--symlink /proc/self/fd/0 /dev/stdin',
      '--symlink /proc/self/fd/1 /dev/stdout', '--symlink /proc/self/fd/2 /dev/stderr',
      '--perms 1777', '--size 512', '--tmpfs /dev/shm', '--remount-ro /dev',
      '--perms 1777', '--size 1024', '--tmpfs /tmp', '--dir /tmp/job-1',
      '--ro-bind /state/jobs/1/script.py /tmp/job-1/script.py',
      '--remount-ro /',
      '--chdir /tmp/job-1',
    ]);
    assert.deepEqual(args.slice(args.indexOf('--') + 1), ['/usr/bin/python3', 'script.py']);
  });

  it("gives a sandbox with terminals bwrap's /dev (its own devpts), read-only but for /dev/shm", () => {
    const flags = bwrapFlags(buildBwrapArgs({ ...plan, terminals: true }));
    const dev = flags.slice(flags.indexOf('--ro-bind /state/jobs/1/boot_id /proc/sys/kernel/random/boot_id') + 1, flags.indexOf('--remount-ro /dev') + 1);
    assert.deepEqual(dev, ['--dev /dev', '--perms 1777', '--size 512', '--tmpfs /dev/shm', '--remount-ro /dev']);
  });

  it('makes root inside a user namespace whose map the host writes: root with six capabilities, nested namespaces left to seccomp', () => {
    const flags = bwrapFlags(buildBwrapArgs({ ...plan, seccompFd: 4, infoFd: 6, rootInside: { usernsBlockFd: 7 } }));
    const identity = flags.slice(flags.indexOf('--unshare-net') + 1, flags.indexOf('--hostname sandbox'));
    // prettier-ignore
    assert.deepEqual(identity, [
      '--userns-block-fd 7', '--uid 0', '--gid 0', '--cap-drop ALL',
      '--cap-add CAP_CHOWN', '--cap-add CAP_DAC_OVERRIDE', '--cap-add CAP_FOWNER', '--cap-add CAP_KILL', '--cap-add CAP_SETGID', '--cap-add CAP_SETUID',
    ]);
    assert.ok(flags.includes('--seccomp 4') && flags.includes('--info-fd 6'));
    // Root's home is root's alone: a tmpfs on the read-only system, its own on a writable root.
    assert.deepEqual(flags.slice(flags.indexOf('--tmpfs /tmp') + 1, flags.indexOf('--tmpfs /tmp') + 4), ['--perms 0700', `--size ${plan.tmpBytes}`, '--tmpfs /root']);
    const writable = bwrapFlags(buildBwrapArgs({ ...plan, seccompFd: 4, infoFd: 6, rootInside: { usernsBlockFd: 7 }, imageRoot: '/run/root/merged' }));
    assert.deepEqual(writable.slice(writable.indexOf('--tmpfs /tmp') + 1, writable.indexOf('--tmpfs /tmp') + 3), ['--perms 0700', '--dir /root']);
    // sudo, where given, after the mounts, its directories everyone's where they are made.
    const withSudo = bwrapFlags(buildBwrapArgs({ ...plan, seccompFd: 4, infoFd: 6, rootInside: { usernsBlockFd: 7 }, imageRoot: '/run/root/merged', sudo: '/opt/agent' }));
    const sudoAt = withSudo.indexOf('--ro-bind /opt/agent /usr/local/bin/sudo');
    assert.deepEqual(withSudo.slice(sudoAt - 4, sudoAt + 1), [
      '--perms 0755',
      '--dir /usr/local',
      '--perms 0755',
      '--dir /usr/local/bin',
      '--ro-bind /opt/agent /usr/local/bin/sudo',
    ]);
    // bwrap refuses --disable-userns beside a map written from outside; the filter refuses clone(CLONE_NEWUSER) and unshare.
    assert.ok(!flags.includes('--disable-userns'));
    assert.throws(() => buildBwrapArgs({ ...plan, infoFd: 6, rootInside: { usernsBlockFd: 7 } }), /seccomp/);
  });

  it('never shares the host network: egress gets its own resolver files and reports the sandbox for attaching', () => {
    const args = buildBwrapArgs({ ...plan, networkFiles: { hosts: '/state/jobs/1/network-hosts', resolvConf: '/state/jobs/1/network-resolv.conf' }, infoFd: 6 });
    const flags = bwrapFlags(args);
    assert.ok(flags.includes('--unshare-net'));
    assert.ok(flags.includes('--info-fd 6'));
    assert.ok(flags.includes('--ro-bind /state/jobs/1/network-hosts /etc/hosts'));
    assert.ok(flags.includes('--ro-bind /state/jobs/1/network-resolv.conf /etc/resolv.conf'));
    assert.ok(!flags.includes('--ro-bind /state/hosts-loopback /etc/hosts'));
    // Without egress: localhost is named (nothing else would resolve it), and there is no resolver.
    const loopbackOnly = bwrapFlags(buildBwrapArgs(plan));
    assert.ok(loopbackOnly.includes('--ro-bind /state/hosts-loopback /etc/hosts'));
    assert.ok(!loopbackOnly.some((flag) => flag.includes('/etc/resolv.conf')));
  });

  it("keeps the namespace's network only when told, as a microVM guest does (its one link leads to the host's egress proxy)", () => {
    const flags = bwrapFlags(buildBwrapArgs({ ...plan, vmNetwork: true }));
    assert.ok(!flags.includes('--unshare-net'));
    assert.ok(flags.includes('--unshare-user') && flags.includes('--cap-drop ALL'));
  });

  it("binds a microVM guest's volumes after its mounts, their missing parents made for the user to pass (bwrap would make them root's, 0700)", () => {
    const volumes = [
      { host: '/run/agent-runner-volumes/0', sandbox: '/mnt/data/cache', writable: true },
      { host: '/run/agent-runner-volumes/1', sandbox: '/srv', writable: false },
    ];
    const line = buildBwrapArgs({ ...plan, volumes }).join(' ');
    const at = (flags: string) => line.indexOf(flags);
    assert.ok(at('--perms 0755 --dir /mnt') >= 0 && at('--perms 0755 --dir /mnt') < at('--perms 0755 --dir /mnt/data'));
    assert.ok(at('--perms 0755 --dir /mnt/data') < at('--bind /run/agent-runner-volumes/0 /mnt/data/cache'));
    assert.ok(at('--ro-bind /run/agent-runner-volumes/1 /srv') > at('--bind /run/agent-runner-volumes/0 /mnt/data/cache'));
    assert.ok(!line.includes('--perms 0755 --dir / '), 'the root is never made');
  });

  it('passes argv through literally, never as shell text', () => {
    const hostile = ['--bind', '/', '/', '; id', '$(id)', 'a\nb'];
    const args = buildBwrapArgs({ ...plan, argv: hostile });
    assert.deepEqual(args.slice(args.indexOf('--') + 1), hostile);
  });
});
