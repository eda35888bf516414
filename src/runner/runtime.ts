import { join } from 'node:path';
import { CompileCache } from '../languages/compile-cache.js';
import { ToolchainCache } from '../languages/catalog.js';
import { BubblewrapBackend } from '../isolation/bubblewrap/bubblewrap-backend.js';
import { GvisorBackend } from '../isolation/gvisor/gvisor-backend.js';
import { MicrovmBackend } from '../isolation/microvm/microvm-backend.js';
import { BackendRegistry } from '../isolation/registry.js';
import { canonicalKind } from '../contract/backend-kinds.js';
import type { EgressHostOptions } from '../egress/policy.js';
import type { SearchContext } from '../languages/resolve.js';
import type { SandboxBackend } from '../isolation/types.js';
import { loadConfig, type RunnerConfig } from './config.js';

/**
 * What every job shares: the backends, resolved toolchains, the compile cache. Whoever makes one
 * (a command, the service, an embedder) passes it to what runs jobs and disposes of it when done.
 */
export class RunnerRuntime {
  readonly backends: BackendRegistry;
  readonly toolchains: ToolchainCache;
  readonly compileCache: CompileCache;
  readonly stagingDir: string;

  constructor(
    readonly config: RunnerConfig,
    /** `egress`: how every backend's egress proxies resolve names and which upstream roots they trust (tests give a world of their own). */
    parts: { backend?: SandboxBackend; toolchainSearch?: SearchContext; egress?: EgressHostOptions } = {},
  ) {
    const egress = parts.egress ?? {};
    const local = parts.backend ?? new BubblewrapBackend({ runtimeDir: join(config.stateDir, 'runtime'), warmPerTemplate: config.backends.local_process.warmPerTemplate, egress });
    const gvisor = new GvisorBackend({ runtimeDir: join(config.stateDir, 'runtime', 'gvisor'), egress });
    const microvm = new MicrovmBackend({ runtimeDir: join(config.stateDir, 'runtime', 'microvm'), ...config.backends.microvm, egress });
    this.backends = new BackendRegistry([local, gvisor, microvm], canonicalKind(config.backends.default) ?? 'local_process');
    this.toolchains = new ToolchainCache({
      stateDir: config.stateDir,
      ...(parts.toolchainSearch ?? { searchPath: process.env.PATH ?? '', useWellKnownPaths: true }),
    });
    this.compileCache = new CompileCache(join(config.stateDir, 'cache', 'bin'));
    this.stagingDir = join(config.stateDir, 'jobs');
  }

  /** The default backend. */
  get backend(): SandboxBackend {
    return this.backends.get();
  }

  /** Stops pre-started sandboxes and unmounts what this process mounted; jobs already running finish. */
  async dispose(): Promise<void> {
    await Promise.all([this.backends.dispose(), this.toolchains.dispose()]);
  }
}

/** Runs `use` on a runtime made from `config` for it alone, disposed of once `use` is done, whatever its outcome. */
export async function usingRuntime<T>(config: RunnerConfig, use: (runtime: RunnerRuntime) => Promise<T>): Promise<T> {
  const runtime = new RunnerRuntime(config);
  try {
    return await use(runtime);
  } finally {
    await runtime.dispose();
  }
}

/**
 * Runs `use` on the caller's runtime or, when none is given (a library call such as README's),
 * on one made for this call from the environment's configuration (loadConfig: AGENT_RUNNER_CONFIG,
 * AGENT_RUNNER_*) and disposed of after it, so that the call leaves no pre-started sandbox,
 * mount or timer behind it.
 */
export function withRuntime<T>(given: RunnerRuntime | undefined, use: (runtime: RunnerRuntime) => Promise<T>): Promise<T> {
  return given === undefined ? usingRuntime(loadConfig(), use) : use(given);
}
