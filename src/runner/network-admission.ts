import { isIP } from 'node:net';
import { contractError, type ContractError } from '../contract/errors.js';
import type { NetworkPolicy } from '../contract/run-job.js';
import { parseDomainRule, type DomainRule } from '../egress/domain-rule.js';
import type { EgressTarget, SandboxNetwork } from '../isolation/types.js';

/**
 * A request's network as the sandbox takes it: "allow" is egress to anywhere but the host; a
 * list, TCP to those pairs only; domains, HTTP and TLS to those names through the egress proxy.
 * Refused where the runner disables the network.
 */
export function admitNetwork(network: NetworkPolicy, allowNetwork: boolean, field: string): SandboxNetwork | { error: ContractError } {
  if (network === 'none') return 'none';
  if (!allowNetwork) return { error: contractError('validation.invalid_request', `${field}: the network is disabled on this runner (only "none")`, { field }) };
  if (network === 'allow') return { allow: null };
  if ('allow_domains' in network) {
    const domains: DomainRule[] = [];
    for (const [index, entry] of network.allow_domains.entries()) {
      const rule = parseDomainRule(entry);
      if (!rule) {
        const entryField = `${field}.allow_domains.${index}`;
        return {
          error: contractError('validation.invalid_request', `${entryField} must name a domain, got the address ${JSON.stringify(entry)} (addresses go in policy.network.allow)`, {
            field: entryField,
          }),
        };
      }
      domains.push(rule);
    }
    return { proxy: { domains, secrets: [] } };
  }
  const allow: EgressTarget[] = [];
  for (const [index, entry] of network.allow.entries()) {
    // The schema checked the shape; a bracketed host must also be an IPv6 address.
    const colon = entry.lastIndexOf(':');
    const host = entry.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
    if (entry.startsWith('[') && isIP(host) !== 6) {
      const entryField = `${field}.allow.${index}`;
      return { error: contractError('validation.invalid_request', `${entryField} must be host:port or [IPv6]:port, got ${JSON.stringify(entry)}`, { field: entryField }) };
    }
    allow.push({ host, port: Number(entry.slice(colon + 1)) });
  }
  return { allow };
}
