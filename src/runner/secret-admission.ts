import { randomBytes } from 'node:crypto';
import { contractError, type ContractError } from '../contract/errors.js';
import type { Secrets } from '../contract/run-job.js';
import { parseDomainRule, type DomainRule } from '../egress/domain-rule.js';
import type { EgressSecret } from '../egress/policy.js';
import type { SandboxNetwork } from '../isolation/types.js';

/**
 * A request's secrets as the egress proxy takes them: each with a placeholder random for this
 * job, which is all the job ever sees (as the variable of the secret's name). The proxy puts the
 * value in place only on requests to the secret's hosts, so secrets need egress by name. No
 * message here quotes a value.
 */
export function admitSecrets(
  secrets: Secrets | undefined,
  network: SandboxNetwork,
  env: Readonly<Record<string, string>>,
): { network: SandboxNetwork; placeholders: Record<string, string> } | { error: ContractError } {
  const entries = Object.entries(secrets ?? {});
  if (entries.length === 0) return { network, placeholders: {} };
  if (network === 'none' || !('proxy' in network)) {
    return {
      error: contractError('validation.invalid_request', 'secrets need policy.network {"allow_domains": [...]}: only the egress proxy can put them in place', { field: 'secrets' }),
    };
  }
  const admitted: EgressSecret[] = [];
  for (const [name, { value, hosts }] of entries) {
    const field = `secrets.${name}`;
    if (name in env) return { error: contractError('validation.invalid_request', `${field}: command.env also sets ${name}`, { field }) };
    // A value goes into an HTTP header: a line break or NUL would smuggle a header of its own.
    if (/[\r\n\0]/.test(value)) return { error: contractError('validation.invalid_request', `${field}.value must not contain a line break or NUL`, { field: `${field}.value` }) };
    const rules: DomainRule[] = [];
    for (const [index, host] of hosts.entries()) {
      const rule = parseDomainRule(host);
      if (!rule)
        return {
          error: contractError('validation.invalid_request', `${field}.hosts.${index} must name a domain, got ${JSON.stringify(host)}`, { field: `${field}.hosts.${index}` }),
        };
      rules.push(rule);
    }
    admitted.push({ name, placeholder: `agent-runner-secret-${name}-${randomBytes(16).toString('hex')}`, value, hosts: rules });
  }
  const placeholders = Object.fromEntries(admitted.map((secret) => [secret.name, secret.placeholder]));
  return { network: { proxy: { ...network.proxy, secrets: admitted } }, placeholders };
}
