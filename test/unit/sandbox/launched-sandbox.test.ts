import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { LaunchedSandbox } from '../../../src/sandbox/bubblewrap/launched-sandbox.js';
import { forkWhenQuiet } from '../../../src/sandbox/host/fork-gate.js';
import { HostWorkDir } from '../../../src/sandbox/host/host-work-dir.js';
import type { AttachedNetwork } from '../../../src/sandbox/host/netns-helpers.js';
import { SandboxUnavailableError } from '../../../src/sandbox/types.js';

/**
 * A network whose helper (pasta) is killed with the sandbox, as NetnsHelpers.stop() kills it:
 * connect() lets the launcher die (it waits for `go`), then fails the way pasta's end reads.
 */
class HelperKilledWithTheSandbox implements AttachedNetwork {
  private killed!: () => void;
  private readonly stopped = new Promise<void>((resolve) => (this.killed = resolve));

  constructor(private readonly go: string) {}

  attach(): void {}

  async connect(): Promise<void> {
    writeFileSync(this.go, '');
    await this.stopped;
    throw new Error("pasta exited (killed) before the job's network was up: no message");
  }

  stop(): void {
    this.killed();
  }

  setIdle(): void {}
}

describe('a launched sandbox', () => {
  it('that dies while its network is set up reports its own words, not its killed helper\'s (CI: "pasta exited ... no message")', async () => {
    const jobDir = mkdtempSync(join(tmpdir(), 'launched-'));
    const go = join(jobDir, 'go');
    // Stands in for bwrap failing after it reported the sandbox, as under a host's process limit.
    const launcher = `until [ -e ${go} ]; do sleep 0.01; done; echo 'bwrap: Creating new namespace failed: Resource temporarily unavailable' >&2; exit 1`;
    let finished!: () => void;
    const cleanedUp = new Promise<void>((resolve) => (finished = resolve));
    const sandbox = await forkWhenQuiet(
      () =>
        new LaunchedSandbox({
          argv: ['/bin/sh', '-c', launcher],
          bwrapOptions: [],
          seccompFile: null,
          uid: null,
          userMap: null,
          execRules: null,
          network: new HelperKilledWithTheSandbox(go),
          cgroup: null,
          jobDir,
          stagedFiles: new Map(),
          workDir: null,
          files: new HostWorkDir(null, null, null),
          releaseWorkDir: null,
          onFinished: finished,
        }),
    );
    const ignore = { write: () => undefined };
    await assert.rejects(
      sandbox.start({ timeoutMs: 10_000, stdout: ignore, stderr: ignore }),
      (error: Error) => error instanceof SandboxUnavailableError && /exited during setup \(exit 1\): bwrap: Creating new namespace failed/.test(error.message),
    );
    sandbox.release();
    await cleanedUp;
    assert.equal(existsSync(jobDir), false, 'cleaned up after itself');
  });
});
