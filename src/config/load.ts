import { readFileSync } from 'node:fs';
import { validate } from '../contract/validate.js';
import { envSettings } from './env.js';
import { configDefaults, RunnerConfigSchema, type RunnerConfig } from './schema.js';

type DeepPartial<T> = T extends object ? { [K in keyof T]?: DeepPartial<T[K]> } : T;
export type ConfigOverrides = DeepPartial<RunnerConfig>;

/** Values over the defaults, and who to blame for a field that does not validate. */
interface Layer {
  values: Record<string, unknown>;
  blame(field: string): string;
}

/**
 * The effective configuration: schema defaults < the JSON file named by AGENT_RUNNER_CONFIG
 * (what `--config FILE` sets) < AGENT_RUNNER_* variables < `overrides` (command-line flags),
 * merged deeply: a layer that sets one field of a section keeps the others.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: ConfigOverrides = {}): RunnerConfig {
  const layers: Layer[] = [];
  if (env.AGENT_RUNNER_CONFIG) layers.push(fileLayer(env.AGENT_RUNNER_CONFIG));
  layers.push(envLayer(env));
  layers.push({ values: overrides as Record<string, unknown>, blame: () => 'flags' });
  let config: unknown = configDefaults(env);
  // Checked after each layer, so an error names the layer that brought the bad value.
  for (const layer of layers) {
    config = mergeDeep(config, layer.values);
    const checked = validate(RunnerConfigSchema, config);
    if (!checked.ok) throw new Error(`invalid configuration (${layer.blame(checked.field)}): ${checked.message}`);
  }
  return config as RunnerConfig;
}

function fileLayer(file: string): Layer {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new Error(`cannot read config file ${file}: ${(error as Error).message}`, { cause: error });
  }
  let values: unknown;
  try {
    values = JSON.parse(text);
  } catch (error) {
    throw new Error(`config file ${file} is not valid JSON: ${(error as Error).message}`, { cause: error });
  }
  if (!isPlainObject(values)) throw new Error(`config file ${file} must hold a JSON object`);
  return { values, blame: () => `config file ${file}` };
}

function envLayer(env: NodeJS.ProcessEnv): Layer {
  const settings = envSettings(env);
  const values: Record<string, unknown> = {};
  for (const { path, value } of settings) {
    const parent = path.slice(0, -1).reduce((node, key) => (node[key] ??= {}) as Record<string, unknown>, values);
    parent[path.at(-1)!] = value;
  }
  return {
    values,
    blame: (field) => settings.findLast(({ path }) => path.join('.') === field)?.variable ?? 'environment',
  };
}

/** Objects merge key by key; anything else (a number, an array, null) replaces; undefined is no value. */
function mergeDeep(base: unknown, over: unknown): unknown {
  if (!isPlainObject(base) || !isPlainObject(over)) return over === undefined ? base : over;
  const merged: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(over)) merged[key] = mergeDeep(base[key], value);
  return merged;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
