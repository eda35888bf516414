/**
 * A run job (python3 running a script from a workspace) under each exec policy, against the
 * bare `python3 -c` spawned directly in the same run: what the exec guard, its Landlock rules
 * and the hidden shells cost per job.
 *   node --import tsx bench/run-policy.bench.ts [--iterations N]
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/runner/config.js';
import { runJob } from '../src/runner/run-job.js';
import { RunnerRuntime } from '../src/runner/runtime.js';
import { compareToBarePython } from './stats.js';

const iterations = Number(process.argv[process.argv.indexOf('--iterations') + 1]) || 20;
const runtime = new RunnerRuntime(loadConfig(process.env, { stateDir: join(tmpdir(), 'agent-runner-bench-state') }));
const workspace = mkdtempSync(join(tmpdir(), 'bench-policy-'));
writeFileSync(join(workspace, 'main.py'), 'print("hello")\n');

const POLICIES: Array<[string, Record<string, unknown>]> = [
  ['allow_shell (any)', { allow_shell: true }],
  ['no shells (default)', {}],
  ['allowed_commands', { allowed_commands: ['python3'] }],
];

await compareToBarePython(
  'run job per exec policy',
  iterations,
  POLICIES.map(([name, policy]) => [
    name,
    async () => {
      const result = await runJob({ workspace: { source: 'local_path', path: workspace }, command: { argv: ['python3', 'main.py'] }, policy }, { runtime });
      if (result.status !== 'completed') throw new Error(`${name}: ${JSON.stringify(result.error)}`);
    },
  ]),
);
await runtime.dispose();
