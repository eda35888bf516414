import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { executeSnippet } from '../../../src/runner/snippet.js';
import { versionOf } from '../../../src/languages/resolve.js';
import { whileWriting } from '../../../src/util/fork-gate.js';
import { testRuntime } from '../../helpers/runtime.js';

describe('fork gate (ETXTBSY)', () => {
  it('the backend does not fork a sandbox while a staged write is open', async () => {
    const runtime = testRuntime({}, {});
    try {
      // Warm the backend up (probe, cgroups) so what remains of prepare() is the fork itself.
      assert.equal((await executeSnippet({ lang: 'bash', code: 'echo ready' }, { runtime })).stdout, 'ready\n');
      let finishWrite!: () => void;
      const writing = whileWriting(() => new Promise<void>((resolve) => (finishWrite = resolve)));
      let prepared = false;
      const template = {
        profile: 'snippet' as const,
        argv: ['/usr/bin/true'],
        cwd: '/tmp',
        env: {},
        mounts: [],
        files: [],
        network: 'none' as const,
        limits: { memoryBytes: 64 << 20, memoryMechanism: 'cgroup' as const, maxProcesses: 8, maxOpenFiles: 64, maxFileBytes: 1 << 20 },
      };
      const preparing = runtime.backend.prepare(template).then((sandbox) => {
        prepared = true;
        return sandbox;
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal(prepared, false, 'prepare must wait for the write to close');
      finishWrite();
      await writing;
      const sandbox = await preparing;
      const outcome = await sandbox.start({ timeoutMs: 5000, stdout: { write: () => undefined }, stderr: { write: () => undefined } });
      assert.equal(outcome.exitCode, 0);
    } finally {
      await runtime.dispose();
    }
  });

  it("a toolchain's version probe waits for a staged write too (a conformance run met ETXTBSY from a fork outside the gate)", async () => {
    let finishWrite!: () => void;
    const writing = whileWriting(() => new Promise<void>((resolve) => (finishWrite = resolve)));
    let probed = false;
    const probing = versionOf('/bin/echo', ['probe']).then((version) => {
      probed = true;
      return version;
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(probed, false, 'the probe must wait for the write to close');
    finishWrite();
    await writing;
    assert.equal(await probing, 'probe');
  });
});
