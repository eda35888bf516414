import assert from 'node:assert/strict';
import { after } from 'node:test';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { runCli } from './cli.js';
import { waitUntil } from './wait.js';
import { NOT_THE_SUBJECT_TIMEOUT_S } from './timeouts.js';
import { SUPERVISE_ARG } from '../../src/agent-exec/supervise-arg.js';

const SCHEMA = JSON.parse(readFileSync(new URL('../../schemas/agent-exec-response.schema.json', import.meta.url), 'utf8')) as object;
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

// ajv-formats is not installed: date-time is checked by hand, so timestamps are still validated.
const ajv = new Ajv({ strict: false, allErrors: true });
ajv.addFormat('date-time', (text: string) => RFC3339.test(text) && !Number.isNaN(Date.parse(text)));
const validate = ajv.compile(SCHEMA);

/** The response fields tests read; anything else stays reachable through the index signature. */
export interface Response {
  ok: boolean;
  type: string;
  job_id: string;
  state: string;
  exit_code: number | null;
  exit_signal: string | null;
  reason: string | null;
  error: { code: string; message: string; retryable: boolean };
  stdout: string;
  stderr: string;
  stdout_range: [number, number];
  stderr_range: [number, number];
  stdout_total_bytes: number;
  stderr_total_bytes: number;
  encoding: string;
  [field: string]: unknown;
}

export interface Answer {
  code: number | null;
  response: Response;
  stderr: string;
}

/**
 * The wait of a `run` (or `wait`, `restart`) whose subject is the job's end, not the wait: its
 * default `--until 10` is not the subject; a loaded CI machine needs room (a run once answered
 * while its job still ran, its stdout still '').
 */
export const UNTIL_IT_ENDS: readonly string[] = ['--until', String(NOT_THE_SUBJECT_TIMEOUT_S)];

/** Runs the built agent-exec and checks its answer against the contract. */
export async function agentExec(root: string, args: string[], options: { stdin?: string; env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<Answer> {
  const { code, stdout, stderr } = await runCli('agent-exec', args, { stdin: options.stdin, env: { AGENT_EXEC_ROOT: root, ...options.env } });
  return { code, response: checkResponse(args, stdout, stderr), stderr };
}

/** The contract itself: stdout is exactly one JSON object, valid against the shipped schema. */
export function checkResponse(args: readonly string[], stdout: string, stderr: string): Response {
  let response: Response;
  try {
    response = JSON.parse(stdout) as Response;
  } catch {
    throw new assert.AssertionError({ message: `stdout of agent-exec ${args.join(' ')} is not one JSON object:\n${stdout}\nstderr:\n${stderr}` });
  }
  assert.ok(validate(response), `agent-exec ${args.join(' ')} answered outside the schema: ${ajv.errorsText(validate.errors)}\n${stdout}`);
  return response;
}

/** agent-exec that must succeed. */
export async function ok(root: string, args: string[], options: Parameters<typeof agentExec>[2] = {}): Promise<Response> {
  const answer = await agentExec(root, args, options);
  assert.equal(answer.code, 0, `agent-exec ${args.join(' ')} failed: ${JSON.stringify(answer.response.error)}\n${answer.stderr}`);
  assert.equal(answer.response.ok, true);
  return answer.response;
}

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/**
 * Kills whatever a failed test left running in `root`, waits for the jobs' supervisors to end,
 * then removes it. A supervisor outlives its job's final record: its last act, the retention
 * pass, writes a stamp into the root (a removal under way met it: ENOTEMPTY).
 */
export async function disposeRoot(root: string): Promise<void> {
  const { response } = await agentExec(root, ['list', '--state', 'running']);
  for (const job of (response.jobs as Array<{ job_id: string }> | undefined) ?? []) await agentExec(root, ['kill', job.job_id, '--signal', 'KILL']);
  await waitUntil(() => supervisorsIn(root).length === 0, `the supervisors of the jobs in ${root} end`, { seen: () => supervisorsIn(root).join('\n') });
  removeDir(root);
}

/** The supervisors (pid and command line) of jobs under `root` that still run. */
function supervisorsIn(root: string): string[] {
  try {
    return execFileSync('pgrep', ['-af', '--', `${SUPERVISE_ARG} ${root}/`], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean);
  } catch {
    return [];
  }
}

/**
 * A job root and a cwd for one describe block, removed (and any job still running there
 * killed) after it. Call it inside the describe.
 */
export function jobDirs(prefix: string): { root: string; cwd: string } {
  const root = tempDir(`${prefix}-`);
  const cwd = tempDir(`${prefix}-cwd-`);
  after(async () => {
    await disposeRoot(root);
    removeDir(cwd);
  });
  return { root, cwd };
}

/** Job directories made by hand: ids with a shared prefix, a finished job, an unreadable one. */
export function rootWithFixtures(): string {
  const root = tempDir('agent-exec-fixtures-');
  cpSync(new URL('../fixtures/agent-exec/jobs', import.meta.url), join(root, 'jobs'), { recursive: true });
  return root;
}

/** Processes whose command line matches, as pgrep -f sees them (pgrep exits 1 for none). */
export function pgrep(pattern: string): string[] {
  try {
    return execFileSync('pgrep', ['-af', pattern], { encoding: 'utf8' })
      .trim()
      .split('\n')
      .filter((line) => !line.includes('pgrep'));
  } catch {
    return [];
  }
}
