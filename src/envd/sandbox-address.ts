import type { IncomingHttpHeaders } from 'node:http';
import { ENVD_PORT } from '../contract/e2b.js';
import { SANDBOX_ID_PATTERN } from '../contract/sandbox.js';

/** `{port}-{sandboxId}.{domain}`, how E2B names a sandbox's port when a wildcard DNS name points here. */
const SANDBOX_HOST = /^(\d{1,5})-([0-9a-z]{8,64})\./;

/** The shape of a sandbox id (ours are 24 of [0-9a-z]); anything else is no sandbox, found without asking the database. */
export const SANDBOX_ID = new RegExp(SANDBOX_ID_PATTERN);

export interface SandboxAddress {
  sandboxId: string;
  port: number;
}

/** The sandbox and port a host name names (`{port}-{id}.{domain}`), or null. */
export function sandboxOfHost(host: string | undefined): SandboxAddress | null {
  const byName = SANDBOX_HOST.exec(host ?? '');
  return byName ? { sandboxId: byName[2]!, port: Number(byName[1]) } : null;
}

/** The sandbox and port a request is for (E2B's `E2b-Sandbox-Id` and `-Port` headers, else its host name), or null when it is for this service itself. */
export function sandboxTarget(headers: IncomingHttpHeaders): SandboxAddress | null {
  const id = headers['e2b-sandbox-id'];
  if (typeof id === 'string' && id !== '') {
    const port = Number(headers['e2b-sandbox-port'] ?? ENVD_PORT);
    return { sandboxId: id, port: Number.isInteger(port) ? port : -1 };
  }
  return sandboxOfHost(headers.host);
}

/** Why a request's sandbox and port cannot name one (a 400), or null. */
export function badTarget(target: SandboxAddress): string | null {
  if (!Number.isInteger(target.port) || target.port < 1 || target.port > 65535) return 'a sandbox port is an integer from 1 to 65535';
  return SANDBOX_ID.test(target.sandboxId) ? null : 'no sandbox has such an id';
}

/** `/files?...signature=...`: a signed download or upload URL (E2B's `downloadUrl` / `uploadUrl`) made against this service's URL. */
export function isSignedFilesUrl(url: string): boolean {
  const parsed = new URL(url, 'http://front-door');
  return parsed.pathname === '/files' && parsed.searchParams.has('signature');
}
