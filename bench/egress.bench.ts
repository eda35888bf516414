/**
 * What a job's network costs it to start: a run job (python3 printing hello, no request made)
 * with no network, with pasta (`network: "allow"`), with the egress proxy and its relay
 * (`allow_domains`), and with a secret too (a per-job CA, a staged trust bundle), against the
 * bare `python3 -c` spawned in the same run.
 *   node --import tsx bench/egress.bench.ts [--iterations N]
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/runner/config.js';
import { runJob } from '../src/runner/run-job.js';
import { RunnerRuntime } from '../src/runner/runtime.js';
import { compareToBarePython } from './stats.js';

const iterations = Number(process.argv[process.argv.indexOf('--iterations') + 1]) || 20;
const runtime = new RunnerRuntime(loadConfig(process.env, { stateDir: join(tmpdir(), 'agent-runner-bench-state') }));

const domains = { allow_domains: ['api.example.org'] };
const SHAPES: Array<[string, Record<string, unknown>]> = [
  ['no network', {}],
  ['network: allow (pasta)', { policy: { allow_shell: true, network: 'allow' } }],
  ['allow_domains (proxy)', { policy: { allow_shell: true, network: domains } }],
  ['allow_domains + secret', { policy: { allow_shell: true, network: domains }, secrets: { TOKEN: { value: 'bench-secret', hosts: ['api.example.org'] } } }],
];

await compareToBarePython(
  'run job per network policy',
  iterations,
  SHAPES.map(([name, extra]) => [
    name,
    async () => {
      const result = await runJob({ command: { argv: ['python3', '-c', 'print("hello")'] }, policy: { allow_shell: true }, ...extra }, { runtime });
      if (result.status !== 'completed') throw new Error(`${name}: ${JSON.stringify(result.error)}`);
    },
  ]),
);
await runtime.dispose();
