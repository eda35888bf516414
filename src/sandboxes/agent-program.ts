import { guestProgram } from '../util/guest-program.js';

/** The agent's source (sandbox-agent.py), read once when a sandbox first starts one. */
export const sandboxAgentSource = guestProgram(new URL('./sandbox-agent.py', import.meta.url));

/**
 * The agent's command line inside a sandbox: the system's python, isolated (-I: no user site,
 * no PYTHON* variables, no script directory on the path) and without site-packages (-S), so
 * nothing the sandbox's code installed or set is imported into it; the source travels on the
 * command line, so the sandbox needs no file of it. `rootInside`: the sandbox was asked for root
 * inside (SandboxTemplate.rootInside); the agent acts as root only if it is also uid 0 there.
 */
export function sandboxAgentArgv(python = '/usr/bin/python3', options: { rootInside?: boolean } = {}): string[] {
  return [python, '-I', '-S', '-c', sandboxAgentSource(), ...(options.rootInside ? ['root-inside'] : [])];
}
