import { join } from 'node:path';
import { CompileCache } from '../languages/compile-cache.js';
import { ToolchainCache } from '../languages/catalog.js';
import { BubblewrapBackend } from '../sandbox/bubblewrap/bubblewrap-backend.js';
import { GvisorBackend } from '../sandbox/gvisor/gvisor-backend.js';
import { MicrovmBackend } from '../sandbox/microvm/microvm-backend.js';
import { BackendRegistry } from '../sandbox/registry.js';
import { canonicalKind } from '../contract/backend-kinds.js';
import type { SearchContext } from '../languages/resolve.js';
import type { SandboxBackend } from '../sandbox/types.js';
import { loadConfig, type RunnerConfig } from './config.js';

/** What every job shares: the backends, resolved toolchains, the compile cache. Built once. */
export class RunnerRuntime {
  readonly backends: BackendRegistry;
  readonly toolchains: ToolchainCache;
  readonly compileCache: CompileCache;
  readonly stagingDir: string;

  constructor(
    readonly config: RunnerConfig,
    parts: { backend?: SandboxBackend; toolchainSearch?: SearchContext } = {},
  ) {
    const local = parts.backend ?? new BubblewrapBackend({ runtimeDir: join(config.stateDir, 'runtime') });
    const gvisor = new GvisorBackend({ runtimeDir: join(config.stateDir, 'runtime', 'gvisor') });
    const microvm = new MicrovmBackend({ runtimeDir: join(config.stateDir, 'runtime', 'microvm'), ...config.backends.microvm });
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

  private static sharedRuntime: RunnerRuntime | undefined;

  /** The process-wide runtime on the configuration from the environment. */
  static shared(): RunnerRuntime {
    RunnerRuntime.sharedRuntime ??= new RunnerRuntime(loadConfig());
    return RunnerRuntime.sharedRuntime;
  }
}
