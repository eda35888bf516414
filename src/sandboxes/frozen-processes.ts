import type { SandboxAgentPort } from './agent-port.js';

const SIGCONT = 18;
const SIGSTOP = 19;

/**
 * Runs `work` with every process the sandbox's agent started stopped (SIGSTOP to each one's
 * process group, what it started included), so what `work` reads of the sandbox (its files) is
 * of one instant. They go on after when `thaw`, and always when `work` fails: a failed pause
 * leaves the sandbox as it was.
 */
export async function frozen<T>(agent: SandboxAgentPort, thaw: boolean, work: () => Promise<T>): Promise<T> {
  const { processes } = await agent.request({ op: 'list' });
  const signal = (signal: number) => signalAll(agent, processes, signal);
  await signal(SIGSTOP);
  let done = false;
  try {
    const result = await work();
    done = true;
    return result;
  } finally {
    if (thaw || !done) await signal(SIGCONT);
  }
}

/**
 * Lets processes the agent started go on: a sandbox restored from a pause that kept memory
 * comes back with them stopped, as frozen() left them for its files to be packed.
 */
export async function thaw(agent: SandboxAgentPort, processes: ReadonlyArray<{ pid: number }>): Promise<void> {
  await signalAll(agent, processes, SIGCONT);
}

function signalAll(agent: SandboxAgentPort, processes: ReadonlyArray<{ pid: number }>, signal: number): Promise<unknown> {
  // One that ended meanwhile is no failure.
  return Promise.all(processes.map(({ pid }) => agent.request({ op: 'signal', pid, signal }).catch(() => undefined)));
}
