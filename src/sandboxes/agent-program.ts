import { fileURLToPath } from 'node:url';
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

/**
 * The same agent as a static program (src/sandboxes/agent/, Go), for sandboxes whose image has
 * no python: built by `npm run build` (scripts/build-agent.sh) into dist/sandboxes/, which is
 * two levels up from src/sandboxes/ and from dist/sandboxes/ alike.
 */
export function sandboxAgentBinary(): string {
  return fileURLToPath(new URL('../../dist/sandboxes/sandbox-agent', import.meta.url));
}

/** The static agent's command line: `path` is where the sandbox sees the program; `rootInside` as for sandboxAgentArgv. */
export function sandboxAgentBinaryArgv(options: { path?: string; rootInside?: boolean } = {}): string[] {
  return [options.path ?? sandboxAgentBinary(), ...(options.rootInside ? ['root-inside'] : [])];
}
