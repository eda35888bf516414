import { fileURLToPath } from 'node:url';

/**
 * The sandbox's agent (src/sandboxes/agent/, Go): a static program with no dependency on the
 * sandbox's root, so the same file serves the host's system, any image (with or without python,
 * bash or glibc) and the microVM's guest. Built by `npm run build` (scripts/build-agent.sh) into
 * dist/sandboxes/, which is two levels up from src/sandboxes/ and from dist/sandboxes/ alike.
 */
export function sandboxAgentProgram(): string {
  return fileURLToPath(new URL('../../dist/sandboxes/sandbox-agent', import.meta.url));
}

/**
 * The agent's command line: `path` is where the sandbox sees the program. `rootInside`: the
 * sandbox was asked for root inside (SandboxTemplate.rootInside); the agent acts as root only if
 * it is also uid 0 there.
 */
export function sandboxAgentArgv(options: { path?: string; rootInside?: boolean } = {}): string[] {
  return [options.path ?? sandboxAgentProgram(), ...(options.rootInside ? ['root-inside'] : [])];
}
