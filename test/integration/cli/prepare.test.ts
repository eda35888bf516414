import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Value } from '@sinclair/typebox/value';
import { PreparationReportSchema, type BackendPreparation } from '../../../src/contract/backend.js';
import { processEnv } from '../../helpers/runtime.js';

const CLI = fileURLToPath(new URL('../../../dist/cli/agent-runner.js', import.meta.url));
/** A guest image build and a snapshot's TCG boot on a loaded 2-core machine; only a bound on a hang. */
const PREPARE_BOUND_MS = 15 * 60_000;

interface Prepared {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `agent-runner prepare` as a user runs it, on the state dir and microVM cache given; killed (SIGKILL) past the bound. */
function prepare(args: string[], env: NodeJS.ProcessEnv): Promise<Prepared> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, 'prepare', ...args],
      { env: processEnv(env), timeout: PREPARE_BOUND_MS, killSignal: 'SIGKILL', maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? null) : 0, stdout, stderr }),
    );
  });
}

/** The microVM cache's whole entries (an image, its accelerator, a snapshot) with the time each was made. */
function cacheEntries(cacheDir: string): Map<string, number> {
  const entries = new Map<string, number>();
  for (const dir of ['images', 'snapshots']) {
    for (const name of existsSync(join(cacheDir, dir)) ? readdirSync(join(cacheDir, dir)) : []) {
      const path = join(cacheDir, dir, name);
      const marker = existsSync(join(path, 'complete')) ? join(path, 'complete') : path;
      if (!name.endsWith('.users')) entries.set(`${dir}/${name}`, statSync(marker).mtimeMs);
    }
  }
  return entries;
}

describe('agent-runner prepare', () => {
  const stateDir = mkdtempSync(join(tmpdir(), 'prepare-'));
  chmodSync(stateDir, 0o755);
  after(() => rmSync(stateDir, { recursive: true, force: true }));
  const cacheDir = join(stateDir, 'microvm-cache');
  // The warm snapshot (40 s of a VM under emulation) is left out of the empty cache's build:
  // `npm test`'s own preparation takes it in the suite's cache (test/prepare-suite.ts), which
  // the last test checks.
  const env = { AGENT_RUNNER_STATE_DIR: stateDir, AGENT_RUNNER_BACKENDS__MICROVM__CACHE_DIR: cacheDir, AGENT_RUNNER_BACKENDS__MICROVM__WARM_POOL_SIZE: '0' };

  it('builds what a first job would on an empty cache, then only checks it, saying each step on stderr and each kind on stdout', { timeout: 2 * PREPARE_BOUND_MS }, async () => {
    const first = await prepare(['--kinds', 'local_process,microvm'], env);
    assert.equal(first.code, 0, first.stderr);
    const report = JSON.parse(first.stdout) as BackendPreparation[];
    assert.ok(Value.Check(PreparationReportSchema, report), first.stdout);
    assert.deepEqual(
      report.map((kind) => kind.kind),
      ['local_process', 'microvm'],
    );
    assert.equal(report[0]!.state, 'ready', first.stdout);
    for (const step of ['local_process: host probe', 'microvm: guest image', 'microvm: accelerator probe']) {
      assert.match(first.stderr, new RegExp(`^agent-runner prepare: ${step} \\.\\.\\.$`, 'm'));
      assert.match(first.stderr, new RegExp(`^agent-runner prepare: ${step} done in \\d+\\.\\d s$`, 'm'));
    }
    const microvm = report[1]!;
    // Where QEMU is missing the kind says why, and prepare still succeeds; this host has it (scripts/setup-host.sh).
    assert.equal(microvm.state, 'ready', first.stdout);
    assert.doesNotMatch(first.stderr, /warm snapshot/, 'no warm pool, no snapshot');
    const built = cacheEntries(cacheDir);
    const image = [...built.keys()].find((name) => /^images\/[0-9a-f]{24}$/.test(name));
    assert.ok(image, `no whole image in ${[...built.keys()].join(', ')}`);
    const id = image.slice('images/'.length);
    assert.ok(built.has(`images/${id}.accel.json`), 'the accelerator probe is remembered beside the image');

    const second = await prepare(['--kinds', 'local_process,microvm'], env);
    assert.equal(second.code, 0, second.stderr);
    const again = JSON.parse(second.stdout) as BackendPreparation[];
    assert.ok(Value.Check(PreparationReportSchema, again), second.stdout);
    assert.deepEqual(
      again.map((kind) => kind.state),
      ['ready', 'ready'],
    );
    assert.deepEqual(cacheEntries(cacheDir), built, 'the second run built nothing: every entry is the one the first made');
  });

  it(
    "the suite's cache, prepared before the tests, holds the warm snapshot of the configured VM shape, and a run keeps it as it is",
    { timeout: 2 * PREPARE_BOUND_MS },
    async () => {
      const suiteCache = process.env.AGENT_RUNNER_BACKENDS__MICROVM__CACHE_DIR!;
      const checked = await prepare(['--kinds', 'microvm'], {});
      assert.equal(checked.code, 0, checked.stderr);
      assert.match(checked.stderr, /^agent-runner prepare: microvm: warm snapshot done in /m);
      const entries = cacheEntries(suiteCache);
      const snapshot = [...entries.keys()].find((name) => /^snapshots\/[0-9a-f]{24}-1024m-1cpu-[a-z]+$/.test(name));
      assert.ok(snapshot, `no whole snapshot of the configured shape in ${[...entries.keys()].join(', ')}`);
      const again = await prepare(['--kinds', 'microvm'], {});
      assert.equal(again.code, 0, again.stderr);
      assert.equal(cacheEntries(suiteCache).get(snapshot), entries.get(snapshot), 'the snapshot was not taken again');
    },
  );

  it('refuses a kind it does not know, naming the known ones', async () => {
    const refused = await prepare(['--kinds', 'local_process,qemu'], env);
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /unknown backend kind "qemu"; known kinds: local_process, gvisor, microvm/);
    assert.equal(refused.stdout, '');
  });
});
