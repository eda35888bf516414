import { readFile } from 'node:fs/promises';
import { usageError } from './errors.js';
import type { JobDefinition } from './job-store.js';

const KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Every job process inherits this variable: it finds the processes that left the job's tree
 * (setsid, double fork) when the job's supervisor is gone.
 */
export const MARKER_VARIABLE = 'AGENT_EXEC_JOB_ID';

export function markerOf(jobId: string): string {
  return `${MARKER_VARIABLE}=${jobId}`;
}
const MASK = '***';

/** KEY=VALUE pairs (as --env gives them); later keys override earlier ones. */
export function parseEnvPairs(pairs: readonly string[], source: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const pair of pairs) {
    const equals = pair.indexOf('=');
    const key = pair.slice(0, equals);
    if (equals <= 0 || !KEY.test(key)) throw usageError(`${source} takes KEY=VALUE, got ${JSON.stringify(pair)}`);
    env[key] = pair.slice(equals + 1);
  }
  return env;
}

/**
 * A dotenv-style file: KEY=VALUE lines, optionally after `export `, with blank lines and
 * # comments skipped and one pair of surrounding quotes removed (no escapes, no expansion).
 */
export async function readEnvFile(path: string): Promise<Record<string, string>> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw usageError(`--env-file ${path}: ${(error as Error).message}`);
  }
  const pairs = text
    .split(/\r?\n/)
    .map((line) => line.trim().replace(/^export\s+/, ''))
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => line.replace(/^([^=]*=)(["'])(.*)\2$/, '$1$3'));
  return parseEnvPairs(pairs, `--env-file ${path}`);
}

/** The variables given for the job as KEY=VALUE, masked ones as KEY=***. */
export function describeEnv(definition: Pick<JobDefinition, 'env' | 'masked'>): string[] {
  return Object.entries(definition.env).map(([key, value]) => `${key}=${definition.masked.includes(key) ? MASK : value}`);
}

/** What the job's process gets: the launcher's environment unless asked not to, the given variables, and the marker. */
export function jobEnvironment(definition: JobDefinition, inherited: NodeJS.ProcessEnv): Record<string, string> {
  const base = definition.inherit_env ? Object.fromEntries(Object.entries(inherited).filter((entry): entry is [string, string] => entry[1] !== undefined)) : {};
  return { ...base, ...definition.env, [MARKER_VARIABLE]: definition.id };
}
