import { isIP } from 'node:net';
import { contractError, type ContractError } from '../contract/errors.js';
import type { NetworkPolicy } from '../contract/run-job.js';
import type { EgressTarget, SandboxNetwork } from '../sandbox/types.js';

/**
 * A request's network as the sandbox takes it: "allow" is egress to anywhere but the host; a
 * list, TCP to those pairs only. Refused where the runner disables the network.
 */
export function admitNetwork(network: NetworkPolicy, allowNetwork: boolean, field: string): SandboxNetwork | { error: ContractError } {
  if (network === 'none') return 'none';
  if (!allowNetwork) return { error: contractError('validation.invalid_request', `${field}: the network is disabled on this runner (only "none")`, { field }) };
  if (network === 'allow') return { allow: null };
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
