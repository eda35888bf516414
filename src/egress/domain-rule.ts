import { isIP } from 'node:net';

/** Ports a rule written without one allows: plain HTTP and HTTPS. */
export const DEFAULT_PORTS: readonly number[] = [80, 443];

/**
 * One entry of `policy.network.allow_domains` (or a secret's `hosts`), parsed: `api.github.com`
 * is that name only; `*.example.org` is any name below example.org, never example.org itself.
 * Names are compared in lower case, without a trailing dot.
 */
export type DomainRule = NameRule | AnyNameRule;

export interface NameRule {
  kind: 'name';
  /** As the request wrote it, for messages. */
  written: string;
  /** The name, or for a wildcard the suffix below which names match. */
  name: string;
  wildcard: boolean;
  ports: readonly number[];
}

/**
 * Every name and address, on every port: the internet an operator allows a long-lived sandbox
 * on a backend without user-mode networking (sandboxes/sandbox-plan.ts). Never written by a request. The
 * proxy still refuses whatever resolves to the host or a private, loopback or link-local range
 * (refused-address.ts), as for any allowed name.
 */
export interface AnyNameRule {
  kind: 'any';
  written: 'any name';
}

export const ANY_NAME: AnyNameRule = { kind: 'any', written: 'any name' };

/**
 * Parses `[*.]name[:port]` (the schema checked its characters); null for an IP address, which
 * names no domain.
 */
export function parseDomainRule(written: string): NameRule | null {
  const colon = written.lastIndexOf(':');
  const pattern = colon === -1 ? written : written.slice(0, colon);
  const ports = colon === -1 ? DEFAULT_PORTS : [Number(written.slice(colon + 1))];
  const wildcard = pattern.startsWith('*.');
  const name = canonicalName(wildcard ? pattern.slice(2) : pattern);
  // A name whose last label is all digits is an IPv4 address in some spelling (1.2.3.4, 0x7f.1).
  if (isIP(name) !== 0 || /^[0-9]+$/.test(name.slice(name.lastIndexOf('.') + 1))) return null;
  return { kind: 'name', written, name, wildcard, ports };
}

/** Whether `host:port` is allowed by the rule. */
export function ruleMatches(rule: DomainRule, host: string, port: number | null): boolean {
  if (rule.kind === 'any') return true;
  const name = canonicalName(host);
  const nameMatches = rule.wildcard ? name.endsWith(`.${rule.name}`) : name === rule.name;
  return nameMatches && (port === null || rule.ports.includes(port));
}

/** Lower case, no trailing dot: `API.GitHub.com.` and `api.github.com` are one name. */
export function canonicalName(host: string): string {
  return host.toLowerCase().replace(/\.$/, '');
}
