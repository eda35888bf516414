import type { TSchema } from '@sinclair/typebox';
import { RunnerConfigSchema } from './schema.js';

const MiB = 1024 * 1024;

/** A setting given by one environment variable: where it goes, and the variable to blame. */
export interface EnvSetting {
  path: string[];
  variable: string;
  value: unknown;
}

/**
 * Names older than the systematic ones, kept working; the systematic name of the same setting
 * is read after them, so it wins.
 */
const ALIASES: Array<{ variable: string; path: string[]; convert?: (value: number) => number }> = [
  { variable: 'AGENT_RUNNER_TOKEN', path: ['service', 'token'] },
  { variable: 'AGENT_RUNNER_MEMORY_MB', path: ['snippet', 'memoryBytes'], convert: (mb) => mb * MiB },
  { variable: 'AGENT_RUNNER_MAX_TIMEOUT_SECONDS', path: ['snippet', 'maxTimeoutSeconds'] },
  { variable: 'AGENT_RUNNER_WORKSPACE_ROOTS', path: ['runJob', 'workspaceRoots'] },
  { variable: 'AGENT_RUNNER_DATABASE_URL', path: ['service', 'databaseUrl'] },
];

/** `runJob.ceilings.timeout_ms` is AGENT_RUNNER_RUN_JOB__CEILINGS__TIMEOUT_MS: `__` between levels. */
export function envName(path: readonly string[]): string {
  return `AGENT_RUNNER_${path.map((key) => key.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase()).join('__')}`;
}

/** Every AGENT_RUNNER_* setting present (an empty variable counts as unset), in the order they apply. */
export function envSettings(env: NodeJS.ProcessEnv): EnvSetting[] {
  const settings: EnvSetting[] = [];
  const read = (variable: string, path: string[], leaf: TSchema, convert: (value: number) => number = (value) => value) => {
    const text = env[variable];
    if (text === undefined || text === '') return;
    settings.push({ variable, path, value: parse(variable, text, leaf, convert) });
  };
  for (const alias of ALIASES) read(alias.variable, alias.path, leafAt(alias.path), alias.convert);
  for (const [path, leaf] of leaves(RunnerConfigSchema, [])) read(envName(path), path, leaf);
  return settings;
}

function leaves(schema: TSchema, path: string[]): Array<[string[], TSchema]> {
  // A map of named entries (sandboxes.templates) is one leaf: its variable holds JSON.
  if (schema.type !== 'object' || schema.properties === undefined) return [[path, schema]];
  return Object.entries(schema.properties as Record<string, TSchema>).flatMap(([key, child]) => leaves(child, [...path, key]));
}

function leafAt(path: readonly string[]): TSchema {
  return path.reduce<TSchema>((schema, key) => (schema.properties as Record<string, TSchema>)[key]!, RunnerConfigSchema);
}

/** Text to the leaf's JSON type; the schema checks the range afterwards. A nullable leaf takes its non-null type. */
function parse(variable: string, text: string, leaf: TSchema, convert: (value: number) => number): unknown {
  const type = (leaf.anyOf as TSchema[] | undefined)?.[0]?.type ?? leaf.type;
  if (type === 'integer' || type === 'number') {
    const value = Number(text);
    if (!Number.isFinite(value)) throw new Error(`${variable} must be a number, got ${JSON.stringify(text)}`);
    return convert(value);
  }
  // A list of paths, as PATH is written: `a:b:c` (empty entries dropped).
  if (type === 'array') return text.split(':').filter((entry) => entry !== '');
  if (type === 'object') {
    try {
      return JSON.parse(text) as unknown;
    } catch (error) {
      throw new Error(`${variable} must be a JSON object: ${(error as Error).message}`, { cause: error });
    }
  }
  if (type === 'boolean') {
    if (text !== 'true' && text !== 'false') throw new Error(`${variable} must be true or false, got ${JSON.stringify(text)}`);
    return text === 'true';
  }
  return text;
}
