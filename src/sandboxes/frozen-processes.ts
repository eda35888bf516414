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
  // One that ended meanwhile is no failure.
  const signal = (signal: number) => Promise.all(processes.map(({ pid }) => agent.request({ op: 'signal', pid, signal }).catch(() => undefined)));
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
