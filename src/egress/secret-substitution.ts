import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { ruleMatches } from './domain-rule.js';
import type { EgressSecret } from './policy.js';

/**
 * The secrets whose hosts include `host`: only requests to these hosts get their values.
 * Elsewhere a placeholder travels as the job wrote it.
 */
export function secretsFor(secrets: readonly EgressSecret[], host: string): EgressSecret[] {
  return secrets.filter((secret) => secret.hosts.some((rule) => ruleMatches(rule, host, null)));
}

/** The request's headers with each placeholder of `secrets` replaced by its value (headers only: never the URL or the body). */
export function substituteHeaders(headers: IncomingHttpHeaders, secrets: readonly EgressSecret[]): OutgoingHttpHeaders {
  if (secrets.length === 0) return { ...headers };
  const substitute = (value: string) => secrets.reduce((text, secret) => text.split(secret.placeholder).join(secret.value), value);
  return Object.fromEntries(
    Object.entries(headers)
      .filter((entry): entry is [string, string | string[]] => entry[1] !== undefined)
      .map(([name, value]) => [name, Array.isArray(value) ? value.map(substitute) : substitute(value)]),
  );
}
