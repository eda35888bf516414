import { createHash } from 'node:crypto';

/**
 * Secrets stay out of the run store. A request is stored with `command.env` keeping its keys,
 * each value replaced by `{"sha256": "<hex digest of the value's UTF-8 bytes>"}`, and each of
 * its `secrets` keeping its hosts, its value replaced the same way: a record still shows which
 * variables and secrets a job had, and a caller can check a value it knows, but the store (its
 * files, its backups) never holds one. The job itself gets the real env values (and for secrets
 * only placeholders), which travel in memory only (front door -> worker); the replay hash is
 * computed on them there.
 */
export function redactRequest(request: unknown): unknown {
  return mapRedactable(request, (value) => (typeof value === 'string' ? { sha256: sha256(value) } : value));
}

/** A stored request whose env or secret values were redacted: it cannot be run as asked. */
export function hasRedactedValues(request: unknown): boolean {
  let found = false;
  mapRedactable(request, (value) => {
    found ||= isRedactedValue(value);
    return value;
  });
  return found;
}

/**
 * The stored request with each redacted env value as '' and each redacted secret as a marker
 * (keys and hosts kept): a shape the contract accepts, from which a result of a job that never
 * ran can be built. Never run it.
 */
export function blankRedactedValues(request: unknown): unknown {
  if (!hasRedactedValues(request)) return request;
  return mapRedactable(request, (value, kind) => (isRedactedValue(value) ? (kind === 'env' ? '' : 'redacted') : value));
}

/** The request with `map` applied to each env value and each secret's value (a copy when there are any). */
function mapRedactable(request: unknown, map: (value: unknown, kind: 'env' | 'secret') => unknown): unknown {
  if (!isObject(request)) return request;
  let mapped: Record<string, unknown> = request;
  const { command, secrets } = request;
  if (isObject(command) && isObject(command.env)) {
    const env = Object.fromEntries(Object.entries(command.env).map(([key, value]) => [key, map(value, 'env')]));
    mapped = { ...mapped, command: { ...command, env } };
  }
  if (isObject(secrets)) {
    const redacted = Object.fromEntries(Object.entries(secrets).map(([name, secret]) => [name, isObject(secret) ? { ...secret, value: map(secret.value, 'secret') } : secret]));
    mapped = { ...mapped, secrets: redacted };
  }
  return mapped;
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
