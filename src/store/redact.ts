import { createHash } from 'node:crypto';

/**
 * Secrets stay out of the run store. A request is stored with `command.env` keeping its keys,
 * each value replaced by `{"sha256": "<hex digest of the value's UTF-8 bytes>"}`: a record
 * still shows which variables a job had, and a caller can check a value it knows, but the
 * store (its files, its backups) never holds one. The job itself gets the real values, which
 * travel in memory only (front door -> worker); the replay hash is computed on them there.
 */
export function redactRequest(request: unknown): unknown {
  const env = envOf(request);
  if (env === null) return request;
  const redacted = Object.fromEntries(Object.entries(env).map(([key, value]) => [key, typeof value === 'string' ? { sha256: sha256(value) } : value]));
  const { command } = request as { command: Record<string, unknown> };
  return { ...(request as Record<string, unknown>), command: { ...command, env: redacted } };
}

/** A stored request whose env values were redacted: it cannot be run as asked. */
export function hasRedactedEnv(request: unknown): boolean {
  const env = envOf(request);
  return env !== null && Object.values(env).some(isRedactedValue);
}

/**
 * The stored request with each redacted value as '' (keys kept): a shape the contract accepts,
 * from which a result of a job that never ran can be built. Never run it.
 */
export function blankRedactedEnv(request: unknown): unknown {
  const env = envOf(request);
  if (env === null || !hasRedactedEnv(request)) return request;
  const blanked = Object.fromEntries(Object.entries(env).map(([key, value]) => [key, isRedactedValue(value) ? '' : value]));
  const { command } = request as { command: Record<string, unknown> };
  return { ...(request as Record<string, unknown>), command: { ...command, env: blanked } };
}

function envOf(request: unknown): Record<string, unknown> | null {
  if (!isObject(request) || !isObject(request.command)) return null;
  const { env } = request.command;
  return isObject(env) ? env : null;
}

function isRedactedValue(value: unknown): boolean {
  return isObject(value) && typeof value.sha256 === 'string';
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function sha256(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex');
}
