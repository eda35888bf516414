/**
 * agent-exec overhead: `agent-exec run --no-wait -- true` followed by `agent-exec wait ID`
 * (two CLI processes, a supervisor, and bwrap for the workspace sandbox) against spawning
 * `true` directly, in one run. Two bare `node -e 0` starts are shown as well: the floor any
 * pair of Node CLI calls pays, whatever they do.
 *   npm run build && node --import tsx bench/agent-exec.bench.ts [--iterations N]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { formatMs, median, percentile, timeRuns } from './stats.js';

const iterations = Number(process.argv[process.argv.indexOf('--iterations') + 1]) || 20;
const CLI = fileURLToPath(new URL('../dist/cli/agent-exec.js', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'agent-exec-bench-'));
const cwd = mkdtempSync(join(tmpdir(), 'agent-exec-bench-cwd-'));

function spawnChecked(file: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { env: { ...process.env, AGENT_EXEC_ROOT: root }, stdio: ['ignore', 'pipe', 'inherit'] });
    const out: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(Buffer.concat(out).toString('utf8')) : reject(new Error(`${file} ${args.join(' ')} exited ${code}`))));
  });
}

async function runAndWait(sandbox: 'none' | 'workspace'): Promise<void> {
  const run = JSON.parse(await spawnChecked(process.execPath, [CLI, 'run', '--no-wait', '--sandbox', sandbox, '--cwd', cwd, '--', 'true'])) as { job_id: string };
  const wait = JSON.parse(await spawnChecked(process.execPath, [CLI, 'wait', run.job_id, '--until', '30'])) as { state: string; exit_code: number };
  if (wait.state !== 'exited' || wait.exit_code !== 0) throw new Error(`job ${run.job_id} ended ${wait.state} ${wait.exit_code}`);
}

const cases: Array<[string, () => Promise<unknown>]> = [
  ['true, spawned directly', () => spawnChecked('/usr/bin/true', [])],
  [
    'node -e 0, twice',
    async () => {
      await spawnChecked(process.execPath, ['-e', '0']);
      await spawnChecked(process.execPath, ['-e', '0']);
    },
  ],
  ['agent-exec run+wait, --sandbox none', () => runAndWait('none')],
  ['agent-exec run+wait, --sandbox workspace', () => runAndWait('workspace')],
];

console.log(`agent-exec overhead, ${iterations} sequential runs each (median / p90)`);
console.log('case                                        median / p90                ratio to bare true');
let bare = 0;
try {
  for (const [name, run] of cases) {
    const samples = await timeRuns(iterations, 2, run);
    bare ||= median(samples);
    console.log(`${name.padEnd(44)}${`${formatMs(median(samples))} / ${formatMs(percentile(samples, 90))}`.padEnd(28)}${(median(samples) / bare).toFixed(1)}x`);
  }
} finally {
  rmSync(root, { recursive: true, force: true });
  rmSync(cwd, { recursive: true, force: true });
}
