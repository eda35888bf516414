import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { workspaceSandboxArgs } from '../../../src/sandbox/bwrap-argv.js';
import { visibleInSandbox, type WorkspacePlan } from '../../../src/sandbox/workspace-profile.js';
import { removeDir, tempDir } from '../../helpers/agent-exec.js';
import { bwrapFlags } from '../../helpers/bwrap-flags.js';

const plan: WorkspacePlan = {
  argv: ['/usr/bin/make', 'test'],
  cwd: '/srv/project',
  network: 'host',
  hidden: { dirs: ['/root', '/home'], files: ['/etc/shadow'] },
  stateRoot: '/var/lib/agent-exec',
  statusFd: 3,
};

describe('workspace sandbox flags', () => {
  it('are one readable list: namespaces, lifetime, read-only host, hidden secrets, fresh kernel views, writable cwd', (t) => {
    const args = workspaceSandboxArgs(plan);
    t.diagnostic(`bwrap ${args.join(' ')}`);
    // The expected flags, read as a table.
    // prettier-ignore
    assert.deepEqual(bwrapFlags(args), [
      '--unshare-user', '--unshare-pid', '--unshare-ipc', '--disable-userns', '--cap-drop ALL',
      '--die-with-parent', '--new-session', '--json-status-fd 3',
      '--ro-bind / /',
      '--tmpfs /root', '--tmpfs /home', '--ro-bind /dev/null /etc/shadow',
      '--proc /proc', '--dev /dev', '--tmpfs /tmp',
      '--bind /srv/project /srv/project',
      '--tmpfs /var/lib/agent-exec',
      '--chdir /srv/project',
    ]);
    assert.deepEqual(args.slice(args.indexOf('--') + 1), ['/usr/bin/make', 'test']);
  });

  it('--network none adds a network namespace; a state root already hidden is not mounted twice', () => {
    const args = workspaceSandboxArgs({ ...plan, network: 'none', stateRoot: '/root/.local/share/agent-exec' });
    assert.ok(bwrapFlags(args).includes('--unshare-net'));
    assert.ok(!args.includes('/root/.local/share/agent-exec'));
  });

  it('the state root is hidden even inside cwd, after cwd is bound', () => {
    const args = bwrapFlags(workspaceSandboxArgs({ ...plan, stateRoot: '/srv/project/.agent-exec' }));
    assert.ok(args.indexOf('--tmpfs /srv/project/.agent-exec') > args.indexOf('--bind /srv/project /srv/project'));
  });

  it('passes argv through literally, never as shell text', () => {
    const hostile = ['--bind', '/', '/', '; id', '$(id)', 'a\nb'];
    const args = workspaceSandboxArgs({ ...plan, argv: hostile });
    assert.deepEqual(args.slice(args.indexOf('--') + 1), hostile);
  });

  it('knows what the job can see: the host, not homes, /tmp or the state root', () => {
    const [cwd, elsewhere] = [tempDir('agent-exec-visible-'), tempDir('agent-exec-elsewhere-')];
    try {
      const real = { cwd, hidden: { dirs: ['/root'], files: [] }, stateRoot: '/nonexistent-root' };
      assert.equal(visibleInSandbox('/usr/bin/env', real), true);
      assert.equal(visibleInSandbox('/root', real), false);
      assert.equal(visibleInSandbox(elsewhere, real), false, 'the rest of /tmp is private');
      assert.equal(visibleInSandbox(cwd, real), true);
    } finally {
      [cwd, elsewhere].forEach(removeDir);
    }
  });
});
