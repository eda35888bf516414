/**
 * CLI start-up: `agent-exec status|tail|list` and `agent-runner --help`, each a fresh Node
 * process as an agent runs it, against a bare `node -e 0` in the same run and under the same
 * environment (NODE_EXTRA_CA_CERTS, say, costs every start, the bare one included). The cases
 * take turns, one run of each per round, so that load from other tenants of the machine falls
 * on all alike. The executables are the package's bins (package.json "bin" under --root, this
 * checkout by default); --compare DIR adds the same commands run by another build's bins (an
 * older commit's, say) to the same rounds. A last row runs agent-exec's bin from a copy without
 * its V8 code cache: what a Node other than the one that built the package gets.
 *   npm run build && node --import tsx bench/cli.bench.ts [--iterations N] [--root DIR] [--compare DIR]
 */
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { formatMs, median, percentile } from './stats.js';

const option = (name: string) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : undefined);
const iterations = Number(option('--iterations')) || 40;
const root = resolve(option('--root') ?? fileURLToPath(new URL('..', import.meta.url)));
const compare = option('--compare') === undefined ? null : resolve(option('--compare')!);
const binsOf = (dir: string) => {
  const { bin } = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { bin: Record<string, string> };
  return { agentExec: join(dir, bin['agent-exec']!), agentRunner: join(dir, bin['agent-runner']!) };
};
const { agentExec: AGENT_EXEC, agentRunner: AGENT_RUNNER } = binsOf(root);

const jobsRoot = mkdtempSync(join(tmpdir(), 'cli-bench-jobs-'));
const cwd = mkdtempSync(join(tmpdir(), 'cli-bench-cwd-'));
const ENV = { ...process.env, AGENT_EXEC_ROOT: jobsRoot };

function spawnChecked(args: string[]): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, args, { env: ENV, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolvePromise(Buffer.concat(out).toString('utf8')) : reject(new Error(`node ${args.join(' ')} exited ${code}: ${Buffer.concat(err).toString('utf8')}`)),
    );
  });
}

/** A copy of agent-exec's bin and bundle without the code cache beside them (null when the bin is not the cached loader). */
function withoutCodeCache(): string | null {
  const bundle = AGENT_EXEC.replace(/\.cjs$/, '.bundle.cjs');
  if (bundle === AGENT_EXEC || !existsSync(bundle)) return null;
  const dir = mkdtempSync(join(tmpdir(), 'cli-bench-nocache-'));
  for (const file of [AGENT_EXEC, bundle]) copyFileSync(file, join(dir, file.slice(dirname(file).length + 1)));
  return join(dir, AGENT_EXEC.slice(dirname(AGENT_EXEC).length + 1));
}

// Jobs to look at: five that printed a few thousand lines each.
let jobId = '';
for (let i = 0; i < 5; i++) {
  const run = JSON.parse(await spawnChecked([AGENT_EXEC, 'run', '--sandbox', 'none', '--cwd', cwd, '--', 'seq', '1', '5000'])) as { job_id: string; state: string };
  if (run.state !== 'exited') throw new Error(`job ${run.job_id} is ${run.state}`);
  jobId = run.job_id;
}
const uncached = withoutCodeCache();

const commands = (bins: { agentExec: string; agentRunner: string }, label: string): Array<[string, string[]]> => [
  [`agent-exec status ID${label}`, [bins.agentExec, 'status', jobId]],
  [`agent-exec tail ID${label}`, [bins.agentExec, 'tail', jobId]],
  [`agent-exec list (5 jobs)${label}`, [bins.agentExec, 'list']],
  [`agent-runner --help${label}`, [bins.agentRunner, '--help']],
];
const cases: Array<[string, string[]]> = [
  ['node -e 0', ['-e', '0']],
  ...commands({ agentExec: AGENT_EXEC, agentRunner: AGENT_RUNNER }, ''),
  ...(uncached ? [['agent-exec status ID, no code cache', [uncached, 'status', jobId]] as [string, string[]]] : []),
  ...(compare ? commands(binsOf(compare), ', --compare') : []),
];

try {
  const samples = cases.map(() => [] as number[]);
  for (let round = -3; round < iterations; round++) {
    for (const [index, [, args]] of cases.entries()) {
      const started = performance.now();
      await spawnChecked(args);
      if (round >= 0) samples[index]!.push(performance.now() - started);
    }
  }
  console.log(`CLI start-up, ${iterations} rounds of one run each (p50 / p90), ${root}${compare ? `; --compare: ${compare}` : ''}`);
  console.log('case                                   p50 / p90                   p50 ratio to node -e 0');
  const bare = median(samples[0]!);
  for (const [index, [name]] of cases.entries()) {
    const p50 = median(samples[index]!);
    console.log(`${name.padEnd(39)}${`${formatMs(p50)} / ${formatMs(percentile(samples[index]!, 90))}`.padEnd(28)}${(p50 / bare).toFixed(2)}x`);
  }
} finally {
  rmSync(jobsRoot, { recursive: true, force: true });
  rmSync(cwd, { recursive: true, force: true });
  if (uncached) rmSync(dirname(uncached), { recursive: true, force: true });
}
