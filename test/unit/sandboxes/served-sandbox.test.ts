import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import { CappedCapture } from '../../../src/isolation/output-capture.js';
import { UNCOUNTED } from '../../../src/isolation/host/cgroups.js';
import type { PreparedSandbox, SandboxOutcome } from '../../../src/isolation/types.js';
import { ServedSandbox } from '../../../src/sandboxes/served-sandbox.js';

const BY = { program: 'its agent', timedOut: 'timed out', aborted: 'killed', outOfMemory: 'out of memory' };

/** A prepared sandbox whose one job ends when the test says (exit), as a checkpoint ends it. */
function fakePrepared(): { prepared: PreparedSandbox; exit(code: number): void } {
  let exit!: (outcome: SandboxOutcome) => void;
  const outcome = new Promise<SandboxOutcome>((resolve) => (exit = resolve));
  const prepared = { start: () => outcome, release: async () => undefined } as unknown as PreparedSandbox;
  return {
    prepared,
    exit: (code) => exit({ exitCode: code, signal: null, timedOut: false, aborted: false, oomKilled: false, usage: UNCOUNTED, durationMs: 1 }),
  };
}

function served(): { sandbox: ServedSandbox; reasons: string[] } {
  const reasons: string[] = [];
  const channel = { stdin: new PassThrough(), stdout: { write: () => undefined }, stderr: new CappedCapture(1024), lose: () => undefined };
  return { sandbox: new ServedSandbox(channel, BY, (reason) => void reasons.push(reason)), reasons };
}

describe('a served sandbox suspended by a checkpoint', () => {
  it('ends "paused" when the checkpoint ends its program, not "its agent exited (exit 0)"', async () => {
    const { sandbox, reasons } = served();
    const job = fakePrepared();
    sandbox.serve(job.prepared, 60_000);
    await sandbox.suspend('paused', async () => job.exit(0));
    assert.equal(sandbox.running, false);
    assert.deepEqual(reasons, ['paused']);
  });

  it('runs on as it was when the checkpoint fails', async () => {
    const { sandbox, reasons } = served();
    const job = fakePrepared();
    sandbox.serve(job.prepared, 60_000);
    await assert.rejects(
      sandbox.suspend('paused', async () => {
        throw new Error('runsc could not checkpoint the sandbox');
      }),
      /could not checkpoint/,
    );
    assert.equal(sandbox.running, true);
    assert.deepEqual(reasons, []);
    // Its program ending later is an end like any other.
    job.exit(3);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(reasons, ['its agent exited (exit 3)']);
  });

  it('says both when its program ended while the checkpoint failed', async () => {
    const { sandbox, reasons } = served();
    const job = fakePrepared();
    sandbox.serve(job.prepared, 60_000);
    await assert.rejects(
      sandbox.suspend('paused', async () => {
        job.exit(1);
        await new Promise((resolve) => setImmediate(resolve));
        throw new Error('the checkpoint was cut short');
      }),
    );
    assert.equal(sandbox.running, false);
    assert.deepEqual(reasons, ['its agent exited (exit 1), while it was being paused: the checkpoint was cut short']);
  });
});
