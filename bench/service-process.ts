import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** The benches' state dir: image and toolchain caches kept from run to run. */
const stateDir = join(tmpdir(), 'agent-runner-bench-state');

export interface Service {
  url: string;
  token: string;
  child: ChildProcess;
}

/** `agent-runner serve` from the build, its default backend `kind`, its store under `scratch`; resolves with its URL once it listens. */
export async function startService(kind: string, scratch: string, env: NodeJS.ProcessEnv = {}): Promise<Service> {
  const token = randomBytes(16).toString('hex');
  const cli = fileURLToPath(new URL('../dist/cli/agent-runner.js', import.meta.url));
  const storeDir = mkdtempSync(join(scratch, 'store-'));
  const child = spawn(process.execPath, [cli, 'serve', '--addr', '127.0.0.1:0', '--token', token, '--store-dir', storeDir], {
    env: {
      ...process.env,
      AGENT_RUNNER_STATE_DIR: stateDir,
      AGENT_RUNNER_BACKENDS__DEFAULT: kind,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  for await (const line of createInterface({ input: child.stdout! })) {
    const entry = JSON.parse(line) as { msg?: string; url?: string };
    if (entry.msg === 'agent-runner serving' && entry.url) {
      // Keep draining its log so the service never blocks on a full pipe.
      child.stdout!.on('data', () => undefined);
      return { url: entry.url, token, child };
    }
  }
  throw new Error(`agent-runner serve (${kind}) exited before it listened`);
}

export async function stopService(service: Service): Promise<void> {
  const exited = new Promise((resolve) => service.child.once('exit', resolve));
  service.child.kill('SIGTERM');
  await exited;
}

/**
 * For each backend kind in turn: a service whose default backend it is, `measure` run against it
 * with the SDK's connection options, a failure printed (the next kind still runs), the service
 * stopped.
 */
export async function eachKind(
  kinds: readonly string[],
  scratch: string,
  env: NodeJS.ProcessEnv,
  measure: (options: { apiKey: string; apiUrl: string; sandboxUrl: string; requestTimeoutMs: number }) => Promise<void>,
): Promise<void> {
  for (const kind of kinds) {
    console.log(`${kind}:`);
    const service = await startService(kind, scratch, env);
    try {
      await measure({ apiKey: service.token, apiUrl: service.url, sandboxUrl: service.url, requestTimeoutMs: 120_000 });
    } catch (error) {
      console.log(`  failed: ${(error as Error).message}`);
    } finally {
      await stopService(service);
    }
  }
}
