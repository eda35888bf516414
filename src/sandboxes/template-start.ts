import { setTimeout as sleep } from 'node:timers/promises';
import { CodedError, contractError } from '../contract/errors.js';
import type { AGENT_USERS } from '../contract/sandbox-agent.js';
import type { TemplateStart } from '../contract/templates.js';
import type { SandboxAgentPort } from './agent-port.js';
import { runToEnd } from './sandbox-exec.js';

/** What a failed ready command said, at most. */
const KEPT_OUTPUT_BYTES = 2048;
/** Between two runs of a ready command that did not exit 0 (E2B's waitForPort and the like poll so). */
const READY_POLL_MS = 250;

export interface StartContext {
  sandboxId: string;
  agent: SandboxAgentPort;
  user: (typeof AGENT_USERS)[number];
  cwd: string | undefined;
  deadlineMs: number;
  /** Aborted when the sandbox ends under the wait. */
  ended: AbortSignal;
}

/**
 * A template's start command (E2B's setStartCmd), started in the background as a sandbox of it
 * starts, then its ready command (setReadyCmd) run until it exits 0, so that the create answers
 * with the template's server up. E2B runs both once, when it builds the template, and starts its
 * sandboxes from the memory captured after; here each sandbox runs them as it starts. Both run by
 * the image's bash as a login shell, as E2B's do, or by its /bin/sh where it has no bash.
 * Throws template.start_failed when the ready command has not exited 0 by the deadline.
 */
export async function runTemplateStart(start: TemplateStart, context: StartContext): Promise<void> {
  const { sandboxId, agent, user, cwd, ended } = context;
  const shell = await shellOf(agent);
  const at = cwd === undefined ? {} : { cwd };
  // Its output is nobody's: E2B keeps a start command's logs to itself too.
  await agent.start(
    { op: 'start', cmd: shell[0]!, args: [...shell.slice(1), start.command], envs: {}, stdin: false, user, ...at },
    { output: () => undefined, end: () => undefined },
  );
  if (start.ready === null) return;
  const deadline = performance.now() + context.deadlineMs;
  for (;;) {
    const left = Math.max(1, Math.round(deadline - performance.now()));
    const limits = { timeoutMs: left, maxStdoutBytes: KEPT_OUTPUT_BYTES, maxStderrBytes: KEPT_OUTPUT_BYTES };
    const checked = await runToEnd(sandboxId, agent, { argv: [...shell, start.ready], user, ...at }, limits, ended);
    if (checked.exit_code === 0) return;
    if (performance.now() >= deadline) {
      const said = `${checked.stdout}${checked.stderr}`.trim();
      throw new CodedError(
        contractError(
          'template.start_failed',
          `its template's ready command (${start.ready}) did not exit 0 within templates.readyTimeoutSeconds (${Math.round(context.deadlineMs / 1000)} s) of its start command (${start.command})${said ? `: ${said}` : ''}`,
          { exit_code: checked.exit_code },
        ),
      );
    }
    await sleep(READY_POLL_MS);
  }
}

const BASH = '/bin/bash';

async function shellOf(agent: SandboxAgentPort): Promise<string[]> {
  const bash = await agent.request({ op: 'stat', path: BASH, user: 'root' }).catch(() => null);
  return bash === null ? ['/bin/sh', '-c'] : [BASH, '-l', '-c'];
}
