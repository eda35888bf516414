import assert from 'node:assert/strict';
import { realpathSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import { workspaceSandboxArgs } from '../../../src/isolation/bubblewrap/bwrap-argv.js';
import { executableDirFor, executableVisible, privateHome, visibleInSandbox, type WorkspacePlan, type WorkspaceView } from '../../../src/isolation/bubblewrap/workspace-profile.js';
import { removeDir, tempDir } from '../../helpers/agent-exec.js';
import { bwrapFlags } from '../../helpers/bwrap-flags.js';

const view: WorkspaceView = {
  symlinks: [{ path: '/bin', target: 'usr/bin' }],
  readOnly: ['/usr', '/etc', '/opt'],
  hidden: { dirs: ['/etc/ssl/private'], files: ['/etc/shadow'] },
  executableDir: null,
  read: [],
  write: [],
};

const plan: WorkspacePlan = {
  argv: ['/usr/bin/make', 'test'],
  cwd: '/srv/project',
  network: 'host',
  view,
  stateRoot: '/var/lib/agent-exec',
  statusFd: 3,
  tmpBytes: 1048576,
  home: '/root',
};

describe('workspace sandbox flags', () => {
  it('are one readable list: namespaces, lifetime, the system read-only, hidden secrets, fresh kernel views, sized scratch, writable cwd, a frozen root', (t) => {
    const args = workspaceSandboxArgs({ ...plan, view: { ...view, executableDir: '/srv/tools/bin', read: ['/srv/data'], write: ['/srv/cache'] } });
    t.diagnostic(`bwrap ${args.join(' ')}`);
    // The expected flags, read as a table.
    // prettier-ignore
    assert.deepEqual(bwrapFlags(args), [
      '--unshare-user', '--unshare-pid', '--unshare-ipc', '--disable-userns', '--cap-drop ALL',
      '--die-with-parent', '--new-session', '--json-status-fd 3',
      '--ro-bind /usr /usr', '--ro-bind /etc /etc', '--ro-bind /opt /opt', '--symlink usr/bin /bin',
      '--tmpfs /etc/ssl/private', '--ro-bind /dev/null /etc/shadow',
      '--proc /proc', '--dev /dev', '--size 1048576', '--tmpfs /dev/shm', '--remount-ro /dev',
      '--size 1048576', '--tmpfs /tmp',
      '--size 1048576', '--tmpfs /root',
      '--ro-bind /srv/tools/bin /srv/tools/bin',
      '--ro-bind /srv/data /srv/data',
      '--bind /srv/cache /srv/cache',
      '--bind /srv/project /srv/project',
      '--remount-ro /etc/ssl/private', '--remount-ro /',
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
      const real = { cwd, view: { ...view, readOnly: ['/usr'], symlinks: [] }, stateRoot: '/nonexistent-root', home: '/root' };
      assert.equal(visibleInSandbox('/usr/bin/env', real), true);
      assert.equal(visibleInSandbox('/root', real), false);
      assert.equal(visibleInSandbox(elsewhere, real), false, 'the rest of /tmp is private');
      assert.equal(visibleInSandbox(cwd, real), true);
    } finally {
      [cwd, elsewhere].forEach(removeDir);
    }
  });

  it('shows nothing the view does not name: /srv, /var and / itself stay out; --read and --write paths are in', () => {
    const shown = { cwd: '/srv/project', view: { ...view, read: ['/var/data'], write: ['/srv/cache'] }, stateRoot: '/var/lib/agent-exec', home: null };
    const args = bwrapFlags(workspaceSandboxArgs({ ...plan, ...shown }));
    assert.ok(!args.some((flag) => / \/( |$)/.test(flag) && flag !== '--remount-ro /'), 'nothing is mounted from / itself');
    assert.ok(args.includes('--ro-bind /var/data /var/data') && args.includes('--bind /srv/cache /srv/cache'));
    assert.ok(!args.some((flag) => flag.includes('/var/lib/agent-exec')), 'a state root the view does not show needs no cover');
  });

  it('the state root is covered last, whatever --read, --write or the cwd show', () => {
    const args = bwrapFlags(workspaceSandboxArgs({ ...plan, view: { ...view, read: ['/var/lib'] } }));
    assert.deepEqual(args.slice(-5), [
      '--tmpfs /var/lib/agent-exec',
      '--remount-ro /etc/ssl/private',
      '--remount-ro /var/lib/agent-exec',
      '--remount-ro /',
      '--chdir /srv/project',
    ]);
  });

  it('an executable outside the view brings its directory in, unless it lives in a home, /tmp or the state root', () => {
    const [cwd, tool] = [tempDir('agent-exec-cwd-'), tempDir('agent-exec-tool-')];
    try {
      const real = { cwd, view: { ...view, readOnly: ['/usr'] }, stateRoot: '/nonexistent-root', home: null };
      assert.equal(executableDirFor('/usr/bin/env', real), null, 'visible already');
      assert.equal(executableVisible('/usr/bin/env', real), true);
      assert.equal(executableDirFor(process.execPath, { ...real, view: { ...real.view, readOnly: [] } }), dirname(realpathSync(process.execPath)));
      writeFileSync(join(tool, 'tool'), '#!/bin/sh\n', { mode: 0o755 });
      assert.equal(executableVisible(join(tool, 'tool'), real), false, 'the host /tmp is private');
      assert.equal(executableVisible(join(tool, 'tool'), { ...real, view: { ...real.view, read: [tool] } }), true, 'unless named with --read');
    } finally {
      [cwd, tool].forEach(removeDir);
    }
  });

  it('$HOME becomes an empty private tmpfs when the view does not show it', () => {
    const shown = { cwd: '/srv/project', view, stateRoot: '/var/lib/agent-exec' };
    assert.equal(privateHome('/root', shown), '/root');
    assert.equal(privateHome('/home/agent/', shown), '/home/agent');
    assert.equal(privateHome('/srv/project', shown), null, 'the cwd is shown as it is');
    assert.equal(privateHome('/usr/share', shown), null);
    assert.equal(privateHome(undefined, shown), null);
    assert.equal(privateHome('relative', shown), null);
  });
});
