import type { DomainRule } from './domain-rule.js';

/** A secret the proxy writes into requests to its hosts, in place of its placeholder. */
export interface EgressSecret {
  /** The request's name for it (the job's environment variable). */
  name: string;
  /** What the job sees instead of the value: random for each job. */
  placeholder: string;
  value: string;
  hosts: readonly DomainRule[];
}

/** Egress through the proxy only: HTTP and TLS to these names, decided by name on the host. */
export interface ProxiedEgress {
  domains: readonly DomainRule[];
  secrets: readonly EgressSecret[];
}

/** Resolves a name on the host, for the proxy's connection (never for its decision). */
export type EgressResolver = (host: string) => Promise<string[]>;

/** What the host gives every job's proxy: tests replace both with a world of their own. */
export interface EgressHostOptions {
  resolve?: EgressResolver;
  /** CA certificates (PEM) the proxy trusts for upstream TLS; default: node's bundled roots. */
  upstreamCa?: string;
}
