import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { LaunchedSandbox, type LaunchParts } from '../../../src/isolation/bubblewrap/launched-sandbox.js';
import { forkWhenQuiet } from '../../../src/util/fork-gate.js';
import { HostWorkDir } from '../../../src/isolation/host/host-work-dir.js';
import type { AttachedNetwork } from '../../../src/isolation/host/netns-helpers.js';
import { SandboxUnavailableError } from '../../../src/isolation/types.js';

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

/** A sandbox whose launcher is `script` (standing in for bwrap), and the promise of its cleanup. */
async function launch(script: string, parts: Partial<LaunchParts> = {}): Promise<{ sandbox: LaunchedSandbox; jobDir: string; cleanedUp: Promise<void> }> {
  const jobDir = mkdtempSync(join(tmpdir(), 'launched-'));
  let finished!: () => void;
  const cleanedUp = new Promise<void>((resolve) => (finished = resolve));
  const sandbox = await forkWhenQuiet(
    () =>
      new LaunchedSandbox({
        argv: ['/bin/sh', '-c', script],
        bwrapOptions: [],
        seccompFile: null,
        uid: null,
        userMap: null,
        userIds: null,
        execRules: null,
        network: null,
        cgroup: null,
        jobDir,
        stagedFiles: new Map(),
        workDir: null,
        files: new HostWorkDir(null, null, null),
        releaseWorkDir: null,
        disk: null,
        onFinished: finished,
        ...parts,
      }),
  );
  return { sandbox, jobDir, cleanedUp };
}

/** Output kept as text. */
function textSink(): { write(chunk: Buffer): void; text(): string } {
  const chunks: Buffer[] = [];
  return { write: (chunk) => void chunks.push(chunk), text: () => Buffer.concat(chunks).toString('utf8') };
}

describe('a launched sandbox', () => {
  it('that dies while its network is set up reports its own words, not its killed helper\'s (CI: "pasta exited ... no message")', async () => {
    const go = join(tmpdir(), `launched-go-${process.pid}`);
    // Stands in for bwrap failing after it reported the sandbox, as under a host's process limit.
    const launcher = `until [ -e ${go} ]; do sleep 0.01; done; rm ${go}; echo 'bwrap: Creating new namespace failed: Resource temporarily unavailable' >&2; exit 1`;
    const { sandbox, jobDir, cleanedUp } = await launch(launcher, { network: new HelperKilledWithTheSandbox(go) });
    const ignore = { write: () => undefined };
    await assert.rejects(
      sandbox.start({ timeoutMs: 10_000, stdout: ignore, stderr: ignore }),
      (error: Error) => error instanceof SandboxUnavailableError && /exited during setup \(exit 1\): bwrap: Creating new namespace failed/.test(error.message),
    );
    sandbox.release();
    await cleanedUp;
    assert.equal(existsSync(jobDir), false, 'cleaned up after itself');
  });

  // bwrap's status: the pid once the sandbox is made, an exit code only for a program it ran.
  const released = 'head -c 2 <&3 >/dev/null; printf \'{ "child-pid": 5 }\\n\' >&8';

  it("whose bwrap dies in its setup after the job was released is unavailable with bwrap's words, not the job exiting 1 (CI: loopback)", async () => {
    const { sandbox, cleanedUp } = await launch(`${released}; echo 'bwrap: loopback: Failed RTM_NEWADDR: No child processes' >&2; exit 1`, { bwrapStatus: true });
    const stderr = textSink();
    await assert.rejects(
      sandbox.start({ timeoutMs: 10_000, stdout: textSink(), stderr }),
      (error: Error) => error instanceof SandboxUnavailableError && /exited during setup \(exit 1\): bwrap: loopback: Failed RTM_NEWADDR/.test(error.message),
    );
    sandbox.release();
    await cleanedUp;
  });

  it("whose job ran and exited 1 reports the job's exit", async () => {
    const { sandbox, cleanedUp } = await launch(`${released}; echo 'the job says no' >&2; printf '{ "exit-code": 1 }\\n' >&8; exit 1`, { bwrapStatus: true });
    const stderr = textSink();
    const outcome = await sandbox.start({ timeoutMs: 10_000, stdout: textSink(), stderr });
    assert.deepEqual([outcome.exitCode, stderr.text()], [1, 'the job says no\n']);
    sandbox.release();
    await cleanedUp;
  });

  it('refused a fork while it waited for a job (started ahead) has its uids set aside all the same', async () => {
    let setAside = 0;
    let idleDeath!: () => void;
    const died = new Promise<void>((resolve) => (idleDeath = resolve));
    const { cleanedUp } = await launch(`echo "bwrap: Can't fork for pid 1: Resource temporarily unavailable" >&2; exit 1`, {
      bwrapStatus: true,
      onForkRefused: () => void (setAside += 1),
      onIdleDeath: idleDeath,
    });
    // An idle sandbox holds no event loop open (a CLI's warm pool must not): this test does.
    const open = setInterval(() => undefined, 1000);
    try {
      await died;
      await cleanedUp;
    } finally {
      clearInterval(open);
    }
    assert.equal(setAside, 1);
  });

  it('refused a fork (EAGAIN) in its setup, says what else runs as its uid, which RLIMIT_NPROC counts, and has its uids set aside', async () => {
    const uid = 64_993;
    const other = spawn('/usr/bin/sleep', ['60'], { uid, gid: uid, stdio: 'ignore' });
    await new Promise((resolve) => other.once('spawn', resolve));
    try {
      let setAside = 0;
      const { sandbox, cleanedUp } = await launch(`${released}; echo "bwrap: Can't fork for pid 1: Resource temporarily unavailable" >&2; exit 1`, {
        bwrapStatus: true,
        uid,
        onForkRefused: () => void (setAside += 1),
      });
      const said = new RegExp(
        `Resource temporarily unavailable \\[uid ${uid}: 1 other processes, 1 threads \\(${other.pid} sleep S of ${process.pid}\\); the host runs \\d+ tasks of threads-max \\d+\\]$`,
      );
      await assert.rejects(sandbox.start({ timeoutMs: 10_000, stdout: textSink(), stderr: textSink() }), said);
      assert.equal(setAside, 1);
      sandbox.release();
      await cleanedUp;
    } finally {
      other.kill('SIGKILL');
    }
  });
});
