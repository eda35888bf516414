import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { signalGroup } from '../isolation/host/process-tree.js';
import type { JobDefinition } from './job-store.js';
import { statusResponse } from './job-status.js';
import type { JobView } from './job-view.js';

/** Where a job's end is told: --notify-url (POSTed to) and --notify-command (run by sh, reading it on stdin). */
export type NotifyTargets = NonNullable<JobDefinition['notify']>;

/** What keeps a dead endpoint or a stuck command from holding the supervisor forever. */
export interface NotifyBounds {
  /** POSTs at most, the first included. */
  attempts: number;
  /** The wait before the first retry, doubled before each next one. */
  firstRetryMs: number;
  attemptTimeoutMs: number;
  /** For all attempts and waits together. */
  totalMs: number;
  /** Then the command's whole process group is killed. */
  commandTimeoutMs: number;
}

export const NOTIFY_BOUNDS: NotifyBounds = { attempts: 5, firstRetryMs: 1000, attemptTimeoutMs: 10_000, totalMs: 60_000, commandTimeoutMs: 60_000 };

/** A refusal that a retry cannot change: the request itself is wrong for the endpoint. */
const retryable = (status: number) => status >= 500 || status === 408 || status === 429;

/**
 * Tells the targets once that the job has ended, with its final status (the JSON `status`
 * prints), both at once; each says how it went, for the supervisor's log.
 */
export async function notifyEnd(view: JobView, targets: NotifyTargets, bounds: NotifyBounds = NOTIFY_BOUNDS): Promise<string[]> {
  const body = JSON.stringify(await statusResponse(view));
  return Promise.all([
    ...(targets.url ? [postWithRetries(targets.url, body, bounds).then(({ detail }) => `--notify-url: ${detail}`)] : []),
    ...(targets.command ? [runCommand(targets.command, body, { timeoutMs: bounds.commandTimeoutMs }).then((detail) => `--notify-command: ${detail}`)] : []),
  ]);
}

/** POSTs `body` as JSON until a 2xx, retrying network errors, timeouts, 5xx, 408 and 429 with exponential backoff. */
export async function postWithRetries(url: string, body: string, bounds: NotifyBounds): Promise<{ delivered: boolean; attempts: number; detail: string }> {
  const deadline = Date.now() + bounds.totalMs;
  for (let attempt = 1; ; attempt++) {
    let failure: string;
    try {
      const signal = AbortSignal.timeout(Math.max(1, Math.min(bounds.attemptTimeoutMs, deadline - Date.now())));
      const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal });
      // Its body is not wanted: cancelling it frees the connection.
      await response.body?.cancel();
      if (response.ok) return { delivered: true, attempts: attempt, detail: `delivered (HTTP ${response.status}) on attempt ${attempt}` };
      failure = `HTTP ${response.status}`;
      if (!retryable(response.status)) return { delivered: false, attempts: attempt, detail: `refused (${failure}) on attempt ${attempt}, not retried` };
    } catch (error) {
      // fetch says only "fetch failed"; why (ECONNREFUSED, a bad certificate...) is its cause.
      const { message, cause } = error as Error & { cause?: Error };
      failure = cause?.message ? `${message}: ${cause.message}` : message;
    }
    const wait = bounds.firstRetryMs * 2 ** (attempt - 1);
    if (attempt >= bounds.attempts || Date.now() + wait >= deadline) return { delivered: false, attempts: attempt, detail: `not delivered after ${attempt} attempts: ${failure}` };
    await sleep(wait);
  }
}

/**
 * Runs the caller's command line with `input` on its stdin, outside any sandbox (it is the
 * caller's, not the job's), in its own process group so a timeout takes down all it started.
 * It runs in a fresh private directory (0700, removed afterwards), never in the job's cwd: a
 * job controls that tree, and a relative path there could be a link it planted to a file only
 * the caller may write, or a repository whose `core.fsmonitor` a `git status` would run.
 * Its output goes to the supervisor's log. Resolves when it exits, or is killed.
 */
export async function runCommand(command: string, input: string, options: { timeoutMs: number }): Promise<string> {
  let cwd: string;
  try {
    cwd = await mkdtemp(join(tmpdir(), 'agent-exec-notify-'));
  } catch (error) {
    return `could not start: no directory of its own: ${(error as Error).message}`;
  }
  try {
    return await runIn(cwd, command, input, options.timeoutMs);
  } finally {
    await rm(cwd, { recursive: true, force: true }).catch(() => undefined);
  }
}

/**
 * The supervisor's environment is the caller's (the CLI that launched or restarted the job);
 * only PWD and OLDPWD go, since they may name the job's cwd (the caller's shell was there).
 */
function hookEnvironment(inherited: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { PWD: _pwd, OLDPWD: _oldPwd, ...rest } = inherited;
  return rest;
}

function runIn(cwd: string, command: string, input: string, timeoutMs: number): Promise<string> {
  return new Promise((resolve) => {
    const child = spawn('/bin/sh', ['-c', command], { cwd, env: hookEnvironment(process.env), stdio: ['pipe', 2, 2], detached: true });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      signalGroup(child.pid!, 'SIGKILL');
    }, timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      resolve(`could not start: ${error.message}`);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve(timedOut ? `killed after ${timeoutMs} ms` : `exited with ${code ?? signal}`);
    });
    // A command that never reads its stdin closes it on us: no matter.
    child.stdin!.on('error', () => undefined);
    child.stdin!.end(input);
  });
}
