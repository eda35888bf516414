import { resolve } from 'node:path';
import type { Command } from 'commander';
import type { ConfigOverrides } from '../config/load.js';
import type { RunnerConfig } from '../config/schema.js';
import type { RunnerRuntime } from '../runner/runtime.js';

/**
 * The configuration a command runs on: defaults < the program's --config FILE (in place of
 * AGENT_RUNNER_CONFIG) < AGENT_RUNNER_* variables < the command's own flags (`overrides`).
 * Handed to the command, never written into process.env for whatever loads later to find.
 */
export async function commandConfig(command: Command, overrides: ConfigOverrides = {}): Promise<RunnerConfig> {
  const { loadConfig } = await import('../config/load.js');
  const { config: file } = command.optsWithGlobals<{ config?: string }>();
  return loadConfig(file === undefined ? process.env : { ...process.env, AGENT_RUNNER_CONFIG: resolve(file) }, overrides);
}

/** Runs `use` on a runtime built from the command's configuration, disposed of once it is done. */
export async function withCommandRuntime<T>(command: Command, use: (runtime: RunnerRuntime) => Promise<T>): Promise<T> {
  const [config, { usingRuntime }] = await Promise.all([commandConfig(command), import('../runner/runtime.js')]);
  return usingRuntime(config, use);
}
