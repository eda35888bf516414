import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { runJob } from '../../../src/runner/run-job.js';
import { resolveSandboxPath } from '../../../src/isolation/host/sandbox-path.js';
import { TEST_STATE_DIR, testRuntime } from '../../helpers/runtime.js';
import { makeWorkspace } from '../../helpers/workspace.js';

const runtime = testRuntime();
after(() => runtime.dispose());

/**
 * A chain of links that stays inside the workspace by its text but not by resolution:
 * x/y -> .. (the workspace root) and a -> x/y/.. (the root's parent, on the host).
 */
function escapingWorkspace(): string {
  const path = makeWorkspace({ 'x/keep.txt': 'x' });
  symlinkSync('..', join(path, 'x', 'y'));
  symlinkSync('x/y/..', join(path, 'a'));
  return path;
}

function foundUnder(root: string, name: string): string[] {
  return execFileSync('find', [root, '-name', name], { encoding: 'utf8' }).split('\n').filter(Boolean);
}

describe('links planted in the work dir never lead host-side code out of it', () => {
  it('a cwd through an escaping link chain is refused (setup_failed), nothing is created or chowned outside', async () => {
    const marker = `escape-${randomUUID()}`;
    const result = await runJob({ workspace: { source: 'local_path', path: escapingWorkspace() }, command: { argv: ['true'], cwd: `a/${marker}` } }, { runtime });
    assert.equal(result.status, 'setup_failed');
    assert.equal(result.error?.code, 'backend.setup_failed');
    // The snapshot drops `a` (it leaves through x/y), so the cwd is not there at all.
    assert.match(result.error!.message, /does not exist in the workspace snapshot/);
    assert.deepEqual(foundUnder(TEST_STATE_DIR, marker), [], 'no directory was made outside the work dir');
  });

  it('resolves commands as the sandbox would: a link chain never reaches a host file', async () => {
    const workDir = mkdtempSync(join(tmpdir(), 'resolve-'));
    const outside = mkdtempSync(join(tmpdir(), 'outside-'));
    writeFileSync(join(outside, 'tool'), '#!/bin/sh\n', { mode: 0o755 });
    mkdirSync(join(workDir, 'x'));
    symlinkSync('..', join(workDir, 'x', 'y'));
    // On the host this is <workDir>/../<outside>/tool; in the sandbox, /<outside>/tool, which does not exist.
    symlinkSync(`x/y/../..${outside}/tool`, join(workDir, 'tool'));
    const view = { sandbox: '/workspace', host: workDir };
    assert.equal(await resolveSandboxPath('/workspace/tool', view), null);
    symlinkSync('/usr/bin/true', join(workDir, 'system-tool'));
    assert.deepEqual(await resolveSandboxPath('/workspace/system-tool', view), { where: 'system', sandboxPath: '/usr/bin/true' });
    symlinkSync('x/y/x/keep', join(workDir, 'inner'));
    writeFileSync(join(workDir, 'x', 'keep'), '');
    assert.deepEqual(await resolveSandboxPath('/workspace/inner', view), { where: 'work', sandboxPath: '/workspace/x/keep', components: ['x', 'keep'] });
  });

  it('links and FIFOs matching an artifact glob are listed as skipped, never followed or dropped silently', async () => {
    const result = await runJob(
      {
        command: { argv: ['sh', '-c', 'mkdir out && echo ok > out/real.txt && ln -s /etc/passwd out/passwd && ln -s .. out/up && mkfifo out/pipe'] },
        policy: { allow_shell: true },
        artifacts: ['out/**'],
      },
      { runtime },
    );
    assert.equal(result.status, 'completed');
    assert.deepEqual(
      result.artifacts.map((artifact) => artifact.path),
      ['out/real.txt'],
    );
    assert.deepEqual(result.artifacts_skipped, [
      { path: 'out/passwd', reason: 'symbolic link: links are not followed or collected' },
      { path: 'out/pipe', reason: 'not a regular file (fifo, socket or device)' },
      { path: 'out/up', reason: 'symbolic link: links are not followed or collected' },
    ]);
  });

  it('the artifact walk holds one directory fd per level: 25,000 directories do not exhaust fds', async () => {
    const result = await runJob(
      {
        command: { argv: ['python3', '-c', 'import os\nfor i in range(25000): os.makedirs(f"d/{i}")\nopen("d/7/hit.txt", "w").write("hit")'] },
        policy: { allow_shell: true },
        artifacts: ['d/**/*.txt'],
        limits: { timeout_ms: 120_000 },
      },
      { runtime },
    );
    assert.equal(result.status, 'completed', JSON.stringify(result.error));
    assert.deepEqual(
      result.artifacts.map((artifact) => artifact.path),
      ['d/7/hit.txt'],
    );
  });
});

describe('a local_path workspace is judged by the links a sent archive is judged by', () => {
  it('drops and lists a link that leaves only through another link (e1 -> d/up/.., d/up -> ..), in the words of the archive refusal', async () => {
    const path = makeWorkspace({ 'd/keep.txt': 'd' });
    symlinkSync('..', join(path, 'd', 'up'));
    symlinkSync('d/up/..', join(path, 'e1'));
    const result = await runJob({ workspace: { source: 'local_path', path }, command: { argv: ['ls', '-A', '.', 'd'] } }, { runtime });
    assert.equal(result.status, 'completed', JSON.stringify(result.error));
    assert.deepEqual(result.workspace?.skipped, [{ path: 'e1', reason: 'symlink: a link to "d/up/..", which leaves the workspace through its other links' }]);
    assert.doesNotMatch(result.stdout.text, /e1/, 'the link is not in the work dir');
    assert.match(result.stdout.text, /up/, 'd/up stays: it names the workspace root');
  });
});
