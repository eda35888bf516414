import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { jobDirs, ok } from '../../helpers/agent-exec.js';
import { runCli } from '../../helpers/cli.js';
import { api, startServer, waitTerminal, type ServerProcess } from '../../helpers/server.js';

/**
 * Issue 25: a job failed with `bwrap: Creating new namespace failed: Resource temporarily
 * unavailable` while other agent-runner processes ran. The cause: taking over a dead process's
 * uid claim (unlink the shared lock file, create it again) let two processes that read the same
 * dead holder both win the uid, so two jobs ran as one uid and each one's processes counted
 * against the other's RLIMIT_NPROC (bwrap's clone fails EAGAIN past it).
 */

const POOL = fileURLToPath(new URL('../../../dist/isolation/host/uid-pool.js', import.meta.url));
const BASE = 70_100;
const SIZE = 48;
const CLAIMANTS = 4;
const EACH = 8;

/** A process that claims `EACH` uids at once with the others, reports them, and holds them until its stdin ends. */
function claimant(lockDir: string, children: ChildProcess[]): Promise<Array<number | null>> {
  const script = `const { UidPool } = await import(${JSON.stringify(POOL)}); const pool = new UidPool(${BASE}, ${SIZE}, ${JSON.stringify(lockDir)}); const uids = []; for (let i = 0; i < ${EACH}; i++) uids.push(pool.tryAcquire() ?? null); console.log(JSON.stringify(uids)); process.stdin.resume();`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['pipe', 'pipe', 'pipe'] });
  children.push(child);
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.stdout.once('data', (chunk: Buffer) => resolve(JSON.parse(chunk.toString()) as Array<number | null>));
    child.once('exit', (code) => reject(new Error(`a claimant exited (${code}) before it reported: ${stderr}`)));
  });
}

async function endAll(children: ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(
      (child) =>
        new Promise<void>((done) => {
          if (child.exitCode !== null || child.signalCode !== null) return done();
          child.once('exit', () => done());
          child.kill('SIGKILL');
        }),
    ),
  );
}

describe('several agent-runner processes on one host', () => {
  it("never hold one uid twice, when they take over dead processes' claims at the same time", async () => {
    // Repeated: the old takeover lost a round in five to eight here.
    for (let round = 0; round < 8; round += 1) {
      const lockDir = mkdtempSync(join(tmpdir(), 'uid-locks-'));
      // Claims of processes long gone, in both the old shared-file form and the per-process one.
      for (let uid = BASE; uid < BASE + SIZE; uid += 1) {
        writeFileSync(join(lockDir, String(uid)), '999999999 1');
        writeFileSync(join(lockDir, `${uid}.999999998.1`), '');
      }
      const children: ChildProcess[] = [];
      try {
        const claims = await Promise.all(Array.from({ length: CLAIMANTS }, () => claimant(lockDir, children)));
        // The range has room for all: a claimant that stepped back from a contested uid took another.
        for (const uids of claims) assert.ok(!uids.includes(null), `round ${round}: a claimant got fewer uids than it asked for: ${JSON.stringify(claims)}`);
        const held = claims.flat();
        const twice = held.filter((uid, index) => held.indexOf(uid) !== index);
        assert.deepEqual(twice, [], `round ${round}: uids held by two live processes at once`);
      } finally {
        await endAll(children);
        rmSync(lockDir, { recursive: true, force: true });
      }
    }
  });

  describe('run their jobs side by side', () => {
    let server: ServerProcess;
    before(async () => {
      server = await startServer(['--concurrency', '3']);
    });
    after(() => server?.stop());
    const { root, cwd } = jobDirs('shared-host');

    it('a service, CLIs and agent-exec jobs at once: every job succeeds', async () => {
      const serviceJobs = Array.from({ length: 6 }, async (_, index) => {
        const submitted = await api(server.url, 'POST', '/v1/jobs', { command: { argv: ['echo', `service-${index}`] } });
        assert.equal(submitted.status, 202, submitted.text);
        const state = await waitTerminal(server.url, submitted.json.job_id);
        assert.equal(state.status, 'completed', JSON.stringify(state));
        assert.equal(state.result.stdout.text, `service-${index}\n`);
      });
      const cliRuns = Array.from({ length: 3 }, async (_, loop) => {
        for (let index = 0; index < 4; index += 1) {
          const run = await runCli('agent-runner', ['exec', '--lang', 'python', '--code', `print("cli-${loop}-${index}")`]);
          assert.equal(run.code, 0, run.stdout + run.stderr);
          assert.equal(JSON.parse(run.stdout).stdout, `cli-${loop}-${index}\n`, run.stdout + run.stderr);
        }
      });
      const agentExecJobs = Array.from({ length: 3 }, async (_, index) => {
        const response = await ok(root, ['run', '--cwd', cwd, '--until', '60', '--', 'sh', '-c', `for n in 1 2 3 4; do sleep 0.2 & done; wait; echo exec-${index}`]);
        assert.equal(response.state, 'exited', JSON.stringify(response));
        assert.equal(response.exit_code, 0, JSON.stringify(response));
        assert.equal(response.stdout, `exec-${index}\n`);
      });
      await Promise.all([...serviceJobs, ...cliRuns, ...agentExecJobs]);
    });
  });
});
